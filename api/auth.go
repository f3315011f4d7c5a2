package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/internal/clip"
	"github.com/dagflow/dagflow/persistence"
)

// Scope is what an API key may do (client.Scope): read < operate <
// admin.
type Scope = client.Scope

// The scopes of API keys.
const (
	// ScopeRead may read: workflows, runs, dead letters, schedules, queues.
	ScopeRead = client.ScopeRead
	// ScopeOperate may also trigger, cancel and retry runs, and retry or
	// discard dead letters.
	ScopeOperate = client.ScopeOperate
	// ScopeAdmin may also pause, resume and trigger schedules, and
	// create, list and revoke API keys.
	ScopeAdmin = client.ScopeAdmin
)

// KeyStore keeps API keys; persistence.Store implements it, and
// Engine.APIKeys returns the engine's.
type KeyStore = persistence.APIKeys

// secretPrefix starts every API key, so that a leaked key is easy to
// recognise (and to scan for).
const secretPrefix = "dfk_"

// secretLen is the length of a secret: the prefix and 43 characters of
// base64url (32 bytes).
const secretLen = len(secretPrefix) + 43

// ErrMalformedSecret is returned for a string that starts like an API
// key's secret ("dfk_") but is not one: "dfk_" and 43 base64url
// characters.
var ErrMalformedSecret = errors.New(`api: not a well-formed API key secret (want "dfk_" and 43 base64url characters)`)

// wellFormedSecret reports whether s has the form of a secret that
// CreateKey makes. Anything else is refused before it is hashed or looked
// up, so that garbage costs no store query.
func wellFormedSecret(s string) bool {
	if len(s) != secretLen || !strings.HasPrefix(s, secretPrefix) {
		return false
	}
	for i := len(secretPrefix); i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// redactPath replaces every segment of a URL path that starts with "dfk_"
// (an API key's secret, as someone may paste into DELETE
// /v1/api-keys/{key}) with "dfk_REDACTED", for logs and problem details.
func redactPath(p string) string {
	if !strings.Contains(p, secretPrefix) {
		return p
	}
	segs := strings.Split(p, "/")
	for i, sg := range segs {
		if strings.HasPrefix(sg, secretPrefix) {
			segs[i] = secretPrefix + "REDACTED"
		}
	}
	return strings.Join(segs, "/")
}

// hintLen is how many characters of a secret its listing shows.
const hintLen = 12

// maxKeyName bounds a key's name.
const maxKeyName = 100

// ValidateKeyName checks an API key's name: 1 to 100 letters, digits,
// '.', '_' or '-', not starting with "dfk_" (that is how secrets start: a
// name that does is most likely a pasted secret, and the error does not
// repeat it).
func ValidateKeyName(name string) error {
	if len(name) >= len(secretPrefix) && strings.EqualFold(name[:len(secretPrefix)], secretPrefix) {
		return fmt.Errorf("api: key name starting with %q: that is how a key's secret starts, so a name may not (the name is not repeated here, in case it is a secret)", secretPrefix)
	}
	if len(name) == 0 || len(name) > maxKeyName {
		return fmt.Errorf("api: key name %q: length %d not in 1..%d", clip.String(name), len(name), maxKeyName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("api: key name %q: character %q at %d is not a letter, digit, '.', '_' or '-'", clip.String(name), c, i)
		}
	}
	return nil
}

// CreateKey makes a new API key with scope ("read", "operate" or "admin")
// and stores its SHA-256 under name. It returns the secret, which is
// shown once and never stored: "dfk_" and 43 characters of base64url (32
// random bytes). A name used by a key that is not revoked gives an error
// wrapping persistence.ErrAPIKeyExists.
func CreateKey(ctx context.Context, store KeyStore, name, scope string, now time.Time) (string, persistence.APIKey, error) {
	if err := ValidateKeyName(name); err != nil {
		return "", persistence.APIKey{}, err
	}
	if !Scope(scope).Valid() {
		return "", persistence.APIKey{}, fmt.Errorf("api: key scope %q: want read, operate or admin", clip.String(scope))
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", persistence.APIKey{}, fmt.Errorf("api: key secret: %w", err)
	}
	secret := secretPrefix + base64.RawURLEncoding.EncodeToString(raw)
	id, err := uuid.NewV7()
	if err != nil {
		return "", persistence.APIKey{}, fmt.Errorf("api: key id: %w", err)
	}
	sum := sha256.Sum256([]byte(secret))
	k, err := store.APIKeyCreate(ctx, persistence.APIKey{
		ID:        id.String(),
		Name:      name,
		Scope:     scope,
		Hash:      sum[:],
		Hint:      secret[:hintLen],
		CreatedAt: now,
	})
	if err != nil {
		return "", persistence.APIKey{}, fmt.Errorf("api: create key %q: %w", name, err)
	}
	return secret, k, nil
}

// RevokeKey revokes the key with this id, this name or, when ref starts
// with "dfk_", this secret (found by its hash; a secret is never repeated
// in an error). Requests with it are refused within keyCacheTTL. An
// unknown key gives an error wrapping persistence.ErrAPIKeyNotFound; a
// ref that starts with "dfk_" but is not a well-formed secret, one
// wrapping ErrMalformedSecret.
func RevokeKey(ctx context.Context, store KeyStore, ref string, now time.Time) (persistence.APIKey, error) {
	p := persistence.APIKeyRevokeParams{Now: now}
	if strings.HasPrefix(ref, secretPrefix) {
		if !wellFormedSecret(ref) {
			return persistence.APIKey{}, ErrMalformedSecret
		}
		sum := sha256.Sum256([]byte(ref))
		k, err := store.APIKeyByHash(ctx, sum[:])
		if err != nil {
			return persistence.APIKey{}, fmt.Errorf("api: revoke the key of the secret given: %w", err)
		}
		if subtle.ConstantTimeCompare(k.Hash, sum[:]) != 1 {
			return persistence.APIKey{}, fmt.Errorf("api: revoke the key of the secret given: %w", persistence.ErrAPIKeyNotFound)
		}
		p.ID = k.ID
		rk, err := store.APIKeyRevoke(ctx, p)
		if err != nil {
			return persistence.APIKey{}, fmt.Errorf("api: revoke key %q (by its secret): %w", k.Name, err)
		}
		return rk, nil
	}
	if _, err := uuid.Parse(ref); err == nil {
		p.ID = ref
	} else {
		if err := ValidateKeyName(ref); err != nil {
			return persistence.APIKey{}, err
		}
		p.Name = ref
	}
	k, err := store.APIKeyRevoke(ctx, p)
	if err != nil {
		return persistence.APIKey{}, fmt.Errorf("api: revoke key %q: %w", ref, err)
	}
	return k, nil
}

// ListKeys lists every API key (revoked ones too), oldest first. The
// secrets are not stored: a key shows its hint, the secret's first 12
// characters.
func ListKeys(ctx context.Context, store KeyStore) ([]persistence.APIKey, error) {
	ks, err := store.APIKeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("api: list keys: %w", err)
	}
	return ks, nil
}

// keyCacheTTL is how long a key that was found valid is trusted without
// asking the store again. A revoked key is refused at most this long
// after its revocation.
const keyCacheTTL = time.Second

// maxCachedKeys bounds the cache; when full it is emptied.
const maxCachedKeys = 10000

// principal is who makes a request.
type principal struct {
	keyID string // empty for an anonymous request
	name  string
	scope Scope
}

// authenticator checks bearer keys against the store, with a short
// positive cache.
type authenticator struct {
	store KeyStore
	now   func() time.Time
	ttl   time.Duration

	mu    sync.Mutex
	cache map[[32]byte]cachedKey

	// anonymous is Options.AllowAnonymous; keyed is set once the store
	// was seen to hold a key that is not revoked, which ends anonymous
	// access for good; noKeysUntil is when the store must be asked again.
	anonymous   bool
	keyed       bool
	noKeysUntil time.Time
}

// anonymousOpen reports whether a request without a key may come in:
// Options.AllowAnonymous is set and the store holds no key that is not
// revoked. It asks the store (APIKeyList: the key table is small, and it
// is read at most once per keyCacheTTL) when the last answer is older
// than keyCacheTTL, so a key created while the server runs turns
// authentication on within a second. Once a key was seen, anonymous
// access stays off, even if that key is revoked later.
func (a *authenticator) anonymousOpen(ctx context.Context) (bool, *apiError) {
	if !a.anonymous {
		return false, nil
	}
	now := a.now()
	a.mu.Lock()
	keyed, fresh := a.keyed, now.Before(a.noKeysUntil)
	a.mu.Unlock()
	if keyed {
		return false, nil
	}
	if fresh {
		return true, nil
	}
	keys, err := a.store.APIKeyList(ctx)
	if err != nil {
		ae := problemf(http.StatusServiceUnavailable, CodeUnavailable, "the API keys cannot be read now")
		ae.err = err
		return false, ae
	}
	active := false
	for _, k := range keys {
		active = active || k.RevokedAt == nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if active {
		a.keyed = true
		return false, nil
	}
	a.noKeysUntil = now.Add(keyCacheTTL)
	return true, nil
}

// checkLocalRequest refuses, with a 403 problem saying why, a request that
// a web page may have sent to a server that lets requests in without a
// key: one whose Host is not a loopback IP or "localhost" (DNS
// rebinding: a page of evil.example whose name now resolves to
// 127.0.0.1 sends "Host: evil.example"), and one other than GET or HEAD
// whose Origin is not a loopback or localhost origin, or whose
// Sec-Fetch-Site is "cross-site" (a cross-site form or fetch). A request
// from curl or a program has a local Host and no Origin, and passes. A
// /v1 write must also be one a browser preflights (checkPreflighted); the
// dashboard's forms carry a CSRF token instead.
func checkLocalRequest(r *http.Request) *apiError {
	if !localHost(r.Host) {
		return problemf(http.StatusForbidden, CodeForbidden,
			"Host %q is not a loopback address or localhost: this server has no API key and serves only local requests (a web page may reach it by DNS rebinding); create a key (dagflow apikeys create) to serve requests by other names", clip.String(r.Host))
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return problemf(http.StatusForbidden, CodeForbidden,
			"%s from another site (Sec-Fetch-Site: cross-site): this server has no API key and takes no cross-site requests", r.Method)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !localHost(u.Host) {
			return problemf(http.StatusForbidden, CodeForbidden,
				"%s with Origin %q: this server has no API key and takes requests only from loopback or localhost origins", r.Method, clip.String(origin))
		}
	}
	return nil
}

// checkAnonymousAPI is what a /v1 request without a key must pass:
// checkLocalRequest, and for a write checkPreflighted.
func checkAnonymousAPI(r *http.Request) *apiError {
	if ae := checkLocalRequest(r); ae != nil {
		return ae
	}
	return checkPreflighted(r)
}

// PreflightHeader is the header that marks a write without a JSON body
// as sent by a program: a browser sends it to another origin only after
// a CORS preflight, which the API does not answer. The Go client sends
// it on every write.
const PreflightHeader = client.PreflightHeader

// checkPreflighted refuses, with a 415 problem naming the headers, a
// write (any method but GET and HEAD) that a web page of another origin
// could send without a CORS preflight: one with neither Content-Type
// application/json (or another +json type) nor an X-Dagflow-Request
// header. A text/plain, form or multipart body, or no body at all, is
// such a "simple" request; "localhost:3000" is another origin than
// "localhost:8080", but the same host to checkLocalRequest's Origin test.
// A request with an Authorization header is preflighted for that header.
func checkPreflighted(r *http.Request) *apiError {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Header.Get(PreflightHeader) != "" {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	what := "no Content-Type"
	if ct != "" {
		what = fmt.Sprintf("Content-Type %q", clip.String(ct))
	}
	return problemf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia,
		"%s with %s and no %s header: this server has no API key, and takes a write only with Content-Type: application/json or an %s: 1 header (which a web page of another origin cannot send without a CORS preflight)",
		r.Method, what, PreflightHeader, PreflightHeader)
}

// localHost reports whether hostport ("host", "host:port", "[::1]:port")
// names a loopback IP or localhost.
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type cachedKey struct {
	key   persistence.APIKey
	until time.Time
}

// authenticate returns the principal of the request's bearer key, or the
// problem to answer with. The key never appears in a problem or a log.
func (a *authenticator) authenticate(ctx context.Context, header string) (principal, *apiError) {
	scheme, secret, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return principal{}, problemf(http.StatusUnauthorized, CodeUnauthorized, "the Authorization header is not \"Bearer <api key>\"")
	}
	secret = strings.TrimSpace(secret)
	if !wellFormedSecret(secret) {
		return principal{}, problemf(http.StatusUnauthorized, CodeUnauthorized, "the bearer token is not an API key (\"dfk_\" and 43 base64url characters)")
	}
	sum := sha256.Sum256([]byte(secret))
	now := a.now()
	a.mu.Lock()
	c, hit := a.cache[sum]
	a.mu.Unlock()
	var k persistence.APIKey
	if hit && now.Before(c.until) {
		k = c.key
	} else {
		var err error
		k, err = a.store.APIKeyByHash(ctx, sum[:])
		if errors.Is(err, persistence.ErrAPIKeyNotFound) {
			return principal{}, problemf(http.StatusUnauthorized, CodeUnauthorized, "unknown API key")
		}
		if err != nil {
			ae := problemf(http.StatusServiceUnavailable, CodeUnavailable, "the API keys cannot be read now")
			ae.err = err
			return principal{}, ae
		}
	}
	// The store found the key by its hash; comparing again in constant
	// time keeps a store whose lookup is not exact from letting a key in.
	if subtle.ConstantTimeCompare(k.Hash, sum[:]) != 1 {
		return principal{}, problemf(http.StatusUnauthorized, CodeUnauthorized, "unknown API key")
	}
	if k.RevokedAt != nil {
		a.forget(sum)
		return principal{}, problemf(http.StatusUnauthorized, CodeUnauthorized, "API key %q was revoked", k.Name)
	}
	if !hit || !now.Before(c.until) {
		a.remember(sum, k, now)
	}
	return principal{keyID: k.ID, name: k.Name, scope: Scope(k.Scope)}, nil
}

func (a *authenticator) remember(sum [32]byte, k persistence.APIKey, now time.Time) {
	if a.ttl <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= maxCachedKeys {
		clear(a.cache)
	}
	a.cache[sum] = cachedKey{key: k, until: now.Add(a.ttl)}
}

func (a *authenticator) forget(sum [32]byte) {
	a.mu.Lock()
	delete(a.cache, sum)
	a.mu.Unlock()
}

package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// cookieName is the session cookie's name.
const cookieName = "dagflow_session"

// maxSessions bounds the sessions kept; when full the oldest idle one
// goes first.
const maxSessions = 10000

// maxSessionsPerKey bounds one API key's sessions: a key logging in
// again and again replaces its own oldest session rather than filling
// the table and evicting everyone else's.
const maxSessionsPerKey = 100

// session is one logged-in browser. The key's secret stays in the
// server's memory, never in the cookie, and is checked again on every
// request (Config.Authenticate caches for a second), so a revoked key
// ends its sessions within a second.
type session struct {
	id        string
	secret    string // empty for an anonymous session
	anonymous bool
	name      string
	scope     Scope
	csrf      string
	seen      time.Time
	// flash is the message an action left for the next page the session
	// loads (kept here, not in the URL: it can name runs and errors).
	flash string
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	now func() time.Time
	// ends holds a channel per session, closed when the session goes
	// (logout, expiry, eviction, its key's revocation): its event
	// streams end with it.
	ends map[string]chan struct{}
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, ends: map[string]chan struct{}{}, ttl: ttl, now: now}
}

// remove forgets a session and ends its streams; ss.mu is held.
func (ss *sessions) remove(id string) {
	delete(ss.m, id)
	if c, ok := ss.ends[id]; ok {
		close(c)
		delete(ss.ends, id)
	}
}

// ended returns a channel closed when the session id goes (already
// closed if it is gone).
func (ss *sessions) ended(id string) <-chan struct{} {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if c, ok := ss.ends[id]; ok {
		return c
	}
	c := make(chan struct{})
	close(c)
	return c
}

// peek returns a copy of the session without counting it as used (an
// open event stream is not activity): nil if it is gone or idle past
// the TTL.
func (ss *sessions) peek(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return nil
	}
	if ss.now().Sub(s.seen) > ss.ttl {
		ss.remove(id)
		return nil
	}
	c := *s
	return &c
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("dashboard: no randomness: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (ss *sessions) create(secret string, anonymous bool, name string, scope Scope) *session {
	s := &session{id: randomToken(), secret: secret, anonymous: anonymous, name: name, scope: scope, csrf: randomToken(), seen: ss.now()}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !anonymous {
		var oldest *session
		n := 0
		for _, x := range ss.m {
			if !x.anonymous && x.secret == secret {
				n++
				if oldest == nil || x.seen.Before(oldest.seen) {
					oldest = x
				}
			}
		}
		if n >= maxSessionsPerKey {
			ss.remove(oldest.id)
		}
	}
	if len(ss.m) >= maxSessions {
		var oldest *session
		for _, x := range ss.m {
			if oldest == nil || x.seen.Before(oldest.seen) {
				oldest = x
			}
		}
		ss.remove(oldest.id)
	}
	ss.m[s.id] = s
	ss.ends[s.id] = make(chan struct{})
	return s
}

func (ss *sessions) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return nil
	}
	now := ss.now()
	if now.Sub(s.seen) > ss.ttl {
		ss.remove(id)
		return nil
	}
	s.seen = now
	c := *s
	return &c
}

// setFlash leaves msg for the session's next page.
func (ss *sessions) setFlash(id, msg string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.m[id]; ok {
		s.flash = msg
	}
}

// takeFlash returns and forgets the session's message.
func (ss *sessions) takeFlash(id string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return ""
	}
	msg := s.flash
	s.flash = ""
	return msg
}

// drop forgets a session and ends its event streams.
func (ss *sessions) drop(id string) {
	ss.mu.Lock()
	ss.remove(id)
	ss.mu.Unlock()
}

// stillValid checks an open stream's session again: not dropped nor
// expired, its key still valid (or keyless access still open). A key
// that is unknown now drops the session; an error reading the keys
// keeps the stream (the next check tries again).
func (d *Dashboard) stillValid(r *http.Request, id string) bool {
	s := d.sessions.peek(id)
	if s == nil {
		return false
	}
	if s.anonymous {
		open, err := d.anonymousOpen(r)
		if err == nil && !open {
			d.sessions.drop(id)
			return false
		}
		return err == nil
	}
	_, err := d.cfg.Authenticate(r.Context(), s.secret)
	if errors.Is(err, ErrUnknownKey) {
		d.sessions.drop(id)
		return false
	}
	return true
}

// sessionOf returns the request's session: the cookie's, checked again
// (its key still valid, or keyless access still open), or a new
// anonymous one where Config.AnonymousOpen lets the request in. Without
// either it is a 401 httpError.
func (d *Dashboard) sessionOf(w http.ResponseWriter, r *http.Request) (*session, error) {
	if c, err := r.Cookie(cookieName); err == nil {
		if s := d.sessions.get(c.Value); s != nil {
			if s.anonymous {
				open, err := d.anonymousOpen(r)
				if err != nil {
					return nil, err
				}
				if open {
					return s, nil
				}
				d.sessions.drop(s.id)
			} else {
				p, err := d.cfg.Authenticate(r.Context(), s.secret)
				switch {
				case errors.Is(err, ErrUnknownKey):
					d.sessions.drop(s.id)
				case err != nil:
					return nil, &httpError{status: http.StatusServiceUnavailable, msg: "The API keys cannot be read now", err: err}
				default:
					s.scope, s.name = p.Scope, p.Name
					return s, nil
				}
			}
		}
	}
	open, err := d.anonymousOpen(r)
	if err != nil {
		return nil, err
	}
	if open {
		s := d.sessions.create("", true, "anonymous", ScopeAdmin)
		d.setCookie(w, r, s.id)
		return s, nil
	}
	return nil, &httpError{status: http.StatusUnauthorized, msg: "Log in with an API key to see this page."}
}

func (d *Dashboard) anonymousOpen(r *http.Request) (bool, error) {
	if d.cfg.AnonymousOpen == nil {
		return false, nil
	}
	open, err := d.cfg.AnonymousOpen(r)
	if err != nil {
		return false, &httpError{status: http.StatusForbidden, msg: err.Error()}
	}
	return open, nil
}

// secureCookie reports whether the session cookie of an answer to r is
// marked Secure: with Config.SecureCookie, when r came over TLS, and when
// a proxy says it forwarded r from HTTPS (the first X-Forwarded-Proto, or
// the first Forwarded element's proto, is "https"). The headers need no
// trusted proxy: a client that sends them can only make its own cookie
// stricter, and a web page cannot add them to a browser's request to
// another site without a preflight.
func (d *Dashboard) secureCookie(r *http.Request) bool {
	if d.cfg.SecureCookie || r.TLS != nil {
		return true
	}
	if v := r.Header.Get("X-Forwarded-Proto"); v != "" {
		first, _, _ := strings.Cut(v, ",")
		return strings.EqualFold(strings.TrimSpace(first), "https")
	}
	first, _, _ := strings.Cut(r.Header.Get("Forwarded"), ",")
	for _, pair := range strings.Split(first, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(pair), "=")
		if strings.EqualFold(k, "proto") {
			return strings.EqualFold(strings.Trim(v, `"`), "https")
		}
	}
	return false
}

func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: d.path("/"), HttpOnly: true, Secure: d.secureCookie(r),
		SameSite: http.SameSiteStrictMode, MaxAge: int(d.cfg.SessionTTL / time.Second),
	})
}

// checkCSRF refuses a state-changing request without the session's CSRF
// token (form field "csrf" or header X-CSRF-Token), or from another
// origin (Origin, Sec-Fetch-Site).
func checkCSRF(r *http.Request, s *session) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	token := r.Header.Get("X-CSRF-Token")
	if token == "" {
		token = r.PostFormValue("csrf")
	}
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(s.csrf)) != 1 {
		return &httpError{status: http.StatusForbidden, msg: "The form's CSRF token is missing or not this session's: reload the page and try again."}
	}
	return nil
}

// checkOrigin refuses a request a page of another origin sent: its
// Sec-Fetch-Site is cross-site or same-site, or its Origin is not this
// server's.
func checkOrigin(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return &httpError{status: http.StatusForbidden, msg: "The request came from another site (Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + ")."}
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return &httpError{status: http.StatusForbidden, msg: fmt.Sprintf("The request's Origin %q is not this server's (%s).", truncate(origin), truncate(r.Host))}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"), d.cfg.BasePath)
	if open, err := d.anonymousOpen(r); err == nil && open {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	d.render(w, r, nil, http.StatusOK, "login", "Log in", map[string]any{"Next": next})
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if err := checkOrigin(r); err != nil {
		d.fail(w, r, nil, err)
		return
	}
	if err := readForm(w, r, 64<<10); err != nil {
		d.fail(w, r, nil, err)
		return
	}
	secret := strings.TrimSpace(r.PostFormValue("key"))
	next := safeNext(r.PostFormValue("next"), d.cfg.BasePath)
	p, err := d.cfg.Authenticate(r.Context(), secret)
	if err != nil {
		status, msg := http.StatusUnauthorized, "That key is not a valid API key (unknown, malformed or revoked)."
		if !errors.Is(err, ErrUnknownKey) {
			status, msg = http.StatusServiceUnavailable, "The API keys cannot be read now; try again."
			d.cfg.Logger.ErrorContext(r.Context(), "dashboard: login", "err", err)
		}
		d.render(w, r, nil, status, "login", "Log in", map[string]any{"Next": next, "Error": msg})
		return
	}
	if old, err := r.Cookie(cookieName); err == nil {
		d.sessions.drop(old.Value)
	}
	s := d.sessions.create(secret, false, p.Name, p.Scope)
	d.setCookie(w, r, s.id)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, s *session) error {
	d.sessions.drop(s.id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: d.path("/"), HttpOnly: true, Secure: d.secureCookie(r),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, d.path("/login"), http.StatusSeeOther)
	return nil
}

// safeNext keeps a post-login destination on this server: a path under
// base, never another host ("//evil", "/\\evil", "/\t/evil").
func safeNext(next, base string) string {
	if !localPath(next) || !strings.HasPrefix(next, base+"/") {
		return base + "/"
	}
	return next
}

// localPath reports whether p is a path on this server that a browser
// cannot read as another host: it parses as a URL without scheme, host
// or user, starts with exactly one "/", and holds no control character
// (browsers drop tabs and newlines, so "/\t/evil" would become
// "//evil") and no backslash (which browsers read as "/"), neither as
// written nor once percent-decoded.
func localPath(p string) bool {
	if !plainPath(p) {
		return false
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return false
	}
	return plainPath(u.Path)
}

// plainPath: starts with a single "/", and has no control character
// and no backslash.
func plainPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	for _, r := range p {
		if r == '\\' || unicode.IsControl(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

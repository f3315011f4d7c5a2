package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/persistence"
)

// TestAnonymousServesOnlyLocalRequests: a server without keys refuses
// what a web page can send it: a request whose Host is another name (DNS
// rebinding), and a POST from another origin or site. curl's requests, and
// a page of a loopback origin, pass.
func TestAnonymousServesOnlyLocalRequests(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	host := func(h string) func(*http.Request) { return func(r *http.Request) { r.Host = h } }
	do := func(method, path, body string, edit func(*http.Request), header ...string) rawResp {
		t.Helper()
		r, err := env.rawDo(method, path, body, edit, header...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// DNS rebinding: evil.example now resolves to 127.0.0.1.
	for _, h := range []string{"evil.example", "evil.example:8080", "127.0.0.1.nip.io", "10.0.0.1:8080"} {
		p := do("GET", "/v1/runs", "", host(h)).problem(t, http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(p.Detail, "Host") || !strings.Contains(p.Detail, "loopback") {
			t.Fatalf("Host %s: detail %q does not say why", h, p.Detail)
		}
		do("POST", "/v1/workflows/order/runs", `{}`, host(h)).problem(t, http.StatusForbidden, api.CodeForbidden)
	}
	for _, h := range []string{"localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1", "127.0.0.2:9", "[::1]:8080"} {
		do("GET", "/v1/runs", "", host(h)).decode(t, http.StatusOK, nil)
	}

	// A cross-site POST: refused, by Origin or by Sec-Fetch-Site.
	for _, hdr := range [][]string{
		{"Origin: https://evil.example"},
		{"Origin: null"},
		{"Origin: http://127.0.0.1.evil.example:8080"},
		{"Sec-Fetch-Site: cross-site"},
		{"Origin: http://localhost:8080", "Sec-Fetch-Site: cross-site"},
	} {
		p := do("POST", "/v1/workflows/order/runs", `{}`, nil, hdr...).problem(t, http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(p.Detail, "POST") {
			t.Fatalf("%v: detail %q", hdr, p.Detail)
		}
		do("DELETE", "/v1/api-keys/ci", "", nil, hdr...).problem(t, http.StatusForbidden, api.CodeForbidden)
	}
	if n := countRuns(t, env); n != 0 {
		t.Fatalf("%d runs made by refused requests", n)
	}
	// A cross-site GET reads nothing the page can see (CORS), so it passes.
	do("GET", "/v1/runs", "", nil, "Origin: https://evil.example").decode(t, http.StatusOK, nil)

	// curl (no Origin), a same-origin fetch, and a loopback page post.
	for _, hdr := range [][]string{
		nil,
		{"Sec-Fetch-Site: same-origin", "Origin: http://127.0.0.1:8080"},
		{"Origin: http://localhost:3000", "Sec-Fetch-Site: same-site"},
		{"Origin: http://[::1]:8080"},
	} {
		do("POST", "/v1/workflows/order/runs", `{}`, nil, hdr...).decode(t, http.StatusCreated, nil)
	}

	// With a key the checks are the key's: a request that sends one is
	// authenticated whatever its Host.
	secret := newKey(t, env, "root", api.ScopeAdmin)
	do("GET", "/v1/runs", "", host("dagflow.internal"), "Authorization: Bearer "+secret).decode(t, http.StatusOK, nil)
}

// TestAnonymousEndsWhenAKeyExists: a key created while the server runs
// turns authentication on within a second, and it stays on when the key
// is revoked.
func TestAnonymousEndsWhenAKeyExists(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		ctx := context.Background()
		if _, err := env.anon.ListRuns(ctx, client.RunFilter{}); err != nil {
			t.Fatalf("no key in the store: %v", err)
		}
		secret := newKey(t, env, "ci", api.ScopeOperate)
		env.Clock.Advance(1100 * time.Millisecond)
		r := env.raw(t, "GET", "/v1/runs", "")
		r.problem(t, http.StatusUnauthorized, api.CodeUnauthorized)
		if got := r.header.Get("WWW-Authenticate"); got != `Bearer realm="dagflow"` {
			t.Fatalf("WWW-Authenticate %q: no token was sent, so no error", got)
		}
		if _, err := env.client(t, secret).ListRuns(ctx, client.RunFilter{}); err != nil {
			t.Fatalf("the new key: %v", err)
		}
		if _, err := api.RevokeKey(ctx, keyStore(t, env), "ci", env.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		env.Clock.Advance(1100 * time.Millisecond)
		env.raw(t, "GET", "/v1/runs", "").problem(t, http.StatusUnauthorized, api.CodeUnauthorized)
		// Public routes stay public.
		if _, err := env.anon.Healthz(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// countingKeys counts the lookups of a KeyStore.
type countingKeys struct {
	api.KeyStore
	byHash atomic.Int64
}

func (c *countingKeys) APIKeyByHash(ctx context.Context, hash []byte) (persistence.APIKey, error) {
	c.byHash.Add(1)
	return c.KeyStore.APIKeyByHash(ctx, hash)
}

// TestMalformedTokenCostsNoLookup: a bearer token that is not "dfk_" and
// 43 base64url characters is refused (401, error="invalid_token") before
// it is hashed or looked up.
func TestMalformedTokenCostsNoLookup(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{keys: true})
	keys := &countingKeys{KeyStore: keyStore(t, env)}
	srv := httptest.NewServer(api.NewHandler(env.Engine, api.Options{Keys: keys, Now: env.Clock.Now}))
	t.Cleanup(srv.Close)
	get := func(token string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", srv.URL+"/v1/runs", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := env.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tok := range []string{
		"garbage",
		"dfk_",
		"dfk_" + strings.Repeat("A", 42),
		"dfk_" + strings.Repeat("A", 44),
		"dfk_" + strings.Repeat("A", 42) + "!",
		"dfk_" + strings.Repeat("A", 42) + "=",
		"DFK_" + strings.Repeat("A", 43),
		strings.Repeat("x", 4000),
	} {
		resp := get(tok)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="dagflow", error="invalid_token"` {
			t.Fatalf("token %.20q: %d, WWW-Authenticate %q", tok, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if n := keys.byHash.Load(); n != 0 {
		t.Fatalf("malformed tokens made %d key lookups, want 0", n)
	}
	// A well-formed unknown key is looked up, once, and refused the same way.
	resp := get("dfk_" + strings.Repeat("A", 43))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("unknown key: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if n := keys.byHash.Load(); n != 1 {
		t.Fatalf("an unknown well-formed key made %d lookups, want 1", n)
	}
	// A real key passes.
	if resp := get(newKey(t, env, "ci", api.ScopeRead)); resp.StatusCode != http.StatusOK {
		t.Fatalf("a real key: %d", resp.StatusCode)
	}
}

// TestHardeningHeaders: every answer says nosniff; /v1 answers are not
// to be cached.
func TestHardeningHeaders(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	for _, tc := range []struct {
		method, path string
		noStore      bool
	}{
		{"GET", "/healthz", false},
		{"GET", "/openapi.yaml", false},
		{"GET", "/nope", false},
		{"GET", "/v1/runs", true},
		{"GET", "/v1/runs/nope", true},
		{"PUT", "/v1/runs", true},
		{"POST", "/v1/workflows/order/runs", true},
	} {
		r := env.raw(t, tc.method, tc.path, "")
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q", tc.method, tc.path, got)
		}
		if got := r.header.Get("Cache-Control"); (got == "no-store") != tc.noStore {
			t.Errorf("%s %s: Cache-Control %q, want no-store: %v", tc.method, tc.path, got, tc.noStore)
		}
	}
}

// TestRevokeBySecret: a pasted secret revokes its key, and is never
// repeated in an answer or the request log; a key name may not start
// like a secret.
func TestRevokeBySecret(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{keys: true})
		ctx := context.Background()
		adminSecret := newKey(t, env, "root", api.ScopeAdmin)
		admin := env.client(t, adminSecret)
		env.adminClient = admin
		leaked := newKey(t, env, "ci", api.ScopeOperate)
		ci := env.client(t, leaked)
		if _, err := ci.ListRuns(ctx, client.RunFilter{}); err != nil {
			t.Fatal(err)
		}

		rk, err := admin.RevokeAPIKey(ctx, leaked)
		if err != nil || rk.Name != "ci" || rk.RevokedAt == nil {
			t.Fatalf("revoke by secret = %+v, %v", rk, err)
		}
		env.Clock.Advance(1100 * time.Millisecond)
		_, err = ci.ListRuns(ctx, client.RunFilter{})
		problemOf(t, err, http.StatusUnauthorized, api.CodeUnauthorized)

		// Again: it is revoked already, and the answer says when.
		r := env.raw(t, "DELETE", "/v1/api-keys/"+leaked, "", "Authorization: Bearer "+adminSecret)
		r.decode(t, http.StatusOK, nil)
		// An unknown secret, a malformed one, another method on the path.
		unknown := "dfk_" + strings.Repeat("Z", 43)
		malformed := "dfk_" + strings.Repeat("Z", 10) + "secretish"
		for _, tc := range []struct {
			method, ref string
			status      int
			code        string
		}{
			{"DELETE", unknown, http.StatusNotFound, api.CodeNotFound},
			{"DELETE", malformed, http.StatusBadRequest, api.CodeInvalidName},
			{"GET", leaked, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed},
		} {
			r := env.raw(t, tc.method, "/v1/api-keys/"+tc.ref, "", "Authorization: Bearer "+adminSecret)
			r.problem(t, tc.status, tc.code)
			if strings.Contains(string(r.body), tc.ref[4:]) {
				t.Fatalf("%s %s: the answer repeats the secret: %s", tc.method, tc.ref, r.body)
			}
		}
		_, err = admin.RevokeAPIKey(ctx, unknown)
		if !client.IsNotFound(err) {
			t.Fatalf("revoke an unknown secret = %v, want a 404", err)
		}

		// A name that starts like a secret is refused without being repeated.
		for _, name := range []string{leaked, "dfk_ci", "DFK_x"} {
			_, err := admin.CreateAPIKey(ctx, name, "read")
			p := problemOf(t, err, http.StatusBadRequest, api.CodeInvalidName)
			if strings.Contains(p.Detail, name) {
				t.Fatalf("the problem repeats the name %q: %s", name, p.Detail)
			}
			if _, _, err := api.CreateKey(ctx, keyStore(t, env), name, "read", env.Clock.Now()); err == nil || strings.Contains(err.Error(), name) {
				t.Fatalf("CreateKey(%q) = %v, want an error that does not repeat it", name, err)
			}
		}

		logs := env.logs.String()
		for _, s := range []string{leaked, leaked[4:], unknown, malformed} {
			if strings.Contains(logs, s) {
				t.Fatalf("the log holds %q:\n%s", s, logs)
			}
		}
		if !strings.Contains(logs, "path=/v1/api-keys/dfk_REDACTED") {
			t.Fatalf("the log does not show the redacted path:\n%s", logs)
		}
	})
}

// TestClientGoneIsNotAnError: a request whose client went away (its
// context cancelled) is answered nothing and logged at debug level, not
// as a 500 with an error line.
func TestClientGoneIsNotAnError(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	logs := &syncBuffer{}
	h := api.NewHandler(env.Engine, api.Options{
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		AllowAnonymous: true,
		Now:            env.Clock.Now,
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, path := range []string{"/v1/runs", "/v1/workflows"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil).WithContext(ctx))
		if rec.Code == http.StatusInternalServerError || rec.Body.Len() != 0 {
			t.Fatalf("GET %s by a client gone: %d %s", path, rec.Code, rec.Body)
		}
	}
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "status=499") {
		t.Fatalf("log:\n%s", out)
	}
}

// TestBasePath: mounted under a prefix that a server strips, the handler
// gives Locations under that prefix, which lead back to the run.
func TestBasePath(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	for _, base := range []string{"/dagflow", "/dagflow/", "dagflow"} {
		mux := http.NewServeMux()
		mux.Handle("/dagflow/", http.StripPrefix("/dagflow", api.NewHandler(env.Engine, api.Options{
			BasePath: base, AllowAnonymous: true, Now: env.Clock.Now,
		})))
		srv := httptest.NewServer(mux)
		c, err := client.New(srv.URL+"/dagflow", client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		run, created, err := c.Trigger(context.Background(), "order", client.TriggerRequest{})
		if err != nil || !created {
			t.Fatalf("BasePath %q: trigger = %v, %v", base, created, err)
		}
		resp, err := http.Post(srv.URL+"/dagflow/v1/workflows/order/runs", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(loc, "/dagflow/v1/runs/") || loc == "/dagflow/v1/runs/"+run.ID {
			t.Fatalf("BasePath %q: %d, Location %q", base, resp.StatusCode, loc)
		}
		got, err := http.Get(srv.URL + loc)
		if err != nil {
			t.Fatal(err)
		}
		got.Body.Close()
		if got.StatusCode != http.StatusOK {
			t.Fatalf("BasePath %q: GET %s = %d", base, loc, got.StatusCode)
		}
		srv.Close()
	}
}

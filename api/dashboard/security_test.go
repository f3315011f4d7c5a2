package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/persistence"
)

// TestReadSessionSeesNoActionsAndIsRefused: a read key's session shows
// no action button anywhere, and the server refuses the actions with 403
// even with the session's own CSRF token; an operate session may act,
// but not without the token nor from another origin.
func TestReadSessionSeesNoActionsAndIsRefused(t *testing.T) {
	e := newEnv(t, envOptions{keys: true})
	ctx := context.Background()
	readKey, _, err := api.CreateKey(ctx, e.Store, "viewer", "read", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	opKey, _, err := api.CreateKey(ctx, e.Store, "operator", "operate", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	failed := e.Trigger(t, "shop", map[string]string{"fail": "a"})
	e.waitRun(t, failed)

	anon := e.browser(t)
	if a := anon.get("/runs"); a.status != http.StatusSeeOther || !strings.Contains(a.header.Get("Location"), "/login") {
		t.Fatalf("GET /runs without a session: %d to %q, want 303 to the login", a.status, a.header.Get("Location"))
	}
	if a := anon.do("POST", "/login", url.Values{"key": {"dfk_" + strings.Repeat("A", 43)}}, nil); a.status != http.StatusUnauthorized {
		t.Errorf("login with an unknown key: %d, want 401", a.status)
	}

	reader := e.browser(t)
	reader.login(readKey)
	var token string
	for _, p := range []string{"/", "/runs", "/runs/" + failed, "/runs/" + failed + "?step=a", "/dead-letters", "/schedules", "/workflows/shop", "/workflows", "/queues", "/nodes"} {
		a := reader.get(p)
		if a.status != http.StatusOK {
			t.Fatalf("GET %s as read: %d\n%s", p, a.status, a.body)
		}
		for _, bad := range []string{`class="act`, `class="danger act`, `id="trigger-run"`, "Retry this dead step", "Cancel selected"} {
			if strings.Contains(a.body, bad) {
				t.Errorf("GET %s as read shows an action (%q)", p, bad)
			}
		}
		if !strings.Contains(a.body, "viewer · read") {
			t.Errorf("GET %s does not name the session's key and scope", p)
		}
		token = csrf(t, a) // the logout form's
	}
	for _, p := range []string{"/runs/" + failed + "/retry", "/runs/" + failed + "/cancel", "/runs/" + failed + "/steps/a/retry",
		"/workflows/shop/trigger", "/runs/bulk", "/dead-letters/bulk", "/schedules/nightly/pause"} {
		a := reader.do("POST", p, url.Values{"csrf": {token}, "action": {"retry"}, "item": {failed + "/a"}}, nil)
		if a.status != http.StatusForbidden {
			t.Errorf("POST %s as read: %d, want 403", p, a.status)
		}
	}

	op := e.browser(t)
	op.login(opKey)
	page := op.get("/runs/" + failed)
	if !strings.Contains(page.body, `id="retry-run"`) {
		t.Fatalf("an operate session sees no retry button on a failed run:\n%s", page.body)
	}
	tok := csrf(t, page)
	if a := op.do("POST", "/runs/"+failed+"/retry", url.Values{}, nil); a.status != http.StatusForbidden {
		t.Errorf("POST without a CSRF token: %d, want 403", a.status)
	}
	if a := op.do("POST", "/runs/"+failed+"/retry", url.Values{"csrf": {tok + "x"}}, nil); a.status != http.StatusForbidden {
		t.Errorf("POST with a wrong CSRF token: %d, want 403", a.status)
	}
	if a := op.do("POST", "/runs/"+failed+"/retry", url.Values{"csrf": {tok}}, map[string]string{"Origin": "https://evil.example"}); a.status != http.StatusForbidden {
		t.Errorf("POST from another origin: %d, want 403", a.status)
	}
	if a := op.do("POST", "/runs/"+failed+"/retry", url.Values{"csrf": {tok}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); a.status != http.StatusForbidden {
		t.Errorf("POST with Sec-Fetch-Site cross-site: %d, want 403", a.status)
	}
	ri, err := e.Engine.Get(ctx, failed)
	if err != nil || ri.Run.Status != persistence.RunFailed {
		t.Fatalf("after refused POSTs the run is %s (%v), want failed: nothing may change", ri.Run.Status, err)
	}
	// A schedule action needs admin.
	if a := op.do("POST", "/schedules/nightly/pause", url.Values{"csrf": {tok}}, nil); a.status != http.StatusForbidden {
		t.Errorf("POST a schedule action as operate: %d, want 403", a.status)
	}
	a := op.do("POST", "/runs/"+failed+"/retry", url.Values{"csrf": {tok}}, map[string]string{"Origin": op.u})
	if a.status != http.StatusSeeOther {
		t.Fatalf("POST retry as operate with the token: %d, want 303\n%s", a.status, a.body)
	}
	ri, err = e.Engine.Get(ctx, failed)
	if err != nil || ri.Run.Status == persistence.RunFailed {
		t.Errorf("the retried run is %s (%v), want it resumed", ri.Run.Status, err)
	}
}

// TestSessionCookieAndRevocation: the session cookie is HttpOnly and
// SameSite=Strict and holds no key; revoking the key ends its session
// within seconds.
func TestSessionCookieAndRevocation(t *testing.T) {
	e := newEnv(t, envOptions{keys: true})
	ctx := context.Background()
	key, _, err := api.CreateKey(ctx, e.Store, "ops", "operate", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	a := b.do("POST", "/login", url.Values{"key": {key}, "next": {"/runs"}}, nil)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/runs" {
		t.Fatalf("login: %d to %q, want 303 to /runs", a.status, a.header.Get("Location"))
	}
	c := a.header.Get("Set-Cookie")
	for _, want := range []string{"dagflow_session=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(c, want) {
			t.Errorf("Set-Cookie %q lacks %q", c, want)
		}
	}
	if strings.Contains(c, key) || strings.Contains(c, key[4:20]) {
		t.Errorf("the cookie carries the key: %q", c)
	}
	if a := b.do("POST", "/login", url.Values{"key": {key}, "next": {"//evil.example/x"}}, nil); a.header.Get("Location") != "/" {
		t.Errorf("login with next=//evil.example/x redirects to %q, want /", a.header.Get("Location"))
	}
	if a := b.get("/runs"); a.status != http.StatusOK {
		t.Fatalf("GET /runs with the session: %d", a.status)
	}
	if _, err := api.RevokeKey(ctx, e.Store, "ops", time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := b.get("/runs")
		if a.status == http.StatusSeeOther && strings.Contains(a.header.Get("Location"), "/login") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the key's revocation GET /runs still answers %d", a.status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHeadersAndRoutes: pages carry a CSP without inline scripts and the
// hardening headers; the JSON API's unknown paths still answer problems;
// keyless loopback mode lets pages in without a login but POSTs still
// need the token.
func TestHeadersAndRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.browser(t)
	a := b.get("/")
	if a.status != http.StatusOK {
		t.Fatalf("GET / in keyless mode: %d\n%s", a.status, a.body)
	}
	csp := a.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	if strings.Contains(a.body, "<script>") || strings.Contains(a.body, " on") && strings.Contains(a.body, "onclick=") {
		t.Errorf("the page has an inline script")
	}
	if a.header.Get("X-Frame-Options") != "DENY" || a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", a.header)
	}
	for _, p := range []string{"/v1/nope", "/nope", "/v2/x"} {
		a := b.get(p)
		if a.status != http.StatusNotFound || a.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("GET %s: %d %q, want a 404 problem", p, a.status, a.header.Get("Content-Type"))
		}
	}
	if a := b.get("/static/app.js"); a.status != http.StatusOK || !strings.Contains(a.body, "EventSource") {
		t.Errorf("GET /static/app.js: %d", a.status)
	}
	run := e.Trigger(t, "shop", map[string]string{"fail": "a"})
	e.waitRun(t, run)
	if a := b.do("POST", "/runs/"+run+"/retry", url.Values{}, nil); a.status != http.StatusForbidden {
		t.Errorf("keyless POST without the token: %d, want 403", a.status)
	}
	if a := b.do("POST", "/runs/"+run+"/retry", url.Values{"csrf": {csrf(t, b.get("/runs/"+run))}}, map[string]string{"Origin": "http://evil.example"}); a.status != http.StatusForbidden {
		t.Errorf("keyless POST from another origin: %d, want 403", a.status)
	}
}

// TestRedactOnPages: Options.Redact sees every input and output a page
// shows.
func TestRedactOnPages(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	e := newEnv(t, envOptions{redact: func(p api.Payload, data json.RawMessage) json.RawMessage {
		mu.Lock()
		seen[p.Kind+"/"+p.Step] = true
		mu.Unlock()
		if strings.Contains(string(data), "hunter2") {
			return json.RawMessage(`{"redacted":true}`)
		}
		return data
	}})
	run := e.Trigger(t, "shop", map[string]string{"secret": "hunter2"})
	e.waitRun(t, run)
	b := e.browser(t)
	for _, p := range []string{"/runs/" + run, "/runs/" + run + "?step=b"} {
		a := b.get(p)
		if a.status != http.StatusOK {
			t.Fatalf("GET %s: %d", p, a.status)
		}
		if strings.Contains(a.body, "hunter2") {
			t.Errorf("GET %s shows the secret", p)
		}
		if !strings.Contains(a.body, "redacted") {
			t.Errorf("GET %s shows no redacted value", p)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"input/", "output/", "output/b"} {
		if !seen[k] {
			t.Errorf("Redact was not asked about %s (asked: %v)", k, seen)
		}
	}
}

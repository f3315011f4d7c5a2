package dashboard_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestSecureCookieOption: behind a TLS-terminating proxy (plain HTTP to
// the server) the option marks the session cookie Secure; without it a
// plain HTTP answer's cookie is not.
func TestSecureCookieOption(t *testing.T) {
	for _, secure := range []bool{false, true} {
		e := newEnv(t, envOptions{secureCookie: secure})
		a := e.browser(t).get("/")
		c := a.header.Get("Set-Cookie")
		if !strings.Contains(c, "dagflow_session=") {
			t.Fatalf("GET / sets no session cookie: %q", c)
		}
		if got := strings.Contains(c, "; Secure"); got != secure {
			t.Errorf("with DashboardSecureCookie %v the cookie is %q", secure, c)
		}
	}
}

// TestSecureCookieBehindHTTPSProxy: a request that a proxy forwarded
// from HTTPS (X-Forwarded-Proto: https, or Forwarded: proto=https) gets a
// Secure cookie without the option; one forwarded from plain HTTP does
// not.
func TestSecureCookieBehindHTTPSProxy(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct {
		header map[string]string
		secure bool
	}{
		{map[string]string{"X-Forwarded-Proto": "https"}, true},
		{map[string]string{"X-Forwarded-Proto": "HTTPS, http"}, true},
		{map[string]string{"Forwarded": `for=10.0.0.1;proto=https;host=dagflow.example`}, true},
		{map[string]string{"X-Forwarded-Proto": "http"}, false},
		{map[string]string{"Forwarded": "proto=http"}, false},
		{nil, false},
	} {
		a := e.browser(t).do("GET", "/", nil, tc.header)
		c := a.header.Get("Set-Cookie")
		if got := strings.Contains(c, "; Secure"); got != tc.secure || !strings.Contains(c, "dagflow_session=") {
			t.Errorf("%v: cookie %q, want Secure %v", tc.header, c, tc.secure)
		}
	}
}

// TestFormLimits: a dashboard POST's body limit holds before anything
// parses it (the CSRF check included): a body declared or found larger
// than 1 MiB is 413 even with a valid token, and a form that is not
// application/x-www-form-urlencoded (multipart) is 415.
func TestFormLimits(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.browser(t)
	tok := csrf(t, b.get("/runs"))
	big := url.Values{"csrf": {tok}, "action": {"cancel"}, "id": {strings.Repeat("x", 2<<20)}}.Encode()

	postTo := func(path string, body io.Reader, ctype string, length int64) int {
		t.Helper()
		req, err := http.NewRequest("POST", b.u+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		req.Header.Set("Content-Type", ctype)
		resp, err := b.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	post := func(body io.Reader, ctype string, length int64) int {
		t.Helper()
		return postTo("/runs/bulk", body, ctype, length)
	}
	const form = "application/x-www-form-urlencoded"
	if got := post(strings.NewReader(big), form, int64(len(big))); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB form with its length declared: %d, want 413", got)
	}
	// Chunked: the length is unknown until the limit trips.
	if got := post(io.MultiReader(strings.NewReader(big)), form, -1); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB chunked form: %d, want 413", got)
	}
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("csrf", tok)
	_ = mw.WriteField("action", "cancel")
	_ = mw.Close()
	if got := post(bytes.NewReader(mp.Bytes()), mw.FormDataContentType(), int64(mp.Len())); got != http.StatusUnsupportedMediaType {
		t.Errorf("a multipart form: %d, want 415", got)
	}
	small := url.Values{"csrf": {tok}, "action": {"cancel"}}.Encode()
	if got := post(strings.NewReader(small), form+"; charset=utf-8", int64(len(small))); got != http.StatusOK {
		t.Errorf("a small form: %d, want 200 (the confirmation page)", got)
	}
	if got := postTo("/login", strings.NewReader("key=x"), "multipart/form-data; boundary=x", 5); got != http.StatusUnsupportedMediaType {
		t.Errorf("POST /login as multipart: %d, want 415", got)
	}
}

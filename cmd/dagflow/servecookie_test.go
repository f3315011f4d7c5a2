package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeDashboardSecureCookie: --dashboard-secure-cookie marks the
// session cookie Secure on a plain HTTP answer; without it such an answer's
// cookie is Secure only when a proxy says it forwarded from HTTPS.
func TestServeDashboardSecureCookie(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	cookie := func(u string, header ...string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", u+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range header {
			k, v, _ := strings.Cut(h, ": ")
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		c := resp.Header.Get("Set-Cookie")
		if !strings.Contains(c, "dagflow_session=") {
			t.Fatalf("GET / set no session cookie: %q", c)
		}
		return c
	}
	for _, tc := range []struct {
		flag   bool
		header []string
		secure bool
	}{
		{false, nil, false},
		{false, []string{"X-Forwarded-Proto: https"}, true},
		{true, nil, true},
	} {
		args := []string{"--listen", "127.0.0.1:0", "--no-workers"}
		if tc.flag {
			args = append(args, "--dashboard-secure-cookie")
		}
		u, errb, stop := env.startServe(t, ctx, args...)
		if c := cookie(u, tc.header...); strings.Contains(c, "; Secure") != tc.secure {
			t.Errorf("--dashboard-secure-cookie %v, %v: cookie %q, want Secure %v", tc.flag, tc.header, c, tc.secure)
		}
		if code := stop(); code != 0 {
			t.Errorf("serve exited %d:\n%s", code, errb)
		}
	}
}

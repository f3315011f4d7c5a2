package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
)

// streamEnds opens b's event stream and returns a channel closed when
// the server ends it.
func streamEnds(t *testing.T, ctx context.Context, b *browser) <-chan struct{} {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", b.u+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Jar: b.hc.Jar}).Do(req)
	if err != nil {
		t.Fatalf("GET /events: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %d", resp.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return ended
}

// TestStreamsEndWithTheirSession: revoking a key ends its sessions' open
// streams within seconds, and so does logging out; a stream of a session
// still valid stays open.
func TestStreamsEndWithTheirSession(t *testing.T) {
	e := newEnv(t, envOptions{keys: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	revoked, _, err := api.CreateKey(ctx, e.Store, "soon-revoked", "read", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := api.CreateKey(ctx, e.Store, "kept", "read", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := e.browser(t), e.browser(t), e.browser(t)
	a.login(revoked)
	b.login(kept)
	c.login(kept)
	aEnd, bEnd, cEnd := streamEnds(t, ctx, a), streamEnds(t, ctx, b), streamEnds(t, ctx, c)

	if _, err := api.RevokeKey(ctx, e.Store, "soon-revoked", time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-aEnd:
	case <-time.After(10 * time.Second):
		t.Fatal("10 s after its key was revoked the stream is still open")
	}

	page := c.get("/")
	if r := c.do("POST", "/logout", url.Values{"csrf": {csrf(t, page)}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.status)
	}
	select {
	case <-cEnd:
	case <-time.After(5 * time.Second):
		t.Fatal("5 s after logout the session's stream is still open")
	}
	select {
	case <-bEnd:
		t.Fatal("the stream of a session still valid ended")
	case <-time.After(3 * time.Second):
	}
	cancel()
	<-bEnd
}

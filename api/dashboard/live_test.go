package dashboard_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// openStream opens /events (for one run when run is set) and sends each
// event's data line to events until ctx ends.
func openStream(t *testing.T, ctx context.Context, b *browser, run string, events chan<- string) {
	t.Helper()
	path := "/events"
	if run != "" {
		path += "?run=" + run
	}
	req, err := http.NewRequestWithContext(ctx, "GET", b.u+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: b.hc.Jar}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				select {
				case events <- line:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
}

// waitStreams waits until the detector counts n open streams.
func waitStreams(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for e.stats().Subscribers != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open, want %d", e.stats().Subscribers, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamsShareOneDetector: 50 open pages cost the store what one
// does (one change query per poll, whatever the number of streams), each
// stream hears of a change, a run page's stream only of its own run's,
// and the detector stops when the last page goes. It reports the query
// rate.
func TestStreamsShareOneDetector(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.direct(t)
	b := e.browser(t)
	if a := b.get("/"); a.status != http.StatusOK { // the keyless session's cookie
		t.Fatalf("GET /: %d", a.status)
	}
	measure := func(streams int) float64 {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		events := make(chan string, 1000)
		for range streams {
			openStream(t, ctx, b, "", events)
		}
		waitStreams(t, e, streams)
		time.Sleep(1500 * time.Millisecond) // the first poll, and no other
		c0, k0, t0 := e.store.changes.Load(), e.store.keys.Load(), time.Now()
		time.Sleep(4 * time.Second)
		c1, k1, el := e.store.changes.Load(), e.store.keys.Load(), time.Since(t0)
		cancel()
		waitStreams(t, e, 0)
		rate := float64(c1-c0+k1-k0) / el.Seconds()
		t.Logf("%2d open streams: %d change queries and %d key reads in %v: %.2f store queries/s", streams, c1-c0, k1-k0, el.Round(time.Millisecond), rate)
		return rate
	}
	one := measure(1)
	fifty := measure(50)
	if fifty > one+0.6 || fifty > 1.6 {
		t.Errorf("50 streams cost %.2f store queries/s, one costs %.2f: the streams must share one detector (about 1/s)", fifty, one)
	}
	// Idle: no stream, no query.
	c0 := e.store.changes.Load()
	time.Sleep(2500 * time.Millisecond)
	if n := e.store.changes.Load() - c0; n != 0 {
		t.Errorf("with no stream open the detector asked the store %d times", n)
	}

	// Every stream hears of a change; a run page only of its run.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	all := make(chan string, 100)
	const n = 50
	for range n - 1 {
		openStream(t, ctx, b, "", all)
	}
	other := make(chan string, 100)
	openStream(t, ctx, b, "00000000-0000-7000-8000-000000000000", other)
	waitStreams(t, e, n)
	time.Sleep(1500 * time.Millisecond) // the detector's first poll sets its start
	run := e.Trigger(t, "shop", map[string]string{})
	e.waitRun(t, run)
	got := map[int]bool{}
	var mu sync.Mutex
	deadline := time.After(30 * time.Second)
	for len(got) < n-1 {
		select {
		case ev := <-all:
			if !strings.Contains(ev, run) && !strings.Contains(ev, `"all":true`) {
				t.Errorf("event %s does not name run %s", ev, run)
			}
			mu.Lock()
			got[len(got)] = true
			mu.Unlock()
		case <-deadline:
			t.Fatalf("%d of %d streams heard of the run", len(got), n-1)
		}
	}
	select {
	case ev := <-other:
		t.Errorf("a stream for another run heard %s", ev)
	case <-time.After(1500 * time.Millisecond):
	}
}

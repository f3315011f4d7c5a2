package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestListPagesUnderLoad: 50 open runs pages under the dev load (one
// order a second) each re-render at most once per 5 s, whatever the
// change rate; the test counts the store queries that costs (the
// detector's and the page renders') and reports them.
func TestListPagesUnderLoad(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.direct(t)
	b := e.browser(t)
	if a := b.get("/"); a.status != http.StatusOK {
		t.Fatalf("GET /: %d", a.status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const streams = 50
	var fetches, events atomic.Int64
	var wg sync.WaitGroup
	hc := &http.Client{Jar: b.hc.Jar, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * streams}}
	defer hc.CloseIdleConnections()
	for range streams {
		req, _ := http.NewRequestWithContext(ctx, "GET", b.u+"/events", nil)
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /events: %v", err)
		}
		wg.Add(1)
		go func() { // the page's script: one partial fetch per event
			defer wg.Done()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if !strings.HasPrefix(sc.Text(), "data: ") {
					continue
				}
				events.Add(1)
				req, _ := http.NewRequestWithContext(ctx, "GET", b.u+"/runs", nil)
				req.Header.Set("X-Dashboard-Partial", "1")
				r, err := hc.Do(req)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
				fetches.Add(1)
			}
		}()
	}
	waitStreams(t, e, streams)
	wg.Add(1)
	go func() { // the dev load: one order a second
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_, _ = e.Engine.Trigger(ctx, "shop", json.RawMessage(`{}`))
			}
		}
	}()
	time.Sleep(3 * time.Second)
	s := e.store
	c0, r0, d0, f0, t0 := s.changes.Load(), s.runList.Load(), s.defList.Load(), fetches.Load(), time.Now()
	const window = 15 * time.Second
	time.Sleep(window)
	c1, r1, d1, f1, el := s.changes.Load(), s.runList.Load(), s.defList.Load(), fetches.Load(), time.Since(t0)
	cancel()
	wg.Wait()
	waitStreams(t, e, 0)
	queries := float64(c1-c0+r1-r0+d1-d0) / el.Seconds()
	perStream := float64(f1-f0) / streams
	t.Logf("%d open runs pages, one order a second, %v: %d change queries, %d page renders (%d RunList, %d DefinitionList): %.1f store queries/s, %.1f renders per page (%.2f/s)",
		streams, el.Round(time.Millisecond), c1-c0, f1-f0, r1-r0, d1-d0, queries, perStream, perStream/el.Seconds())
	if limit := el.Seconds()/5 + 1.5; perStream > limit {
		t.Errorf("each page re-rendered %.1f times in %v, want at most %.1f (once per 5 s)", perStream, el.Round(time.Second), limit)
	}
	if perStream < 1 {
		t.Errorf("the pages re-rendered %.1f times each in %v: they did not hear of the orders", perStream, el.Round(time.Second))
	}
}

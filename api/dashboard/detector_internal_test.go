package dashboard

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// fakeFeed is a change feed over changes the test writes, with the
// store's semantics (After exclusive, oldest first, Limit, More).
type fakeFeed struct {
	mu    sync.Mutex
	rows  []persistence.StepChange
	calls int
}

func (f *fakeFeed) add(run string, at time.Time) {
	f.mu.Lock()
	f.rows = append(f.rows, persistence.StepChange{RunID: run, At: at})
	sort.SliceStable(f.rows, func(i, j int) bool { return f.rows[i].At.Before(f.rows[j].At) })
	f.mu.Unlock()
}

func (f *fakeFeed) StepListChanged(_ context.Context, p persistence.StepListChangedParams) (persistence.StepChanges, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	out := persistence.StepChanges{Latest: p.After}
	if p.After.IsZero() {
		out.Latest = time.Unix(0, 0)
		if n := len(f.rows); n > 0 {
			out.Latest = f.rows[n-1].At
		}
		return out, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	seen := map[string]bool{}
	n := 0
	for _, r := range f.rows {
		if !r.At.After(p.After) {
			continue
		}
		if n++; n > limit {
			out.More = true
			break
		}
		out.Latest = r.At
		out.Changes = append(out.Changes, r)
		if !seen[r.RunID] {
			seen[r.RunID] = true
			out.RunIDs = append(out.RunIDs, r.RunID)
		}
	}
	return out, nil
}

// next polls once and returns the change it would broadcast.
func next(t *testing.T, d *detector) change {
	t.Helper()
	c, _ := d.poll(context.Background())
	return c
}

func runsOf(c change) []string {
	var out []string
	for id := range c.runs {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// TestDetectorReadsBehindItsWatermark: a change stamped before the
// newest one already read (a writer whose clock is behind) is still
// delivered, once, and a change already delivered is not delivered
// again when the overlap window reads it a second time.
func TestDetectorReadsBehindItsWatermark(t *testing.T) {
	f := &fakeFeed{}
	d := newDetector(f, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.add("r1", t0)
	if c := next(t, d); c.all || len(c.runs) != 0 {
		t.Fatalf("the first poll (the watermark) broadcasts %+v", c)
	}
	f.add("r2", t0.Add(time.Second))
	if got := runsOf(next(t, d)); len(got) != 1 || got[0] != "r2" {
		t.Fatalf("after r2 changed: %v, want [r2]", got)
	}
	// Stamped before r2's change, written after the watermark moved on.
	f.add("r3", t0.Add(500*time.Millisecond))
	if got := runsOf(next(t, d)); len(got) != 1 || got[0] != "r3" {
		t.Fatalf("after r3 changed behind the watermark: %v, want [r3]", got)
	}
	if c := next(t, d); c.all || len(c.runs) != 0 {
		t.Fatalf("nothing changed, yet the poll broadcasts %v", runsOf(c))
	}
	// r2 again, at a new time: a new change of r2.
	f.add("r2", t0.Add(2*time.Second))
	if got := runsOf(next(t, d)); len(got) != 1 || got[0] != "r2" {
		t.Fatalf("after r2 changed again: %v, want [r2]", got)
	}
}

// TestDetectorJumpsOverFloods: when more changed than one question
// reads, the detector tells "all" once and goes on from the newest
// change, rather than replaying the backlog a thousand rows a poll; and
// a detector that stopped (no streams) starts afresh, without replaying
// what changed while nobody watched.
func TestDetectorJumpsOverFloods(t *testing.T) {
	f := &fakeFeed{}
	d := newDetector(f, 5*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.add("r0", t0)
	next(t, d)
	for i := range 2500 {
		f.add(fmt.Sprintf("r%d", i+1), t0.Add(time.Duration(i+1)*time.Millisecond*10))
	}
	if c := next(t, d); !c.all {
		t.Fatalf("2500 changes at once: %d runs, want all", len(c.runs))
	}
	for i := range 3 {
		if c := next(t, d); c.all || len(c.runs) != 0 {
			t.Fatalf("poll %d after the flood broadcasts again (all %v, %d runs)", i+1, c.all, len(c.runs))
		}
	}

	// A stream opens and goes: the loop starts and stops.
	s := d.subscribe()
	deadline := time.Now().Add(5 * time.Second)
	for d.polls.Load() < 6 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	d.unsubscribe(s)
	d.mu.Lock()
	started, latest := d.started, d.latest
	d.mu.Unlock()
	if started || !latest.IsZero() {
		t.Fatalf("after the last stream went the watermark is still %v", latest)
	}
	// Changes while nobody watched are not replayed to the next stream.
	for i := range 1500 {
		f.add(fmt.Sprintf("late%d", i), t0.Add(time.Hour+time.Duration(i)*time.Millisecond))
	}
	if c := next(t, d); c.all || len(c.runs) != 0 {
		t.Fatalf("the first poll after a restart broadcasts (all %v, %d runs)", c.all, len(c.runs))
	}
	if c := next(t, d); c.all || len(c.runs) != 0 {
		t.Fatalf("the second poll after a restart broadcasts (all %v, %d runs)", c.all, len(c.runs))
	}
}

package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// sweepStore watches a node's retention batches: gate, when set, holds
// the next batch until it is closed (entered says it was reached), and
// the batches of every node sharing inFlight are counted while they run.
type sweepStore struct {
	persistence.Store
	mu       sync.Mutex
	gate     chan struct{}
	entered  chan struct{}
	inFlight *atomic.Int32
	maxSeen  *atomic.Int32
	batches  atomic.Int32
	// delay, when set, lengthens every batch; began records when each
	// batch started.
	delay time.Duration
	began []time.Time
}

func (s *sweepStore) RunDeleteFinished(ctx context.Context, p persistence.RunDeleteFinishedParams) (persistence.RunDeleteFinishedResult, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxSeen.Load()
		if n <= m || s.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	s.batches.Add(1)
	s.mu.Lock()
	gate, entered := s.gate, s.entered
	s.gate = nil
	s.began = append(s.began, time.Now())
	s.mu.Unlock()
	if gate != nil {
		close(entered)
		<-gate
	}
	time.Sleep(2*time.Millisecond + s.delay) // room for another node's batch to overlap, were it allowed
	return s.Store.RunDeleteFinished(ctx, p)
}

// retentionWorkflows are a workflow that succeeds and one whose step is
// dead-lettered (its run fails, nothing to compensate).
func retentionWorkflows(t *testing.T) []*dag.Workflow {
	t.Helper()
	ok, err := dag.New("keep").Step("one", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	dies, err := dag.New("dies").Step("one", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		return nil, steps.Permanent(errors.New("refused"))
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	return []*dag.Workflow{ok, dies}
}

// twoNodes starts two nodes on one store, each seeing it through its own
// sweepStore, with retention configured by rc.
//
// prepare, when not nil, is given a third node first, on the same store,
// Redis and clock, with retention off: whatever it does (finishing runs,
// moving the shared clock) happens before either sweeping node starts.
// Moving the clock while a node sweeps would be a stall past the lease
// (retentionLease): the lease then expires under the sweeping node, which
// the engine allows, so a test that counts overlapping batches must not.
func twoNodes(t *testing.T, b backend, rc engine.Retention, prepare func(*enginetest.Env)) (a, bn *enginetest.Env, sa, sb *sweepStore) {
	t.Helper()
	o := b.opts(t)
	base := o.Store
	if base == nil {
		base = sqliteStore(t)
	}
	var inFlight, maxSeen atomic.Int32
	sa = &sweepStore{Store: base, inFlight: &inFlight, maxSeen: &maxSeen}
	sb = &sweepStore{Store: base, inFlight: &inFlight, maxSeen: &maxSeen}
	o.Workflows = retentionWorkflows(t)
	if prepare != nil {
		op := o
		op.Store = base
		op.Configure = func(c *engine.Config) { c.NodeID, c.Retention = "node-prep", engine.Retention{Keep: -1} }
		prep := enginetest.New(t, op)
		prepare(prep)
		o.Redis, o.Prefix, o.Clock = prep.Redis, prep.Prefix, prep.Clock
	}
	o.Store = sa
	o.Configure = func(c *engine.Config) { c.NodeID, c.Retention = "node-a", rc }
	a = enginetest.New(t, o)
	ob := o
	ob.Store, ob.Redis, ob.Prefix, ob.Clock = sb, a.Redis, a.Prefix, a.Clock
	ob.Configure = func(c *engine.Config) { c.NodeID, c.Retention = "node-b", rc }
	bn = enginetest.New(t, ob)
	return a, bn, sa, sb
}

// finishedRuns triggers n runs of "keep" and one of "dies" on env and
// waits for them to finish.
func finishedRuns(t *testing.T, env *enginetest.Env, n int) (kept []string, dead string) {
	t.Helper()
	for range n {
		kept = append(kept, env.Trigger(t, "keep", nil))
	}
	dead = env.Trigger(t, "dies", nil)
	for _, id := range kept {
		env.AssertRun(t, env.Wait(t, id), persistence.RunSucceeded)
	}
	env.AssertRun(t, env.Wait(t, dead), persistence.RunFailed)
	return kept, dead
}

// Two nodes, one store: while one purges (holding the retention lease),
// the other's purge is refused at once with ErrPurgeBusy; once the first
// is done the lease is free. Old finished runs go, the dead-lettered one
// stays.
func TestPurgeOneNodeAtATime(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		a, bn, sa, _ := twoNodes(t, b, engine.Retention{Keep: -1, Batch: 2, Pause: time.Millisecond}, nil)
		done, dead := finishedRuns(t, a, 5)
		before := a.Clock.Now().Add(time.Second)

		sa.mu.Lock()
		sa.gate, sa.entered = make(chan struct{}), make(chan struct{})
		gate, entered := sa.gate, sa.entered
		sa.mu.Unlock()
		type answer struct {
			res engine.PurgeResult
			err error
		}
		first := make(chan answer, 1)
		go func() {
			res, err := a.Engine.Purge(ctx, engine.PurgeParams{Before: before})
			first <- answer{res, err}
		}()
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("node a's purge never reached its first batch")
		}
		if res, err := bn.Engine.Purge(ctx, engine.PurgeParams{Before: before}); !errors.Is(err, engine.ErrPurgeBusy) || res.Runs != 0 {
			t.Errorf("node b's purge while node a's runs = %+v, %v; want ErrPurgeBusy and nothing deleted", res, err)
		}
		close(gate)
		got := <-first
		if got.err != nil || got.res.Runs != 5 || got.res.Kept != 1 || got.res.Steps != 5 || got.res.Batches < 3 {
			t.Errorf("node a's purge = %+v, %v; want 5 runs (5 steps) deleted in batches of 2, 1 dead-lettered run kept", got.res, got.err)
		}
		for _, id := range done {
			if _, err := a.Engine.Get(ctx, id); !errors.Is(err, persistence.ErrRunNotFound) {
				t.Errorf("purged run %s: Get = %v, want ErrRunNotFound", id, err)
			}
		}
		if info, err := a.Engine.Get(ctx, dead); err != nil || info.Run.Status != persistence.RunFailed {
			t.Errorf("dead-lettered run: %+v, %v; want kept", info.Run, err)
		}
		// The lease was released: node b may purge now.
		res, err := bn.Engine.Purge(ctx, engine.PurgeParams{Before: before})
		if err != nil || res.Runs != 0 || res.Kept != 1 {
			t.Errorf("node b's purge after node a's = %+v, %v; want nothing left but the dead-lettered run", res, err)
		}
		if _, err := a.Engine.Purge(ctx, engine.PurgeParams{}); err == nil {
			t.Error("Purge without Before succeeded")
		}
	})
}

// A slow batch is followed by a longer pause: with Share 0.25 a batch
// that took 60ms is followed by at least 180ms (Pause is 1ms), so the
// sweep spends at most a quarter of its time in batches.
func TestPurgeKeepsToItsShare(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const took = 60 * time.Millisecond
		a, _, sa, _ := twoNodes(t, b, engine.Retention{Keep: -1, Batch: 1, Pause: time.Millisecond, Share: 0.25}, nil)
		done, _ := finishedRuns(t, a, 4)
		sa.mu.Lock()
		sa.delay = took
		sa.mu.Unlock()
		res, err := a.Engine.Purge(context.Background(), engine.PurgeParams{Before: a.Clock.Now().Add(time.Second)})
		if err != nil || res.Runs != len(done) {
			t.Fatalf("purge = %+v, %v; want the %d finished runs deleted", res, err, len(done))
		}
		sa.mu.Lock()
		began := sa.began
		sa.mu.Unlock()
		if len(began) < len(done) {
			t.Fatalf("%d batches, want at least %d (batch 1)", len(began), len(done))
		}
		// The next batch starts no sooner than the batch (at least took)
		// and its pause (at least 3×took) after the previous one began.
		for i := 1; i < len(began); i++ {
			if gap := began[i].Sub(began[i-1]); gap < 4*took {
				t.Errorf("batch %d began %v after batch %d; with Share 0.25 and batches of %v or more, want at least %v", i, gap, i-1, took, 4*took)
			}
		}

		// An operator's purge with Share 1 waits only Pause (1ms).
		more, _ := finishedRuns(t, a, 3)
		sa.mu.Lock()
		sa.began = nil
		sa.mu.Unlock()
		res, err = a.Engine.Purge(context.Background(), engine.PurgeParams{Before: a.Clock.Now().Add(time.Second), Share: 1})
		if err != nil || res.Runs != len(more) {
			t.Fatalf("purge with Share 1 = %+v, %v; want the %d finished runs deleted", res, err, len(more))
		}
		sa.mu.Lock()
		began = sa.began
		sa.mu.Unlock()
		for i := 1; i < len(began); i++ {
			if gap := began[i].Sub(began[i-1]); gap >= 3*took {
				t.Errorf("with Share 1, batch %d began %v after batch %d; want about the batch's %v and a 1ms pause", i, gap, i-1, took)
			}
		}
		for _, bad := range []float64{-1, 1.5} {
			if _, err := a.Engine.Purge(context.Background(), engine.PurgeParams{Before: a.Clock.Now(), Share: bad}); err == nil ||
				!strings.Contains(err.Error(), fmt.Sprintf("Share %v must be above 0 and at most 1", bad)) {
				t.Errorf("purge with Share %v = %v; want an error naming Share", bad, err)
			}
		}
	})
}

// The retention loop: on two nodes sweeping every few milliseconds, runs
// older than Keep go, a recent one and the dead-lettered one stay, and no
// two batches ever run at once.
func TestRetentionLoopTwoNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		var old []string
		var dead string
		a, bn, sa, sb := twoNodes(t, b, engine.Retention{Keep: time.Hour, Interval: 20 * time.Millisecond, Batch: 2, Pause: time.Millisecond}, func(prep *enginetest.Env) {
			old, dead = finishedRuns(t, prep, 6)
			prep.Clock.Advance(2 * time.Hour)
		})
		recent := bn.Trigger(t, "keep", nil)
		bn.AssertRun(t, bn.Wait(t, recent), persistence.RunSucceeded)
		testenv.Eventually(t, 30*time.Second, func() bool {
			for _, id := range old {
				if _, err := a.Engine.Get(ctx, id); !errors.Is(err, persistence.ErrRunNotFound) {
					return false
				}
			}
			return true
		}, "the old runs were not deleted")
		for _, id := range []string{dead, recent} {
			if _, err := a.Engine.Get(ctx, id); err != nil {
				t.Errorf("run %s: %v; want kept", id, err)
			}
		}
		// Let both nodes sweep a few more times.
		na, nb := sa.batches.Load(), sb.batches.Load()
		testenv.Eventually(t, 30*time.Second, func() bool {
			return sa.batches.Load() > na+3 && sb.batches.Load() > nb+3
		}, "both nodes should keep sweeping (a: %d, b: %d batches)", sa.batches.Load(), sb.batches.Load())
		if m := sa.maxSeen.Load(); m != 1 {
			t.Errorf("%d retention batches ran at once across the two nodes; want one at a time", m)
		}
	})
}

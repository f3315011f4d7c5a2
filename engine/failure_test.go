package engine_test

import (
	"context"
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
	"github.com/dagflow/dagflow/queue"
	"github.com/dagflow/dagflow/steps"
)

// A task id the engine cannot parse (someone else's, or corrupt) is
// dropped from Redis, and the workers go on.
func TestMalformedTaskIsDropped(t *testing.T) {
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}})
	ctx := context.Background()
	if _, err := env.Engine.Queue().Enqueue(ctx, "default", queue.Item{ID: "not-a-task"}, queue.Item{ID: "x/y/zero"}); err != nil {
		t.Fatal(err)
	}
	env.AssertRun(t, env.Wait(t, env.Trigger(t, "order", nil)), persistence.RunSucceeded)
	testenv.Eventually(t, 5*time.Second, func() bool {
		st, err := env.Engine.Queue().Stats(ctx, "default")
		return err == nil && st == (queue.Stats{})
	}, "malformed tasks left in Redis")
}

// hangingStore makes RunCreateMany wait until release is closed: a
// database that stopped answering.
type hangingStore struct {
	persistence.Store
	release chan struct{}
}

func (h *hangingStore) RunCreateMany(ctx context.Context, ps persistence.RunCreateManyParams) ([]persistence.RunCreateOutcome, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Store.RunCreateMany(ctx, ps)
}

// Trigger returns when its context ends even if the store does not
// answer; once the store answers again, triggers work.
func TestTriggerHonoursContextWhenStoreHangs(t *testing.T) {
	st := sqliteStore(t)
	hs := &hangingStore{Store: st, release: make(chan struct{})}
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{Store: hs, Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := env.Engine.Trigger(ctx, "order", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Trigger on a hung store: err = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Trigger took %v to give up", took)
	}
	close(hs.release)
	id, err := env.Engine.Trigger(context.Background(), "order", nil, engine.IdempotencyKey("after"))
	if err != nil {
		t.Fatalf("Trigger after the store recovered: %v", err)
	}
	env.AssertRun(t, env.Wait(t, id), persistence.RunSucceeded)
}

// compensatingReport reports every completion of step "a" as made in a
// compensating run (the run is in fact running): such a step's worker has
// saga work left, so its slot cannot go to the steps its completion
// claimed.
type compensatingReport struct {
	persistence.Store
}

func (c *compensatingReport) StepCompleteMany(ctx context.Context, p persistence.StepCompleteManyParams) ([]persistence.StepCompleteOutcome, error) {
	outs, err := c.Store.StepCompleteMany(ctx, p)
	for i := range outs {
		if i < len(p.Items) && p.Items[i].Step == "a" && outs[i].Err == nil {
			outs[i].Result.RunStatus = persistence.RunCompensating
		}
	}
	return outs, err
}

// TestClaimedStepWaitsForASlot: on a node of one slot, a completion claims
// a released step it has no slot for (its own worker still has work): the
// step waits for the slot instead of running beside it, then runs, once.
func TestClaimedStepWaitsForASlot(t *testing.T) {
	var running, peak atomic.Int64
	ran := map[string]int{}
	var mu sync.Mutex
	h := func(name string) steps.Handler {
		return stepsFunc(func(context.Context) error {
			n := running.Add(1)
			defer running.Add(-1)
			if n > peak.Load() {
				peak.Store(n)
			}
			mu.Lock()
			ran[name]++
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			return nil
		})
	}
	wf, err := dag.New("fan").Step("a", h("a")).Step("b", h("b"), dag.After("a")).Step("c", h("c"), dag.After("a")).Build()
	if err != nil {
		t.Fatal(err)
	}
	st := sqliteStore(t)
	env := enginetest.New(t, enginetest.Options{Store: &compensatingReport{st}, Clock: engine.SystemClock,
		Workflows: []*dag.Workflow{wf}, Configure: func(c *engine.Config) { c.Concurrency = 1 }})
	for range 3 {
		id := env.Trigger(t, "fan", nil)
		env.AssertRun(t, env.WaitTimeout(t, id, 30*time.Second), persistence.RunSucceeded)
	}
	if p := peak.Load(); p > 1 {
		t.Errorf("%d handlers ran at once on a node of one slot", p)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range []string{"a", "b", "c"} {
		if ran[s] != 3 {
			t.Errorf("step %s ran %d times, want 3", s, ran[s])
		}
	}
	if st := env.Engine.Stats(); st.ClaimedAtRelease == 0 {
		t.Errorf("nothing was claimed at release: stats %+v", st)
	}
}

// gatedRunGet makes RunGet wait while gate is set: the worker of a step
// reported as in a compensating run (compensatingReport) keeps its slot,
// reading the run for the saga, until the test lets it go.
type gatedRunGet struct {
	compensatingReport
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (g *gatedRunGet) RunGet(ctx context.Context, id string) (persistence.Run, error) {
	g.once.Do(func() {
		close(g.entered)
		<-g.gate
	})
	return g.compensatingReport.RunGet(ctx, id)
}

// TestStopHandsOverAClaimedStepWaitingForASlot: a step claimed at release
// that is still waiting for a slot when the node stops is handed to the
// queue with its lease released, and another node runs it at once.
func TestStopHandsOverAClaimedStepWaitingForASlot(t *testing.T) {
	ran := map[string]int{}
	var mu sync.Mutex
	h := func(name string) steps.Handler {
		return stepsFunc(func(context.Context) error {
			mu.Lock()
			ran[name]++
			mu.Unlock()
			return nil
		})
	}
	wf, err := dag.New("fan").Step("a", h("a")).Step("b", h("b"), dag.After("a")).Build()
	if err != nil {
		t.Fatal(err)
	}
	st := sqliteStore(t)
	gs := &gatedRunGet{compensatingReport: compensatingReport{st}, gate: make(chan struct{}), entered: make(chan struct{})}
	lease := time.Minute // a takeover after the lease would time the test out
	cfg := func(c *engine.Config) {
		c.Concurrency = 1
		c.Lease = lease
		c.Heartbeat = time.Second
		c.ReconcileInterval = time.Hour
	}
	a := enginetest.New(t, enginetest.Options{Store: gs, Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf}, Configure: cfg})
	id := a.Trigger(t, "fan", nil)
	select {
	case <-gs.entered: // a completed and claimed b; a's worker holds the slot
	case <-time.After(10 * time.Second):
		t.Fatal("step a never completed")
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- a.Engine.Stop(ctx)
	}()
	// b was handed to the queue: its lease is released and its task is in
	// Redis before a's worker lets go of the slot.
	testenv.Eventually(t, 5*time.Second, func() bool {
		qs, err := a.Engine.Queue().Stats(context.Background(), "default")
		return err == nil && qs.Ready+qs.Delayed == 1
	}, "the waiting step was not handed to the queue")
	close(gs.gate)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	start := time.Now()
	enginetest.New(t, enginetest.Options{Store: st, Redis: a.Redis, Prefix: a.Prefix, Clock: engine.SystemClock,
		Workflows: []*dag.Workflow{wf}, Configure: cfg})
	a.AssertRun(t, a.WaitTimeout(t, id, 20*time.Second), persistence.RunSucceeded)
	if took := time.Since(start); took > lease/2 {
		t.Errorf("handover took %v: the lease was not released", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran["a"] != 1 || ran["b"] != 1 {
		t.Errorf("a ran %d times, b %d; want 1 and 1", ran["a"], ran["b"])
	}
}

// failingCreate refuses the first fail RunCreateMany calls, as a database
// that is down would.
type failingCreate struct {
	persistence.Store
	fail atomic.Int32
}

func (f *failingCreate) RunCreateMany(ctx context.Context, p persistence.RunCreateManyParams) ([]persistence.RunCreateOutcome, error) {
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("database unreachable")
	}
	return f.Store.RunCreateMany(ctx, p)
}

// TestTriggerFailureGivesSlotsBack: run creations that fail return their
// error to Trigger, store nothing, and give back the slots they took to
// claim the roots: on a node of three slots (the idle fetch loop holds
// one), the next run's root is still claimed at create.
func TestTriggerFailureGivesSlotsBack(t *testing.T) {
	fs := &failingCreate{Store: sqliteStore(t)}
	fs.fail.Store(3)
	env := enginetest.New(t, enginetest.Options{Store: fs, Clock: engine.SystemClock,
		Workflows: []*dag.Workflow{orderWorkflow(t, &recorder{}, "order", 0, nil, false, nil)},
		Configure: func(c *engine.Config) { c.Concurrency = 3 }})
	for range 3 {
		if id, err := env.Engine.Trigger(context.Background(), "order", map[string]int{"i": 1}); err == nil || !strings.Contains(err.Error(), "database unreachable") {
			t.Fatalf("Trigger while the store is down: run %q, err = %v; want the store's error", id, err)
		}
	}
	if page, err := fs.RunList(context.Background(), persistence.RunListParams{}); err != nil || len(page.Runs) != 0 {
		t.Fatalf("runs stored by failed triggers: %+v (%v)", page.Runs, err)
	}
	id := env.Trigger(t, "order", map[string]int{"i": 2})
	env.AssertRun(t, env.WaitTimeout(t, id, 30*time.Second), persistence.RunSucceeded)
	st := env.Engine.Stats()
	if st.ClaimedAtCreate != 1 {
		t.Errorf("ClaimedAtCreate = %d, want 1: the slot the failed creations took was not given back (stats %+v)", st.ClaimedAtCreate, st)
	}
	// One creation transaction per call, the failed ones counted too.
	if st.CreateBatches != 4 || st.CreateItems != 4 {
		t.Errorf("CreateBatches, CreateItems = %d, %d; want 4, 4", st.CreateBatches, st.CreateItems)
	}
}

// gatedCompletes holds every completion transaction until open is closed,
// counting those in flight.
type gatedCompletes struct {
	persistence.Store
	open             chan struct{}
	inflight, peak   atomic.Int64
	calls, completed atomic.Int64
}

func (g *gatedCompletes) StepCompleteMany(ctx context.Context, p persistence.StepCompleteManyParams) ([]persistence.StepCompleteOutcome, error) {
	n := g.inflight.Add(1)
	defer g.inflight.Add(-1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	g.calls.Add(1)
	<-g.open
	outs, err := g.Store.StepCompleteMany(ctx, p)
	g.completed.Add(int64(len(p.Items)))
	return outs, err
}

// TestExtraCommitOnlyForABacklog: while one completion transaction is in
// flight, a few more completions wait for it rather than start a second
// (fewer, larger transactions under light load); a backlog of
// extraCommitAt or more starts another beside it.
func TestExtraCommitOnlyForABacklog(t *testing.T) {
	var ran atomic.Int64
	h := stepsFunc(func(context.Context) error { ran.Add(1); return nil })
	wide := func(name string, width int) *dag.Workflow {
		b := dag.New(name)
		for i := range width {
			b = b.Step(fmt.Sprintf("s%02d", i), h)
		}
		wf, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return wf
	}
	g := &gatedCompletes{Store: sqliteStore(t), open: make(chan struct{})}
	env := enginetest.New(t, enginetest.Options{Store: g, Clock: engine.SystemClock,
		Workflows: []*dag.Workflow{wide("few", 10), wide("many", 60)},
		Configure: func(c *engine.Config) { c.Concurrency = 100 }})
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(g.open) }) }
	t.Cleanup(openGate) // before the engine stops, should the test fail
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (in flight %d, calls %d, ran %d)", what, g.inflight.Load(), g.calls.Load(), ran.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	few := env.Trigger(t, "few", nil)
	waitFor("the 10 steps to run", func() bool { return ran.Load() == 10 })
	time.Sleep(200 * time.Millisecond) // time enough for a second transaction to start, if it would
	if p := g.peak.Load(); p != 1 {
		t.Fatalf("%d completion transactions in flight for a backlog of 10 or fewer, want 1", p)
	}
	many := env.Trigger(t, "many", nil)
	waitFor("a second transaction for a backlog of 60", func() bool { return g.inflight.Load() >= 2 })
	openGate()
	env.AssertRun(t, env.WaitTimeout(t, few, 30*time.Second), persistence.RunSucceeded)
	env.AssertRun(t, env.WaitTimeout(t, many, 30*time.Second), persistence.RunSucceeded)
	if got := ran.Load(); got != 70 {
		t.Errorf("handlers ran %d times, want 70", got)
	}
}

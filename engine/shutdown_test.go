package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// TestStopAbandonsStuckHandler stops a node whose handler ignores its
// context (it would run 10 s). Stop returns after its deadline plus
// StopGrace, not after the handler, with an error naming the abandoned
// step; another node then runs the step at once (the lease was
// released), as attempt 2 after one lost attempt; and when the abandoned
// handler returns at last, its success is recorded nowhere.
func TestStopAbandonsStuckHandler(t *testing.T) {
	const (
		deadline = 200 * time.Millisecond
		grace    = 500 * time.Millisecond
	)
	var calls atomic.Int32
	unblock := make(chan struct{})
	returned := make(chan struct{})
	stuck := stepsFunc(func(ctx context.Context) error {
		if calls.Add(1) > 1 {
			return nil
		}
		defer close(returned)
		select { // ignores ctx
		case <-unblock:
		case <-time.After(10 * time.Second):
		}
		return nil // as if it had done its work after all
	})
	wf, err := dag.New("stuck").Step("work", stuck).Build()
	if err != nil {
		t.Fatal(err)
	}
	st := sqliteStore(t)
	cfg := func(c *engine.Config) {
		c.Lease = time.Minute // a takeover after the lease would time the test out
		c.Heartbeat = time.Second
		c.ReconcileInterval = time.Hour
		c.StopGrace = grace
	}
	a := enginetest.New(t, enginetest.Options{Store: st, Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf}, Configure: cfg})
	// Let the stuck handler end before the test does (goleak).
	t.Cleanup(func() {
		select {
		case <-unblock:
		default:
			close(unblock)
		}
		<-returned
	})
	id := a.Trigger(t, "stuck", nil)
	testenv.Eventually(t, 5*time.Second, func() bool { return calls.Load() == 1 }, "the handler runs")

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err = a.Engine.Stop(ctx)
	took := time.Since(start)
	if !errors.Is(err, engine.ErrHandlersAbandoned) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want ErrHandlersAbandoned and DeadlineExceeded", err)
	}
	var ae *engine.AbandonedError
	if !errors.As(err, &ae) {
		t.Fatalf("Stop = %T, want *engine.AbandonedError", err)
	}
	if diff := cmp.Diff([]engine.StepRef{{RunID: id, Step: "work"}}, ae.Steps); diff != "" {
		t.Errorf("abandoned steps (-want +got):\n%s", diff)
	}
	want := fmt.Sprintf("run %s step %q", id, "work")
	if msg := err.Error(); !strings.Contains(msg, "abandoned 1 handler") || !strings.Contains(msg, want) {
		t.Errorf("Stop's error %q does not name the count and %s", msg, want)
	}
	if took < deadline+grace-50*time.Millisecond || took > deadline+grace+2*time.Second {
		t.Errorf("Stop took %v, want about %v (deadline %v + grace %v)", took, deadline+grace, deadline, grace)
	}

	b := enginetest.New(t, enginetest.Options{Store: st, Redis: a.Redis, Prefix: a.Prefix, Clock: engine.SystemClock,
		Workflows: []*dag.Workflow{wf}, Configure: cfg})
	info := b.WaitTimeout(t, id, 10*time.Second)
	if info.Run.Status != persistence.RunSucceeded {
		t.Fatalf("run %s on the other node: %s", id, info.Run.Status)
	}
	wantHistory := []string{"1 lost", "2 succeeded"}
	if diff := cmp.Diff(wantHistory, forwardHistory(info, "work")); diff != "" {
		t.Errorf("history of work (-want +got):\n%s", diff)
	}

	// The abandoned handler returns now, its step done elsewhere.
	before := a.Engine.Stats()
	close(unblock)
	<-returned
	testenv.Eventually(t, 5*time.Second, func() bool { return a.Engine.Stats().InFlight == 0 }, "the abandoned handler's goroutine ends")
	after := a.Engine.Stats()
	before.InFlight = 0
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the abandoned handler's late return changed node a's stats (-before +after):\n%s", diff)
	}
	info = b.Wait(t, id)
	if diff := cmp.Diff(wantHistory, forwardHistory(info, "work")); diff != "" {
		t.Errorf("history of work after the abandoned handler returned (-want +got):\n%s", diff)
	}
	if s := a.Engine.Stats(); s.StepsSucceeded != 0 || s.StaleCompletions != 0 {
		t.Errorf("node a recorded the abandoned attempt: %+v", s)
	}
}

// TestStopGraceKeepsHandlersThatReturn: a handler that returns within
// StopGrace after Stop's deadline is waited for, and Stop reports only
// its deadline.
func TestStopGraceKeepsHandlersThatReturn(t *testing.T) {
	running := make(chan struct{})
	wf, err := dag.New("late").Step("work", stepsFunc(func(ctx context.Context) error {
		close(running)
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // cleans up after cancellation
		return ctx.Err()
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	a := enginetest.New(t, enginetest.Options{Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf},
		Configure: func(c *engine.Config) { c.StopGrace = 5 * time.Second }})
	a.Trigger(t, "late", nil)
	<-running
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.Engine.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, engine.ErrHandlersAbandoned) {
		t.Fatalf("Stop = %v, want DeadlineExceeded alone", err)
	}
}

// forwardHistory is a step's forward attempts as "number outcome".
func forwardHistory(info engine.RunInfo, step string) []string {
	var h []string
	for _, a := range info.Attempts {
		if a.Step == step && a.Kind == persistence.AttemptForward {
			h = append(h, fmt.Sprintf("%d %s", a.Attempt, a.Outcome))
		}
	}
	return h
}

// TestStopHandBackKeepsTheAttempt: a root step claimed at create for a
// node whose Stop began meanwhile is handed back un-started, its attempt
// not spent: with MaxAttempts 1, nodes stopped 0-5 ms after a Trigger
// leave no run failed for an attempt lost to its worker, every handler
// runs exactly once, and no attempt of the history is lost.
func TestStopHandBackKeepsTheAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var mu sync.Mutex
		ran := map[string]int{}
		wf, err := dag.New("once").Step("only", steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			mu.Lock()
			ran[sc.RunID]++
			mu.Unlock()
			return nil, nil
		}), dag.Retry(dag.RetryPolicy{MaxAttempts: 1})).Build()
		if err != nil {
			t.Fatal(err)
		}
		base := b.opts(t)
		base.Clock = engine.SystemClock
		base.Workflows = []*dag.Workflow{wf}
		base.Configure = func(cfg *engine.Config) { cfg.NoWorkers = true; cfg.ReconcileInterval = -1 }
		obs := enginetest.New(t, base) // supplies the store and Redis; runs no steps
		const rounds, enough = 60, 4
		var ids []string
		handedBack := 0
		for i := 0; i < rounds && handedBack < enough; i++ {
			e, err := engine.New(engine.Config{
				Store: obs.Store, Redis: obs.Redis, Prefix: obs.Prefix, NodeID: fmt.Sprintf("racer-%d", i),
				Lease: 30 * time.Second, ReconcileInterval: -1, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Register(wf); err != nil {
				t.Fatal(err)
			}
			if err := e.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			idc := make(chan string, 1)
			go func() {
				id, err := e.Trigger(context.Background(), "once", nil)
				if err != nil && !errors.Is(err, engine.ErrStopped) {
					t.Errorf("trigger: %v", err)
				}
				idc <- id
			}()
			time.Sleep(time.Duration(rand.IntN(5001)) * time.Microsecond)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := e.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
			cancel()
			if id := <-idc; id != "" {
				ids = append(ids, id)
			}
			if s := e.Stats(); s.ClaimedAtCreate > 0 && s.StepsStarted == 0 {
				handedBack++ // claimed at create, never run here
			}
		}
		if handedBack == 0 {
			t.Fatalf("no claim was handed back in %d rounds: the test did not race Stop with a create", rounds)
		}
		o := b.opts(t)
		o.Store, o.Redis, o.Prefix, o.Clock = obs.Store, obs.Redis, obs.Prefix, engine.SystemClock
		o.Workflows = []*dag.Workflow{wf}
		o.Configure = func(cfg *engine.Config) { cfg.ReconcileInterval = -1; cfg.PollInterval = 0 }
		fin := enginetest.New(t, o)
		for _, id := range ids {
			info := fin.WaitTimeout(t, id, 10*time.Second)
			if info.Run.Status != persistence.RunSucceeded {
				t.Errorf("run %s: %s (%s)", id, info.Run.Status, info.Run.Error)
			}
			if diff := cmp.Diff([]string{"1 succeeded"}, forwardHistory(info, "only")); diff != "" {
				t.Errorf("run %s: history of its step (-want +got):\n%s", id, diff)
			}
			mu.Lock()
			if ran[id] != 1 {
				t.Errorf("run %s: its handler ran %d times, want once", id, ran[id])
			}
			mu.Unlock()
		}
		t.Logf("%d runs, %d claims handed back", len(ids), handedBack)
	})
}

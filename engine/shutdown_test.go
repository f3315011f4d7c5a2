package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
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

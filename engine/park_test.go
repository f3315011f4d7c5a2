package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// paymentWorkflow: reserve (compensated by release) -> paid, a wait for
// payment.captured of the order's id -> ship, which records what it read
// of paid in shipped.
func paymentWorkflow(t *testing.T, shipped *sync.Map, released *sync.Map, wait ...dag.StepOption) *dag.Workflow {
	t.Helper()
	echo := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) { return sc.Input, nil })
	ship := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
		shipped.Store(sc.RunID, string(sc.Outputs["paid"]))
		return json.RawMessage(`{"shipped":true}`), nil
	})
	release := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
		released.Store(sc.RunID, true)
		return nil, nil
	})
	if len(wait) == 0 {
		wait = []dag.StepOption{dag.WaitFor("payment.captured", dag.Correlate("input.order_id"), dag.WaitTimeout(48*time.Hour))}
	}
	w, err := dag.New("payment").
		Step("reserve", echo, dag.Compensate(release)).
		Step("paid", nil, append([]dag.StepOption{dag.After("reserve")}, wait...)...).
		Step("ship", ship, dag.After("paid")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// waitParked polls until the run's step is parked.
func waitParked(t *testing.T, e *engine.Engine, runID, step string) persistence.StepRun {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := e.Get(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range info.Steps {
			if s.Step == step && s.Status == persistence.StepParked {
				return s
			}
		}
		if time.Now().After(deadline) || info.Run.Status.Terminal() {
			t.Fatalf("run %s step %s not parked: run %s, steps %+v", runID, step, info.Run.Status, info.Steps)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWaitForEvent: a run waiting on payment.captured for order A holds
// no worker slot and nothing in Redis, ignores the event for order B, and
// completes on A's with A's payload as the step's output; an event
// published before its run reaches the step completes it too.
func TestWaitForEvent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var shipped, released sync.Map
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{paymentWorkflow(t, &shipped, &released)}
		env := enginetest.New(t, o)
		ctx := context.Background()

		runA := env.Trigger(t, "payment", map[string]any{"order_id": "A"})
		parked := waitParked(t, env.Engine, runA, "paid")
		if parked.LeaseExpiresAt != nil || parked.NextAttemptAt == nil {
			t.Errorf("parked step = %+v: want no lease and its timeout as due time", parked)
		}
		// reserve's slot is let go once its completion has committed, so
		// the parked row can be read a moment before the slot is free.
		testenv.Eventually(t, 5*time.Second, func() bool { return env.Engine.Stats().InFlight == 0 },
			"no step in flight while the run waits")

		if _, err := env.Engine.Publish(ctx, "payment.captured", map[string]any{"amount": 2}, engine.Correlation("B")); err != nil {
			t.Fatal(err)
		}
		if info := mustGet(t, env.Engine, runA); stepOf(t, info, "paid").Status != persistence.StepParked {
			t.Fatalf("after B's event, paid is %s, want parked", stepOf(t, info, "paid").Status)
		}
		if _, err := env.Engine.Publish(ctx, "payment.captured", map[string]any{"amount": 1}, engine.Correlation("A")); err != nil {
			t.Fatal(err)
		}
		info := env.Wait(t, runA)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if got := string(stepOf(t, info, "paid").Output); got != `{"amount":1}` {
			t.Errorf("paid's output = %s, want A's payload", got)
		}
		if got, _ := shipped.Load(runA); got != `{"amount":1}` {
			t.Errorf("ship read paid's output %v, want A's payload", got)
		}

		// The event first, then the run.
		if _, err := env.Engine.Publish(ctx, "payment.captured", map[string]any{"amount": 3}, engine.Correlation("C")); err != nil {
			t.Fatal(err)
		}
		runC := env.Trigger(t, "payment", map[string]any{"order_id": "C"})
		info = env.Wait(t, runC)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if got := string(stepOf(t, info, "paid").Output); got != `{"amount":3}` {
			t.Errorf("early event: paid's output = %s, want C's payload", got)
		}
	})
}

// TestWaitTimeoutCompensates: a wait whose event never comes times out,
// is retried by its policy (parked again with a fresh deadline), then
// dead-lettered, and the run compensates.
func TestWaitTimeoutCompensates(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var shipped, released sync.Map
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{paymentWorkflow(t, &shipped, &released,
			dag.WaitFor("payment.captured", dag.Correlate("input.order_id"), dag.WaitTimeout(time.Hour)),
			dag.Retry(dag.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Second}))}
		env := enginetest.New(t, o)
		run := env.Trigger(t, "payment", map[string]any{"order_id": "late"})
		info := env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunCompensated)
		paid := stepOf(t, info, "paid")
		if paid.Status != persistence.StepDead || paid.Attempt != 2 {
			t.Errorf("paid = %s after %d attempts, want dead after 2", paid.Status, paid.Attempt)
		}
		env.AssertStep(t, info, "reserve", persistence.StepCompensated)
		if _, ok := released.Load(run); !ok {
			t.Error("reserve was not compensated")
		}
		if _, ok := shipped.Load(run); ok {
			t.Error("ship ran after a timed out wait")
		}
	})
}

// TestSignalAndSleep: a step waiting for a signal completes with the
// signal's payload (a repeat is a no-op, another payload is refused), and
// a sleep after it completes at its time.
func TestSignalAndSleep(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var done sync.Map
		finish := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			done.Store(sc.RunID, string(sc.Outputs["approve"]))
			return nil, nil
		})
		w, err := dag.New("approval").
			Step("approve", nil, dag.WaitForSignal()).
			Step("cool", nil, dag.After("approve"), dag.Sleep(time.Hour)).
			Step("done", finish, dag.After("cool"), dag.Needs("approve")).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{w}
		env := enginetest.New(t, o)
		ctx := context.Background()
		run := env.Trigger(t, "approval", nil)
		waitParked(t, env.Engine, run, "approve")
		if err := env.Engine.Signal(ctx, run, "cool", nil); !errors.Is(err, engine.ErrNotWaiting) {
			t.Errorf("signal of a step not ready: %v, want ErrNotWaiting", err)
		}
		if err := env.Engine.Signal(ctx, run, "approve", map[string]any{"by": "ann"}); err != nil {
			t.Fatal(err)
		}
		if err := env.Engine.Signal(ctx, run, "approve", map[string]any{"by": "ann"}); err != nil {
			t.Errorf("repeated signal: %v, want nil", err)
		}
		if err := env.Engine.Signal(ctx, run, "approve", map[string]any{"by": "bob"}); !errors.Is(err, engine.ErrNotWaiting) || !errors.Is(err, persistence.ErrNotClaimable) {
			t.Errorf("second signal with another payload: %v, want ErrNotWaiting", err)
		}
		cool := waitParked(t, env.Engine, run, "cool")
		if cool.NextAttemptAt == nil {
			t.Fatalf("sleep parked without a due time: %+v", cool)
		}
		if err := env.Engine.Signal(ctx, run, "cool", nil); !errors.Is(err, engine.ErrNotWaiting) {
			t.Errorf("signal of a sleep: %v, want ErrNotWaiting", err)
		}
		info := env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if got, _ := done.Load(run); got != `{"by":"ann"}` {
			t.Errorf("done read approve's output %v, want the signal's payload", got)
		}
		if fin := stepOf(t, info, "cool").FinishedAt; fin == nil || fin.Before(*cool.NextAttemptAt) {
			t.Errorf("the sleep finished at %v, before its time %v", fin, cool.NextAttemptAt)
		}
	})
}

// TestCancelParked: cancelling a run cancels its parked step, and a late
// event or signal finds nothing to complete.
func TestCancelParked(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var shipped, released sync.Map
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{paymentWorkflow(t, &shipped, &released)}
		env := enginetest.New(t, o)
		ctx := context.Background()
		run := env.Trigger(t, "payment", map[string]any{"order_id": "X"})
		waitParked(t, env.Engine, run, "paid")
		if err := env.Engine.Cancel(ctx, run); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Engine.Publish(ctx, "payment.captured", nil, engine.Correlation("X")); err != nil {
			t.Fatal(err)
		}
		if err := env.Engine.Signal(ctx, run, "paid", nil); !errors.Is(err, engine.ErrNotWaiting) {
			t.Errorf("signal after cancel: %v, want ErrNotWaiting", err)
		}
		info := env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunCancelled)
		env.AssertStep(t, info, "paid", persistence.StepCancelled)
	})
}

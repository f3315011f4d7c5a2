package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// childWorkflows builds "order": reserve (compensated by release) -> pay,
// a child step starting "payment" with {order, total} -> ship; and
// "payment": charge (compensated by refund), whose handler is charge.
// undo records the compensations in the order they ran.
func childWorkflows(t *testing.T, charge steps.HandlerFunc, undo *undoLog, payOpts ...dag.StepOption) []*dag.Workflow {
	t.Helper()
	echo := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) { return sc.Input, nil })
	ship := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
		return sc.Outputs["pay"], nil
	})
	order, err := dag.New("order").
		Step("reserve", echo, dag.Compensate(undo.handler("release"))).
		Step("pay", nil, append([]dag.StepOption{dag.After("reserve"),
			dag.Child("payment", dag.Input(`{"order": input.order_id, "total": steps.reserve.output.total}`))}, payOpts...)...).
		Step("ship", ship, dag.After("pay")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	payment, err := dag.New("payment").
		Step("charge", charge, dag.Compensate(undo.handler("refund"))).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return []*dag.Workflow{order, payment}
}

type undoLog struct {
	mu   sync.Mutex
	done []string
}

func (u *undoLog) handler(name string) steps.HandlerFunc {
	return func(context.Context, steps.Context) (json.RawMessage, error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.done = append(u.done, name)
		return nil, nil
	}
}

func (u *undoLog) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.done...)
}

func charged(_ context.Context, sc steps.Context) (json.RawMessage, error) {
	var in struct{ Total float64 }
	if err := json.Unmarshal(sc.Input, &in); err != nil {
		return nil, steps.Permanent(err)
	}
	return json.Marshal(map[string]any{"charged": in.Total})
}

// onlyChild returns the run's one child, failing the test unless it has
// exactly n children.
func children(t *testing.T, e *engine.Engine, runID string, n int) []engine.ChildRun {
	t.Helper()
	info := mustGet(t, e, runID)
	if len(info.Children) != n {
		t.Fatalf("run %s has %d child runs %+v, want %d", runID, len(info.Children), info.Children, n)
	}
	return info.Children
}

// TestChildOutput: a child step starts its workflow with the input its
// expression gives and completes with the child's output; parent and
// child link to each other in Get.
func TestChildOutput(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var undo undoLog
		o := b.opts(t)
		o.Workflows = childWorkflows(t, charged, &undo)
		env := enginetest.New(t, o)
		run := env.Trigger(t, "order", map[string]any{"order_id": "A-1", "total": 12.5})
		info := env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if got := string(stepOf(t, info, "pay").Output); got != `{"charge":{"charged":12.5}}` {
			t.Errorf("pay's output = %s, want the child's output", got)
		}
		if got := string(stepOf(t, info, "ship").Output); got != `{"charge":{"charged":12.5}}` {
			t.Errorf("ship read pay's output %s", got)
		}
		c := children(t, env.Engine, run, 1)[0]
		if c.Step != "pay" || c.Workflow != "payment" || c.Status != persistence.RunSucceeded {
			t.Errorf("child = %+v", c)
		}
		child := mustGet(t, env.Engine, c.RunID)
		if child.Run.ParentRunID != run || child.Run.ParentStep != "pay" {
			t.Errorf("child's parent = %q/%q, want %s/pay", child.Run.ParentRunID, child.Run.ParentStep, run)
		}
		if want := "child:" + run + "/pay#1@"; !strings.HasPrefix(child.Run.IdempotencyKey, want) {
			t.Errorf("child's key = %q, want %q and the claim", child.Run.IdempotencyKey, want)
		}
		var in map[string]any
		if err := json.Unmarshal(child.Run.Input, &in); err != nil || in["order"] != "A-1" || in["total"] != 12.5 {
			t.Errorf("child's input = %s, %v", child.Run.Input, err)
		}
		// The key is reserved: a Trigger cannot take it.
		if _, err := env.Engine.Trigger(context.Background(), "payment", nil, engine.IdempotencyKey(child.Run.IdempotencyKey)); !errors.Is(err, engine.ErrReservedKey) {
			t.Errorf("trigger with a child's key: %v, want ErrReservedKey", err)
		}
	})
}

// TestChildRetriedParentStepOneChild: a parent step parked with its child
// is never given a second child by redeliveries and reconcile passes; a
// child that fails fails the parent step, whose retry (its policy) starts
// one new child for the new attempt, and the failed one is kept as it is.
func TestChildRetriedParentStepOneChild(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var undo undoLog
		var calls atomic.Int32
		release := make(chan struct{})
		charge := func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			if calls.Add(1) == 1 {
				return nil, steps.Permanent(errors.New("card declined"))
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return charged(ctx, sc)
		}
		o := b.opts(t)
		o.Workflows = childWorkflows(t, charge, &undo, dag.Retry(dag.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, Jitter: dag.NoJitter}))
		env := enginetest.New(t, o)
		ctx := context.Background()
		run := env.Trigger(t, "order", map[string]any{"order_id": "A-2", "total": 3})
		var once sync.Once
		open := func() { once.Do(func() { close(release) }) }
		t.Cleanup(open)
		// Attempt 1's child fails; attempt 2 parks with a second child.
		deadline := time.Now().Add(30 * time.Second)
		for calls.Load() < 2 && time.Now().Before(deadline) {
			pay := stepOf(t, mustGet(t, env.Engine, run), "pay")
			if pay.Status == persistence.StepRetrying && pay.NextAttemptAt != nil && pay.NextAttemptAt.After(env.Clock.Now()) {
				env.Clock.Set(*pay.NextAttemptAt)
			}
			time.Sleep(5 * time.Millisecond)
		}
		waitParked(t, env.Engine, run, "pay")
		for range 3 {
			if _, err := env.Engine.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			if err := env.Engine.Dispatch(ctx, run); err != nil {
				t.Fatal(err)
			}
		}
		children(t, env.Engine, run, 2)
		open()
		info := env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if pay := stepOf(t, info, "pay"); pay.Attempt != 2 {
			t.Errorf("pay took %d attempts, want 2", pay.Attempt)
		}
		cs := children(t, env.Engine, run, 2)
		first, second := mustGet(t, env.Engine, cs[0].RunID), mustGet(t, env.Engine, cs[1].RunID)
		if first.Run.Status != persistence.RunFailed || second.Run.Status != persistence.RunSucceeded {
			t.Errorf("children: %s then %s, want failed then succeeded", first.Run.Status, second.Run.Status)
		}
		if !strings.HasPrefix(first.Run.IdempotencyKey, "child:"+run+"/pay#1@") || !strings.HasPrefix(second.Run.IdempotencyKey, "child:"+run+"/pay#2@") {
			t.Errorf("children's keys %q, %q", first.Run.IdempotencyKey, second.Run.IdempotencyKey)
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("charge ran %d times, want 2 (one per child)", n)
		}
	})
}

// TestChildFailsParentDeadLetters: a child that fails fails its parent
// step, which dead-letters when its attempts run out; the parent run then
// compensates its earlier steps.
func TestChildFailsParentDeadLetters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var undo undoLog
		decline := func(context.Context, steps.Context) (json.RawMessage, error) {
			return nil, steps.Permanent(errors.New("card declined"))
		}
		o := b.opts(t)
		o.Workflows = childWorkflows(t, decline, &undo, dag.Retry(dag.RetryPolicy{MaxAttempts: 1}))
		env := enginetest.New(t, o)
		run := env.Trigger(t, "order", map[string]any{"order_id": "A-3", "total": 1})
		info := env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunCompensated)
		env.AssertStep(t, info, "pay", persistence.StepDead)
		env.AssertStep(t, info, "reserve", persistence.StepCompensated)
		c := children(t, env.Engine, run, 1)[0]
		if c.Status != persistence.RunFailed {
			t.Errorf("child is %s, want failed", c.Status)
		}
		if got := undo.list(); len(got) != 1 || got[0] != "release" {
			t.Errorf("compensations ran: %v, want [release]", got)
		}
	})
}

// TestChildCancel: cancelling a parent cancels its running child, and
// the child's own child (recursively).
func TestChildCancel(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		top, err := dag.New("top").Step("sub", nil, dag.Child("middle")).Build()
		if err != nil {
			t.Fatal(err)
		}
		middle, err := dag.New("middle").Step("sub", nil, dag.Child("leaf")).Build()
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := dag.New("leaf").Step("approve", nil, dag.WaitForSignal()).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{top, middle, leaf}
		env := enginetest.New(t, o)
		run := env.Trigger(t, "top", nil)
		waitParked(t, env.Engine, run, "sub")
		mid := children(t, env.Engine, run, 1)[0].RunID
		waitParked(t, env.Engine, mid, "sub")
		lf := children(t, env.Engine, mid, 1)[0].RunID
		waitParked(t, env.Engine, lf, "approve")
		// A child step is resolved by its child's end only: a signal
		// would leave the child running, never read.
		if err := env.Engine.Signal(context.Background(), run, "sub", nil); !errors.Is(err, engine.ErrNotWaiting) {
			t.Errorf("signal of a child step: %v, want ErrNotWaiting", err)
		}
		if err := env.Engine.Cancel(context.Background(), run); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{run, mid, lf} {
			if info := env.Wait(t, id); info.Run.Status != persistence.RunCancelled {
				t.Errorf("run %s (%s) is %s, want cancelled", id, info.Run.Workflow, info.Run.Status)
			}
		}
		if err := env.Engine.Signal(context.Background(), lf, "approve", nil); !errors.Is(err, engine.ErrNotWaiting) {
			t.Errorf("signal of the cancelled leaf: %v, want ErrNotWaiting", err)
		}
	})
}

// TestChildCompensation: when the parent compensates, a child step that
// succeeded has its child run compensate (the child's own saga: refund),
// before the parent's earlier steps (release).
func TestChildCompensation(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var undo undoLog
		o := b.opts(t)
		wfs := childWorkflows(t, charged, &undo)
		fail := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
			return nil, steps.Permanent(errors.New("out of stock"))
		})
		order, err := dag.New("order").
			Step("reserve", steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) { return sc.Input, nil }),
				dag.Compensate(undo.handler("release"))).
			Step("pay", nil, dag.After("reserve"), dag.Child("payment", dag.Input(`{"total": input.total}`))).
			Step("ship", fail, dag.After("pay"), dag.Retry(dag.RetryPolicy{MaxAttempts: 1})).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		o.Workflows = []*dag.Workflow{order, wfs[1]}
		env := enginetest.New(t, o)
		run := env.Trigger(t, "order", map[string]any{"order_id": "A-4", "total": 7})
		info := env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunCompensated)
		env.AssertStep(t, info, "pay", persistence.StepCompensated)
		env.AssertStep(t, info, "reserve", persistence.StepCompensated)
		c := children(t, env.Engine, run, 1)[0]
		child := mustGet(t, env.Engine, c.RunID)
		env.AssertRun(t, child, persistence.RunCompensated)
		env.AssertStep(t, child, "charge", persistence.StepCompensated)
		if got := undo.list(); len(got) != 2 || got[0] != "refund" || got[1] != "release" {
			t.Errorf("compensations ran in the order %v, want [refund release]", got)
		}
	})
}

// TestChildRetention: a finished child run is kept while its parent is
// (here a parent kept for its dead step), and deleted with it.
func TestChildRetention(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var undo undoLog
		fail := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
			return nil, steps.Permanent(errors.New("out of stock"))
		})
		payment := childWorkflows(t, charged, &undo)[1]
		kept, err := dag.New("kept").
			Step("pay", nil, dag.Child("payment")).
			Step("ship", fail, dag.After("pay"), dag.Retry(dag.RetryPolicy{MaxAttempts: 1})).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		gone, err := dag.New("gone").Step("pay", nil, dag.Child("payment")).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{kept, gone, payment}
		env := enginetest.New(t, o)
		ctx := context.Background()
		keptRun := env.Trigger(t, "kept", map[string]any{"total": 1})
		goneRun := env.Trigger(t, "gone", map[string]any{"total": 2})
		// kept's compensation undoes its child: it ends compensated,
		// with ship dead.
		env.AssertRun(t, env.Wait(t, keptRun), persistence.RunCompensated)
		env.AssertRun(t, env.Wait(t, goneRun), persistence.RunSucceeded)
		keptChild := children(t, env.Engine, keptRun, 1)[0].RunID
		goneChild := children(t, env.Engine, goneRun, 1)[0].RunID
		env.Wait(t, keptChild)
		env.Clock.Advance(time.Hour)
		res, err := env.Engine.Purge(ctx, engine.PurgeParams{Before: env.Clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Runs != 2 || res.Kept != 2 {
			t.Errorf("purge deleted %d runs and kept %d, want 2 and 2 (kept and its child)", res.Runs, res.Kept)
		}
		for id, want := range map[string]bool{keptRun: true, keptChild: true, goneRun: false, goneChild: false} {
			_, err := env.Engine.Get(ctx, id)
			if exists := err == nil; exists != want {
				t.Errorf("run %s exists: %v, want %v (%v)", id, exists, want, err)
			}
		}
	})
}

// TestChildCancelledWhenParentFails: a run whose other step dead-letters
// while its child step is parked fails, and its unfinished child run is
// cancelled with it rather than left running for a parent that will
// never read its end.
func TestChildCancelledWhenParentFails(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		gate := make(chan struct{})
		top, err := dag.New("top").
			Step("sub", nil, dag.Child("leaf")).
			Step("boom", steps.HandlerFunc(func(ctx context.Context, _ steps.Context) (json.RawMessage, error) {
				select {
				case <-gate:
				case <-ctx.Done():
				}
				return nil, steps.Permanent(errors.New("boom"))
			})).Build()
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := dag.New("leaf").Step("approve", nil, dag.WaitForSignal()).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{top, leaf}
		env := enginetest.New(t, o)
		run := env.Trigger(t, "top", nil)
		waitParked(t, env.Engine, run, "sub")
		lf := children(t, env.Engine, run, 1)[0].RunID
		waitParked(t, env.Engine, lf, "approve")
		close(gate)
		if info := env.Wait(t, run); info.Run.Status != persistence.RunFailed {
			t.Fatalf("parent is %s, want failed", info.Run.Status)
		}
		if info := env.WaitTimeout(t, lf, 10*time.Second); info.Run.Status != persistence.RunCancelled {
			t.Errorf("child is %s after its parent failed, want cancelled", info.Run.Status)
		}
	})
}

// TestChildStepRetriedByOperator: a child step dead because its child
// failed, retried by an operator once the cause is fixed, starts a new
// child and the run succeeds; the operator's retry restarts the attempt
// count, and must not find the failed child of the first claim again.
func TestChildStepRetriedByOperator(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var undo undoLog
		var fixed atomic.Bool
		charge := func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			if !fixed.Load() {
				return nil, steps.Permanent(errors.New("card declined"))
			}
			return charged(ctx, sc)
		}
		o := b.opts(t)
		// Nothing to undo before pay: a dead pay fails the run, which an
		// operator may retry.
		pay, err := dag.New("order").
			Step("pay", nil, dag.Child("payment", dag.Input(`{"order": input.order_id, "total": input.total}`)), dag.Retry(dag.RetryPolicy{MaxAttempts: 1})).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		o.Workflows = []*dag.Workflow{pay, childWorkflows(t, charge, &undo)[1]}
		env := enginetest.New(t, o)
		run := env.Trigger(t, "order", map[string]any{"order_id": "A-9", "total": 2})
		info := env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunFailed)
		env.AssertStep(t, info, "pay", persistence.StepDead)
		fixed.Store(true)
		if err := env.Engine.RetryDead(context.Background(), run, "pay"); err != nil {
			t.Fatal(err)
		}
		info = env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunSucceeded)
		cs := children(t, env.Engine, run, 2)
		first, second := mustGet(t, env.Engine, cs[0].RunID), mustGet(t, env.Engine, cs[1].RunID)
		if first.Run.Status != persistence.RunFailed || second.Run.Status != persistence.RunSucceeded {
			t.Errorf("children: %s then %s, want the failed one kept and a new one succeeded", first.Run.Status, second.Run.Status)
		}
	})
}

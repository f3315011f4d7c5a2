package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// Child workflows (dag.Child). A `child` step is claimed like any step,
// then parked: the park's transaction creates the child run, whose
// idempotency key (ChildRunKey) derives from the parent step's, so the
// step is parked with its child or neither exists. The child's end
// resolves the step (childFinished): succeeded, the step succeeds with
// the child's output; failed, cancelled or compensated, the step fails
// through its retry policy (a retry starts a new child, with the next
// attempt's key). The node that ends the child does it right after; the
// reconciler resolves what a crash left (StepListChildDone).

// ChildRunKey is the idempotency key of the child run that a claim of a
// parent step starts: "child:<step key>#<attempt>@<claim>", where the
// step key is steps.Context.IdempotencyKey ("<run id>/<step>", or with a
// rerun suffix) and claim the claim's fence. The park that creates the
// child is the claim's own transaction, so a claim has one child or none,
// and a step parked on its child is never claimed again until it is
// retried. Each retry is a new claim with a new child: the policy's
// retry after the child failed or timed out, and an operator's retry of
// the dead step, which restarts the attempt count and would otherwise
// find the failed child of an earlier claim under the same key.
func ChildRunKey(stepKey string, attempt int, claim string) string {
	return childKeyPrefix + stepKey + "#" + strconv.Itoa(attempt) + "@" + claim
}

const childKeyPrefix = "child:"

// childParams is the run a claimed `child` step starts: its workflow's
// plan (registered here, or the current stored definition), the input its
// Input expression gives, the parent's priority.
func (e *Engine) childParams(ctx context.Context, res persistence.StepClaimResult, fence string, sc steps.Context, wt *dag.Wait) (persistence.RunCreateParams, error) {
	input, err := wt.ChildInput(ctx, sc.Input, sc.Outputs)
	if err != nil {
		return persistence.RunCreateParams{}, steps.Permanent(err)
	}
	var in any // a parent run without input gives its child none
	if len(input) > 0 {
		in = input
	}
	p, err := e.createParams(ctx, wt.Workflow, in, []TriggerOption{
		childRun(), IdempotencyKey(ChildRunKey(sc.IdempotencyKey, res.Step.Attempt, fence)), Priority(res.Run.Priority)})
	if err != nil {
		if errors.Is(err, ErrUnknownWorkflow) || errors.Is(err, ErrInvalidInput) {
			err = steps.Permanent(err)
		}
		return persistence.RunCreateParams{}, fmt.Errorf("child workflow %q: %w", wt.Workflow, err)
	}
	p.ParentRunID, p.ParentStep = res.Run.ID, res.Step.Step
	return p, nil
}

// childRun lets createParams take a child run's reserved key.
func childRun() TriggerOption { return internalRun(childKeyPrefix) }

// childStarted dispatches the child run a park created, or resolves the
// parent step at once when the child (found by its key) already ended.
func (e *Engine) childStarted(ctx context.Context, cr persistence.RunCreateResult, log *slog.Logger) {
	if cr.Created {
		e.stats.runsCreated.Add(1)
		e.metrics.runStarted(cr.Run.Workflow)
		// A failed enqueue is logged; the reconciler enqueues queued steps.
		_ = e.enqueueCreated(ctx, []persistence.RunCreateResult{cr})
		log.Info("child run started", "child_run_id", cr.Run.ID, "child_workflow", cr.Run.Workflow)
		return
	}
	if cr.Run.Status.Terminal() {
		e.childFinished(ctx, cr.Run.ID)
	}
}

// runEnded is called when a run reached a terminal status: a child run
// resolves its parent's step. Runs without a parent cost nothing.
func (e *Engine) runEnded(ctx context.Context, run persistence.Run) {
	if run.ParentRunID != "" {
		e.childFinished(ctx, run.ID)
	}
}

// childFinished resolves the parent step of a child run that ended:
// succeeded, with the child's output; otherwise failed with the child's
// status and error. A parent step that no longer waits for this child
// (resolved, cancelled, or retried with another child) is left alone.
func (e *Engine) childFinished(ctx context.Context, childID string) {
	ctx = context.WithoutCancel(ctx)
	if err := e.resolveChild(ctx, childID); err != nil {
		e.log.Warn("child run: resolving its parent step failed; the reconciler will", "run_id", childID, "err", err)
	}
}

func (e *Engine) resolveChild(ctx context.Context, childID string) error {
	child, err := e.store.RunGet(ctx, childID)
	if err != nil {
		return err
	}
	if child.ParentRunID == "" || !child.Status.Terminal() {
		return nil
	}
	wt, err := e.store.StepWaitGet(ctx, child.ParentRunID, child.ParentStep)
	if errors.Is(err, persistence.ErrStepNotFound) || (err == nil && wt.ChildRunID != child.ID) {
		return nil // not parked for this child
	}
	if err != nil {
		return err
	}
	now := e.clock.Now()
	if child.Status != persistence.RunSucceeded {
		why, derr := e.decodeError(ctx, child.Error)
		if derr != nil {
			why = "(error text not decoded: " + derr.Error() + ")"
		}
		herr := fmt.Errorf("child run %s (workflow %q) %s: %s", child.ID, child.Workflow, child.Status, why)
		_, err := e.failParked(ctx, wt, herr, false, now)
		return err
	}
	out, err := e.childOutput(ctx, child)
	if err != nil {
		_, ferr := e.failParked(ctx, wt, steps.Permanent(err), false, now)
		return ferr
	}
	outs, err := e.store.StepCompleteMany(ctx, persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{
		{RunID: wt.RunID, Step: wt.Step, Parked: true, Output: out, Now: now}}})
	if err != nil {
		return err
	}
	if outs[0].Err != nil {
		if errors.Is(outs[0].Err, persistence.ErrFenceMismatch) {
			return nil // resolved meanwhile (a timeout, a cancellation)
		}
		return outs[0].Err
	}
	e.afterResolved(ctx, []persistence.StepCompleteResult{outs[0].Result})
	return nil
}

// childOutput is the output a succeeded child gives its parent step, as
// stored: RunInfo.Output's, an object of its final steps' outputs by
// step name.
func (e *Engine) childOutput(ctx context.Context, child persistence.Run) ([]byte, error) {
	sts, err := e.store.StepList(ctx, child.ID)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(e.decodeRun(ctx, &child), e.decodeSteps(ctx, sts)); err != nil {
		return nil, err
	}
	out := RunInfo{Run: child, Steps: sts}.Output()
	stored, err := e.encodePayload(ctx, codec.Output, out)
	if err != nil {
		return nil, fmt.Errorf("child run %s output: %w", child.ID, err)
	}
	return stored, nil
}

// resolveChildren resolves the parked `child` steps whose child ended
// without its node resolving them (it crashed first): a reconcile pass.
func (e *Engine) resolveChildren(ctx context.Context) (int, error) {
	done, err := e.store.StepListChildDone(ctx, reconcileBatch)
	if err != nil {
		return 0, err
	}
	for _, wt := range done {
		if err := e.resolveChild(ctx, wt.ChildRunID); err != nil {
			return 0, err
		}
	}
	return len(done), nil
}

// cancelChildren cancels the unfinished child runs of a run (and theirs,
// through Cancel).
func (e *Engine) cancelChildren(ctx context.Context, runID string) error {
	children, err := e.store.RunChildren(ctx, runID)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range children {
		if c.Status.Terminal() {
			continue
		}
		if err := e.Cancel(ctx, c.ID); err != nil && !errors.Is(err, persistence.ErrRunFinished) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cancelChildrenOfStopped cancels the unfinished child runs of a run that
// a dead step just failed or set compensating: its parked `child` steps
// were cancelled with it, so no end of those children would be read. A
// cancelled child's completed steps are not compensated, as with Cancel.
// A node that dies between the dead letter and this call leaves those
// children running to their end, which changes nothing in the parent.
func (e *Engine) cancelChildrenOfStopped(ctx context.Context, runID string, w *dag.Workflow) {
	if w != nil && !slices.ContainsFunc(w.Steps(), isChild) {
		return
	}
	if err := e.cancelChildren(context.WithoutCancel(ctx), runID); err != nil {
		e.log.Warn("child runs: cancelling the children of a stopped run failed", "run_id", runID, "err", err)
	}
}

// isChild reports whether a step is a `child` step.
func isChild(d *dag.Step) bool { return d != nil && d.Wait != nil && d.Wait.Kind == dag.WaitChild }

// compensable reports whether a step has something to undo: a
// compensation, or (a `child` step) its child run's saga.
func compensable(d *dag.Step) bool { return d != nil && (d.Compensation != nil || isChild(d)) }

// childPoll is how often a `child` step's compensation looks at its
// child's saga.
const childPoll = 50 * time.Millisecond

// compensateChild undoes a succeeded `child` step: its child run moves
// succeeded -> compensating and runs its own saga (its completed steps'
// compensations in reverse order), which this attempt waits for, under
// the step's timeout and lease; then the step's own compensation, if it
// has one. A child that cannot be compensated (its saga failed) fails the
// attempt permanently.
func (e *Engine) compensateChild(ctx context.Context, ex *execution, res persistence.StepClaimResult, sdef *dag.Step, log *slog.Logger) error {
	children, err := e.store.RunChildren(ctx, res.Run.ID)
	if err != nil {
		return err
	}
	var child *persistence.Run
	for i := range children {
		c := &children[i]
		if c.ParentStep == res.Step.Step && (c.Status == persistence.RunSucceeded || c.Status == persistence.RunCompensating ||
			c.Status == persistence.RunCompensated) {
			child = c // the newest: the one whose output the step took
		}
	}
	if child != nil {
		// Under the step's timeout, with its lease renewed, as a handler.
		c := *child
		wait := steps.HandlerFunc(func(hctx context.Context, _ steps.Context) (json.RawMessage, error) {
			return nil, e.awaitChildSaga(hctx, c, log)
		})
		if _, err := e.execute(ctx, ex, wait, sdef.Timeout, handlerContext(res, true, log)); err != nil {
			return err
		}
	}
	if sdef.Compensation != nil && sdef.HasCompensationHandler() {
		_, err := e.execute(ctx, ex, sdef.Compensation, sdef.Timeout, handlerContext(res, true, log))
		return err
	}
	return nil
}

func (e *Engine) awaitChildSaga(ctx context.Context, child persistence.Run, log *slog.Logger) error {
	if child.Status == persistence.RunSucceeded {
		_, err := e.store.RunTransition(ctx, persistence.RunTransitionParams{RunID: child.ID,
			From: []persistence.RunStatus{persistence.RunSucceeded}, To: persistence.RunCompensating, Undo: true,
			Error: e.encodeError(ctx, "its parent run "+child.ParentRunID+" compensates"), Now: e.clock.Now()})
		if err != nil && !errors.Is(err, persistence.ErrInvalidTransition) {
			return fmt.Errorf("child run %s: start its compensation: %w", child.ID, err)
		}
		log.Info("child run compensating", "child_run_id", child.ID)
	}
	for {
		run, err := e.store.RunGet(ctx, child.ID)
		if err != nil {
			return err
		}
		switch run.Status {
		case persistence.RunCompensated:
			return nil
		case persistence.RunCompensating:
			e.advanceSagaRun(ctx, run)
		default:
			why, _ := e.decodeError(ctx, run.Error)
			return steps.Permanent(fmt.Errorf("child run %s is %s, not compensated: %s", run.ID, run.Status, strings.TrimSpace(why)))
		}
		t := time.NewTimer(childPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

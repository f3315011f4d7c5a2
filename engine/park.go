package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// Wait, signal and sleep steps. Such a step is claimed like any other,
// then parked (park) instead of running a handler: its row says parked
// and a wait row says what ends it; it holds no worker slot, no lease and
// nothing in Redis. An event with its correlation (Publish), a signal
// (Signal) or its due time (the timer: timerLoop, and every reconcile
// pass) resolves it through the store's one conditional completion.

// DefaultEventLookback is how far back a step that starts waiting looks
// for its event (Config.EventLookback).
const DefaultEventLookback = 24 * time.Hour

// ErrNotWaiting is returned by Signal for a step that is not parked
// waiting for an event or a signal (not yet ready, finished, or a sleep).
// It wraps persistence.ErrNotClaimable.
var ErrNotWaiting = fmt.Errorf("engine: step is not waiting for a signal: %w", persistence.ErrNotClaimable)

// park parks a claimed wait or sleep step (sdef.Wait is set). Its
// `when`, evaluated first, may skip it. A WaitEvent step whose event came
// first (within Config.EventLookback) completes at once with the event's
// payload. An expression that fails on the run's data fails the step as
// a permanent error, as a `when` does.
func (e *Engine) park(ctx context.Context, ex *execution, res persistence.StepClaimResult, sc steps.Context, sdef *dag.Step, w *dag.Workflow, log *slog.Logger) bool {
	eval := e.exprBudget(ctx)
	if err := keysOverBudget(eval, sdef, sc.Input); err != nil {
		return e.stepFailed(ctx, ex, res, sdef, w, steps.Permanent(err), log)
	}
	if sdef.When != "" {
		run, err := sdef.EvalWhen(eval, sc.Input, sc.Outputs)
		if err != nil {
			return e.stepFailed(ctx, ex, res, sdef, w, steps.Permanent(err), log)
		}
		if !run {
			return e.stepSkipped(ctx, ex, res, "when is false", log)
		}
	}
	now := e.clock.Now()
	wt := sdef.Wait
	p := persistence.StepParkParams{RunID: ex.runID, Step: ex.step, Fence: ex.fence, Now: now}
	switch wt.Kind {
	case dag.WaitEvent:
		corr, err := wt.CorrelationValue(eval, sc.Input, sc.Outputs)
		if err != nil {
			return e.stepFailed(ctx, ex, res, sdef, w, steps.Permanent(err), log)
		}
		stored, aliases, err := e.storedCorrelation(eval, corr)
		if err != nil {
			if errors.Is(err, persistence.ErrInvalid) {
				err = steps.Permanent(err)
			}
			return e.stepFailed(ctx, ex, res, sdef, w, fmt.Errorf("step %q: %w", ex.step, err), log)
		}
		p.Kind, p.Event, p.Correlation, p.CorrelationAliases, p.EventsSince = persistence.WaitEvent, wt.Event, stored, aliases, now
		if e.cfg.EventLookback > 0 {
			p.EventsSince = now.Add(-e.cfg.EventLookback)
		}
	case dag.WaitSignal:
		p.Kind = persistence.WaitSignal
	case dag.WaitSleep:
		at, err := wt.WakeAt(eval, now, sc.Input, sc.Outputs)
		if err != nil {
			return e.stepFailed(ctx, ex, res, sdef, w, steps.Permanent(err), log)
		}
		p.Kind, p.DueAt = persistence.WaitSleep, &at
	case dag.WaitChild:
		child, err := e.childParams(eval, res, ex.fence, sc, wt)
		if err != nil {
			return e.stepFailed(ctx, ex, res, sdef, w, err, log)
		}
		p.Kind, p.Child = persistence.WaitChild, &child
	}
	if wt.Kind != dag.WaitSleep && wt.Timeout > 0 {
		due := now.Add(wt.Timeout)
		p.DueAt = &due
	}
	pres, err := e.store.StepPark(context.WithoutCancel(ctx), p)
	if r := e.record(ctx, err, ex, "park"); r != recorded {
		return r == staleLease
	}
	if pres.Matched != nil {
		payload, err := e.decodePayload(ctx, codec.Input, pres.Matched.Payload)
		if err != nil {
			return e.stepFailed(ctx, ex, res, sdef, w, fmt.Errorf("step %q: event %q: %w", ex.step, pres.Matched.ID, err), log)
		}
		log.Info("wait matched an earlier event", "event_id", pres.Matched.ID)
		return e.stepSucceeded(ctx, ex, res, payload, log)
	}
	e.stats.stepsParked.Add(1)
	e.tracer.outcome(ctx, "parked", nil)
	log.Info("step parked", "kind", string(p.Kind), "event", p.Event, "correlation", p.Correlation, "due_at", p.DueAt)
	if pres.Child != nil {
		e.childStarted(ctx, *pres.Child, log)
	}
	if p.DueAt != nil {
		e.timer.wake(*p.DueAt)
	}
	return true
}

// Signal completes a parked wait step (dag.WaitForSignal, or a
// dag.WaitFor step: a signal stands in for its event) with payload (any
// JSON-encodable value, raw JSON, or nil) as its output, and enqueues the
// steps that it releases. A step that is not parked waiting (not ready
// yet, finished, cancelled, or a sleep) is ErrNotWaiting; a repeat of a
// signal that completed the step with the same payload is a no-op.
func (e *Engine) Signal(ctx context.Context, runID, step string, payload any) error {
	if e.stopped() {
		return ErrStopped
	}
	raw, err := encodeInput(payload)
	if err != nil {
		return fmt.Errorf("engine: signal run %s step %q: invalid payload: %w", runID, step, errors.Join(ErrInvalidInput, err))
	}
	wait, err := e.store.StepWaitGet(ctx, runID, step)
	switch {
	case errors.Is(err, persistence.ErrStepNotFound):
		return e.notWaiting(ctx, runID, step, raw)
	case err != nil:
		return fmt.Errorf("engine: signal run %s step %q: %w", runID, step, err)
	case wait.Kind == persistence.WaitSleep:
		return fmt.Errorf("%w: run %s step %q is a sleep", ErrNotWaiting, runID, step)
	case wait.Kind == persistence.WaitChild:
		// Its child run's end resolves it; a signal would leave the
		// child running, never read and never compensated.
		return fmt.Errorf("%w: run %s step %q waits for its child run %s", ErrNotWaiting, runID, step, wait.ChildRunID)
	}
	stored, err := e.encodePayload(ctx, codec.Output, raw)
	if err != nil {
		return fmt.Errorf("engine: signal run %s step %q: %w", runID, step, err)
	}
	outs, err := e.store.StepCompleteMany(ctx, persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{
		{RunID: runID, Step: step, Parked: true, Output: stored, Now: e.clock.Now()}}})
	if err != nil {
		return fmt.Errorf("engine: signal run %s step %q: %w", runID, step, err)
	}
	if errors.Is(outs[0].Err, persistence.ErrFenceMismatch) {
		// Resolved (or cancelled) meanwhile.
		return e.notWaiting(ctx, runID, step, raw)
	}
	if outs[0].Err != nil {
		return fmt.Errorf("engine: signal run %s step %q: %w", runID, step, outs[0].Err)
	}
	e.stats.signals.Add(1)
	e.afterResolved(ctx, []persistence.StepCompleteResult{outs[0].Result})
	return nil
}

// notWaiting answers a signal of a step that is not parked: nil for a
// repeat (succeeded with this payload), ErrNotWaiting otherwise.
func (e *Engine) notWaiting(ctx context.Context, runID, step string, raw []byte) error {
	st, err := e.store.StepGet(ctx, runID, step)
	if err != nil {
		return fmt.Errorf("engine: signal run %s step %q: %w", runID, step, err)
	}
	if st.Status == persistence.StepSucceeded {
		out, err := e.decodePayload(ctx, codec.Output, st.Output)
		if err == nil && sameJSON(out, raw) {
			return nil
		}
	}
	return fmt.Errorf("%w: run %s step %q is %s", ErrNotWaiting, runID, step, st.Status)
}

// afterResolved does what follows the resolution of parked steps (by an
// event, a signal or a timer): the steps they released are enqueued, and
// the saga is advanced for a run that began compensating meanwhile.
func (e *Engine) afterResolved(ctx context.Context, results []persistence.StepCompleteResult) {
	var ready []persistence.StepRun
	for _, r := range results {
		ready = append(ready, r.Ready...)
		e.stats.stepsSucceeded.Add(1)
		if e.metrics != nil {
			if run, err := e.store.RunGet(ctx, r.Step.RunID); err == nil {
				e.metrics.stepFinished(run.Workflow, r.Step.Step, metricSucceeded)
				if r.RunFinished {
					e.metrics.runFinished(run, persistence.RunSucceeded, r.Step.UpdatedAt)
				}
			}
		}
		if r.RunFinished && r.RunParentID != "" {
			e.childFinished(ctx, r.Step.RunID)
		}
		if r.RunStatus == persistence.RunCompensating {
			e.advanceSaga(ctx, r.Step.RunID)
		}
	}
	// A failed enqueue is logged; the reconciler enqueues queued steps.
	_ = e.enqueueSteps(ctx, ready)
}

// ParkedResult counts what one pass over the due parked steps did.
type ParkedResult struct {
	Woken    int // sleeps completed
	TimedOut int // waits failed by their timeout
}

// wakeParked resolves the parked steps due at now (of the workflows this
// node registered): sleeps complete, waits fail with a timeout error
// (retried, then dead-lettered and compensated, as any failure). It
// returns the next due time after now (zero: none). Several nodes may run
// it at once: each parked step is resolved once.
func (e *Engine) wakeParked(ctx context.Context, now time.Time) (ParkedResult, time.Time, error) {
	var r ParkedResult
	workflows := e.registeredNames()
	if len(workflows) == 0 {
		return r, time.Time{}, nil
	}
	due, next, err := e.store.StepListParkedDue(ctx, persistence.ListDueParams{Before: now, Limit: reconcileBatch, Workflows: workflows})
	if err != nil {
		return r, time.Time{}, err
	}
	var sleeps []persistence.StepCompleteParams
	for _, wt := range due {
		if wt.Kind == persistence.WaitSleep {
			sleeps = append(sleeps, persistence.StepCompleteParams{RunID: wt.RunID, Step: wt.Step, Parked: true, Now: now})
			continue
		}
		ok, err := e.timeOut(ctx, wt, now)
		if err != nil {
			return r, next, err
		}
		if ok {
			r.TimedOut++
		}
	}
	if len(sleeps) > 0 {
		outs, err := e.store.StepCompleteMany(ctx, persistence.StepCompleteManyParams{Items: sleeps})
		if err != nil {
			return r, next, err
		}
		var done []persistence.StepCompleteResult
		for _, o := range outs {
			if o.Err == nil {
				done = append(done, o.Result)
			}
		}
		r.Woken = len(done)
		e.afterResolved(ctx, done)
	}
	if len(due) == reconcileBatch {
		next = now // more are due
	}
	return r, next, nil
}

// timeOut fails a parked wait whose timeout has come, through the retry
// policy of its run's plan: a retry is enqueued for its due time (its
// claim parks the step again, with a fresh deadline), a dead letter fails
// or compensates the run. It reports false when the step was resolved
// first.
func (e *Engine) timeOut(ctx context.Context, wt persistence.StepWait, now time.Time) (bool, error) {
	herr := fmt.Errorf("wait for %s timed out at %s", waitWhat(wt), wt.DueAt.UTC().Format(time.RFC3339Nano))
	ok, err := e.failParked(ctx, wt, herr, true, now)
	if ok && wt.Kind == persistence.WaitChild {
		// The step gave up on its child: stop it (a retry starts another).
		if err := e.Cancel(ctx, wt.ChildRunID); err != nil && !errors.Is(err, persistence.ErrRunFinished) {
			e.log.Warn("child run: cancel after its parent step timed out failed", "run_id", wt.ChildRunID, "err", err)
		}
	}
	return ok, err
}

// failParked fails a parked step with herr through the retry policy of
// its run's plan: a retry is enqueued for its due time (its claim parks
// the step again), a dead letter fails or compensates the run. It reports
// false when the step was resolved first. timedOut says herr is the wait's
// timeout: the store then fails the step only while its wait row is due
// (a stale timer pass fails no re-parked retry).
func (e *Engine) failParked(ctx context.Context, wt persistence.StepWait, herr error, timedOut bool, now time.Time) (bool, error) {
	run, err := e.store.RunGet(ctx, wt.RunID)
	if err != nil {
		return false, err
	}
	st, err := e.store.StepGet(ctx, wt.RunID, wt.Step)
	if err != nil {
		return false, err
	}
	w, err := e.planFor(ctx, run)
	if err != nil {
		return false, err
	}
	policy := dag.DefaultRetryPolicy()
	var sdef *dag.Step
	if w != nil {
		sdef = w.Step(wt.Step)
	}
	if sdef != nil {
		policy = sdef.Retry
	}
	p := persistence.StepFailParams{RunID: wt.RunID, Step: wt.Step, Parked: true, TimedOut: timedOut, Error: e.encodeError(ctx, herr.Error()), Now: now}
	if p.RetryAt = e.retryAt(policy, st.Attempt, st.MaxAttempts, herr, now); p.RetryAt == nil {
		p.DeadRunStatus = persistence.RunFailed
		p.DeadRunError = e.encodeError(ctx, fmt.Sprintf("step %q dead after %d attempt(s): %s", wt.Step, st.Attempt, herr))
		if e.needsCompensation(ctx, wt.RunID, wt.Step, w) {
			p.DeadRunStatus = persistence.RunCompensating
		}
	}
	sr, err := e.store.StepFail(ctx, p)
	if errors.Is(err, persistence.ErrFenceMismatch) {
		// An event, a signal or the child came first, or another node
		// timed the wait out and its retry parked it again with a later
		// deadline (wt is then stale, and so may be st).
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e.stats.stepsFailed.Add(1)
	log := e.log.With("run_id", wt.RunID, "workflow", wt.Workflow, "step", wt.Step, "attempt", st.Attempt)
	if p.RetryAt != nil {
		e.metrics.stepRetried(wt.Workflow, wt.Step)
		log.Warn("parked step failed; retrying", "err", herr, "retry_at", p.RetryAt)
		e.enqueue(sr.Queue, taskRef{RunID: wt.RunID, Step: wt.Step, Attempt: st.Attempt + 1}.String(), *p.RetryAt, sr.Priority)
		return true, nil
	}
	e.stats.stepsDead.Add(1)
	e.metrics.stepFinished(wt.Workflow, wt.Step, metricDead)
	if p.DeadRunStatus == persistence.RunFailed && run.Status == persistence.RunRunning {
		e.metrics.runFinished(run, persistence.RunFailed, now)
		e.runEnded(ctx, run)
	}
	log.Warn("parked step failed; step dead-lettered", "err", herr, "run_status", p.DeadRunStatus)
	e.cancelChildrenOfStopped(ctx, wt.RunID, w)
	if p.DeadRunStatus == persistence.RunCompensating {
		e.advanceSaga(ctx, wt.RunID)
	}
	return true, nil
}

func waitWhat(wt persistence.StepWait) string {
	if wt.Kind == persistence.WaitChild {
		return "child run " + wt.ChildRunID
	}
	if wt.Kind == persistence.WaitEvent {
		return fmt.Sprintf("event %q (correlation %q)", wt.Event, wt.Correlation)
	}
	return "a signal"
}

// parkTimer is the node's one timer for parked steps: it sleeps until the
// earliest due time it knows of (from the last pass, or a step this node
// just parked), at most until the next poll.
type parkTimer struct {
	mu   sync.Mutex
	next time.Time
	kick chan struct{}
}

func newParkTimer() *parkTimer { return &parkTimer{kick: make(chan struct{}, 1)} }

// wake makes the timer loop look again by at (a step just parked).
func (t *parkTimer) wake(at time.Time) {
	t.mu.Lock()
	earlier := t.next.IsZero() || at.Before(t.next)
	if earlier {
		t.next = at
	}
	t.mu.Unlock()
	if earlier {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

func (t *parkTimer) set(next time.Time) {
	t.mu.Lock()
	t.next = next
	t.mu.Unlock()
}

func (t *parkTimer) due() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next
}

// timerLoop resolves due parked steps on time: one store query when it
// wakes (at the earliest due time known, or every ReconcileInterval at
// the latest, so that a step parked by another node is seen), no
// goroutine or Redis entry per parked step.
func (e *Engine) timerLoop() {
	defer e.wg.Done()
	poll := e.cfg.ReconcileInterval
	if poll <= 0 {
		poll = DefaultReconcileInterval
	}
	for {
		wait := poll
		if next := e.timer.due(); !next.IsZero() {
			wait = min(poll, max(next.Sub(e.clock.Now()), time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-e.fetchCtx.Done():
			t.Stop()
			return
		case <-e.timer.kick:
			t.Stop()
			continue
		case <-t.C:
		}
		if e.paused() {
			continue
		}
		_, next, err := e.wakeParked(e.fetchCtx, e.clock.Now())
		if err != nil && e.fetchCtx.Err() == nil {
			e.log.Warn("parked steps: pass failed", "err", err)
		}
		e.timer.set(next)
	}
}

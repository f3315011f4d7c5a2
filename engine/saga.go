package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// The saga: when a step dead-letters, the run becomes compensating (in
// the same transaction as the dead letter) and its pending steps are
// cancelled. advanceSaga then queues the compensation of every completed
// step whose completed dependents are all compensated (dag decides the
// order; independent branches run in parallel). Each compensation is a task
// like a step, with its own retries. When every completed step is
// compensated the run is compensated; a compensation that dead-letters
// makes the run failed. advanceSaga is idempotent and safe to run from many
// workers at once: every transition it makes is guarded in the store. The
// reconciler calls it for compensating runs, so a crash between two
// compensations never strands a run.

// maybeAdvanceSaga advances the saga if the run is compensating.
func (e *Engine) maybeAdvanceSaga(ctx context.Context, runID string) {
	run, err := e.store.RunGet(context.WithoutCancel(ctx), runID)
	if err != nil || run.Status != persistence.RunCompensating {
		return
	}
	e.advanceSagaRun(ctx, run)
}

func (e *Engine) advanceSaga(ctx context.Context, runID string) {
	run, err := e.store.RunGet(context.WithoutCancel(ctx), runID)
	if err != nil {
		e.log.Warn("saga: reading run failed; the reconciler will resume it", "run_id", runID, "err", err)
		return
	}
	e.advanceSagaRun(ctx, run)
}

// advanceSagaRun advances a compensating run's saga: it fails the run if
// a compensation dead-lettered, else queues the compensations now ready,
// else marks the run compensated once every completed step is.
func (e *Engine) advanceSagaRun(ctx context.Context, run persistence.Run) {
	ctx = context.WithoutCancel(ctx)
	if run.Status != persistence.RunCompensating {
		return
	}
	log := e.log.With("run_id", run.ID, "workflow", run.Workflow)
	w, sts, ok := e.sagaSteps(ctx, run, log)
	if !ok {
		return
	}
	st := sagaStateOf(w, sts)
	if len(st.failed) > 0 {
		e.failSagaRun(ctx, run, st.failed, log)
		return
	}
	if queued, ok := e.queueCompensations(ctx, run, w, st, log); queued || !ok {
		return
	}
	if st.inFlight {
		return
	}
	for name := range st.completed {
		if !st.compensated[name] {
			return // compensations still running
		}
	}
	e.endSagaRun(ctx, run, log)
}

// sagaSteps reads a compensating run's plan and steps for advanceSagaRun.
// It says false, having logged why, when the saga cannot advance on this
// node now: the plan or steps could not be read, the workflow is not
// registered here, or the run has a step this node does not know.
func (e *Engine) sagaSteps(ctx context.Context, run persistence.Run, log *slog.Logger) (*dag.Workflow, []persistence.StepRun, bool) {
	w, err := e.planFor(ctx, run)
	if err != nil {
		log.Warn("saga: the run's workflow version could not be read; the reconciler will resume it", "err", err)
		return nil, nil, false
	}
	if w == nil {
		log.Warn("saga: workflow not registered on this node")
		return nil, nil, false
	}
	sts, err := e.store.StepList(ctx, run.ID)
	if err != nil {
		log.Warn("saga: listing steps failed; the reconciler will resume it", "err", err)
		return nil, nil, false
	}
	for _, s := range sts {
		if w.Step(s.Step) == nil {
			// The run follows a plan this node does not have (a newer
			// deploy's): the undo order is the nodes' that know it.
			log.Debug("saga: the run has a step this node does not know; left to a node that does", "step", s.Step)
			return nil, nil, false
		}
	}
	return w, sts, true
}

// failSagaRun makes a compensating run failed because the compensations
// of the steps named in failed dead-lettered. Its error is the run's,
// with the failed steps added.
func (e *Engine) failSagaRun(ctx context.Context, run persistence.Run, failed []string, log *slog.Logger) {
	// The run's error was encoded: decode it to add to it (one that
	// cannot be decoded is kept out of the new text, not shown).
	why, derr := e.decodeError(ctx, run.Error)
	if derr != nil {
		why = "(error text not decoded: " + derr.Error() + ")"
	}
	tr, err := e.store.RunTransition(ctx, persistence.RunTransitionParams{
		RunID: run.ID, From: []persistence.RunStatus{persistence.RunCompensating}, To: persistence.RunFailed,
		Error: e.encodeError(ctx, fmt.Sprintf("%s; compensation failed for step(s) %s", why, strings.Join(failed, ", "))),
		Now:   e.clock.Now(),
	})
	if err != nil && !errors.Is(err, persistence.ErrRunFinished) && !errors.Is(err, persistence.ErrInvalidTransition) {
		log.Warn("saga: marking run failed failed", "err", err)
	} else if err == nil {
		e.metrics.runFinished(tr.Run, persistence.RunFailed, e.clock.Now())
		log.Warn("run failed: a compensation dead-lettered", "steps", failed)
		e.runEnded(ctx, tr.Run)
	}
}

// queueCompensations queues the compensation of every succeeded step
// whose completed dependents are all compensated. It says whether there
// were any to queue, and false for ok when queueing them failed (logged;
// the reconciler resumes the saga).
func (e *Engine) queueCompensations(ctx context.Context, run persistence.Run, w *dag.Workflow, st sagaState, log *slog.Logger) (queued, ok bool) {
	var toQueue []string
	for _, name := range w.CompensationReady(st.completed, st.compensated) {
		if st.status[name] == persistence.StepSucceeded {
			toQueue = append(toQueue, name)
		}
	}
	if len(toQueue) == 0 {
		return false, true
	}
	changed, err := e.store.StepTransition(ctx, persistence.StepTransitionParams{
		RunID: run.ID, Steps: toQueue,
		From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating,
		Now: e.clock.Now(),
	})
	if err != nil {
		log.Warn("saga: queueing compensations failed; the reconciler will resume it", "err", err)
		return true, false
	}
	for _, s := range changed {
		e.enqueue(s.Queue, taskRef{RunID: run.ID, Step: s.Step, Compensation: true, Attempt: s.CompAttempt + 1}.String(), e.clock.Now(), s.Priority)
	}
	return true, true
}

// endSagaRun makes a compensating run compensated, once every completed
// step is.
func (e *Engine) endSagaRun(ctx context.Context, run persistence.Run, log *slog.Logger) {
	tr, err := e.store.RunTransition(ctx, persistence.RunTransitionParams{
		RunID: run.ID, From: []persistence.RunStatus{persistence.RunCompensating}, To: persistence.RunCompensated,
		Now: e.clock.Now(),
	})
	if err == nil {
		e.metrics.runFinished(tr.Run, persistence.RunCompensated, e.clock.Now())
		log.Info("run compensated")
		e.runEnded(ctx, tr.Run)
	} else if !errors.Is(err, persistence.ErrRunFinished) && !errors.Is(err, persistence.ErrInvalidTransition) {
		log.Warn("saga: marking run compensated failed", "err", err)
	}
}

// compensationRefused says why a claimed compensation attempt must not
// run its handler (the error it then fails with), or nil.
func (e *Engine) compensationRefused(ctx context.Context, ex *execution, res persistence.StepClaimResult, sdef *dag.Step) error {
	attempt := res.Step.CompAttempt
	switch {
	case sdef == nil:
		return fmt.Errorf("workflow %q step %q is not registered on node %s", res.Run.Workflow, ex.step, e.cfg.NodeID)
	case !compensable(sdef):
		return steps.Permanent(fmt.Errorf("step %q has no compensation", ex.step))
	case sdef.Compensation != nil && !sdef.HasCompensationHandler():
		// The run's version has a compensation this node's lacks. The
		// claim refuses such a step (handlesCompensation), so this is
		// only a registration racing the claim: try again.
		return fmt.Errorf("step %q: the compensation of the run's workflow version is not on node %s", ex.step, e.cfg.NodeID)
	case attempt > sdef.Retry.MaxAttempts:
		return steps.Permanent(fmt.Errorf("compensation attempt %d exceeds the %d allowed: earlier attempts lost their worker", attempt, sdef.Retry.MaxAttempts))
	}
	return e.deliveryLimit(ctx, ex, persistence.AttemptCompensation, attempt)
}

// executeCompensation runs a compensation's handler, with the step's
// outputs, under the step's timeout and heartbeat.
func (e *Engine) executeCompensation(ctx context.Context, ex *execution, res persistence.StepClaimResult, sdef *dag.Step, log *slog.Logger) error {
	if isChild(sdef) {
		return e.compensateChild(ctx, ex, res, sdef, log)
	}
	_, err := e.execute(ctx, ex, sdef.Compensation, sdef.Timeout, handlerContext(res, true, log))
	return err
}

// sagaState is where a compensating run's steps are, for advanceSagaRun.
type sagaState struct {
	completed   map[string]bool // succeeded, undone or being undone, or still running
	compensated map[string]bool // undone, or with nothing to undo
	status      map[string]persistence.StepStatus
	inFlight    bool     // a step still runs forward
	failed      []string // compensations that dead-lettered
}

func sagaStateOf(w *dag.Workflow, sts []persistence.StepRun) sagaState {
	st := sagaState{completed: map[string]bool{}, compensated: map[string]bool{}, status: map[string]persistence.StepStatus{}}
	for _, s := range sts {
		st.status[s.Step] = s.Status
		d := w.Step(s.Step)
		switch s.Status {
		case persistence.StepSucceeded:
			st.completed[s.Step] = true
			if !compensable(d) {
				st.compensated[s.Step] = true // nothing to undo
			}
		case persistence.StepCompensating:
			st.completed[s.Step] = true
		case persistence.StepCompensated:
			st.completed[s.Step] = true
			st.compensated[s.Step] = true
		case persistence.StepCompensationFailed:
			st.completed[s.Step] = true
			st.failed = append(st.failed, s.Step)
		case persistence.StepRunning:
			// Still running forward: it may succeed and need undoing, so
			// it holds back the compensation of what it depends on.
			st.completed[s.Step] = true
			st.inFlight = true
		}
	}
	return st
}

// runCompensation executes one compensation attempt.
func (e *Engine) runCompensation(ctx context.Context, ex *execution, ref taskRef) bool {
	res, ok, err := e.claim(ctx, ex, ref, []string{ref.Step})
	if err != nil {
		return false
	}
	if !ok {
		return true
	}
	e.stats.compensations.Add(1)
	attempt := res.Step.CompAttempt
	ctx, traceAttrs := e.tracer.startAttempt(ctx, res, ex.task.ID, true)
	defer e.tracer.endAttempt(ctx)
	log := withLazy(e.log, append([]slog.Attr{slog.String("run_id", ref.RunID), slog.String("workflow", res.Run.Workflow),
		slog.String("step", ref.Step), slog.Int("compensation_attempt", attempt)}, traceAttrs...)...)
	w, err := e.planFor(ctx, res.Run)
	if err != nil {
		log.Warn("compensation left for later: its workflow version could not be read", "err", err)
		e.releaseLease(context.WithoutCancel(ctx), ex.runID, ex.step, ex.fence)
		return false
	}
	var sdef *dag.Step
	if w != nil {
		sdef = w.Step(ref.Step)
	}
	herr := e.compensationRefused(ctx, ex, res, sdef)
	if herr == nil {
		res, herr = e.decodeClaim(ctx, res)
	}
	if herr == nil {
		herr = e.executeCompensation(ctx, ex, res, sdef, log)
		if ex.released.Load() {
			return true
		}
		if errors.Is(herr, errLeaseLost) {
			e.tracer.outcome(ctx, "stale", herr)
			e.stats.staleCompletions.Add(1)
			return true
		}
	}
	now := e.clock.Now()
	if herr == nil {
		_, err := e.store.StepComplete(context.WithoutCancel(ctx), persistence.StepCompleteParams{
			RunID: ref.RunID, Step: ref.Step, Fence: ex.fence, Compensation: true, Now: now,
		})
		if r := e.record(ctx, err, ex, "compensation completion"); r != recorded {
			return r == staleLease
		}
		e.metrics.compensationEnded(res.Run.Workflow, true)
		e.tracer.outcome(ctx, "compensated", nil)
		log.Info("step compensated")
		e.advanceSaga(ctx, ref.RunID)
		return true
	}
	p := persistence.StepFailParams{
		RunID: ref.RunID, Step: ref.Step, Fence: ex.fence, Error: e.encodeError(ctx, errorText(herr)), Compensation: true, Now: now,
	}
	policy := dag.DefaultRetryPolicy()
	if sdef != nil {
		policy = sdef.Retry
	}
	p.RetryAt = e.retryAt(policy, attempt, policy.MaxAttempts, herr, now)
	sr, err := e.store.StepFail(context.WithoutCancel(ctx), p)
	if r := e.record(ctx, err, ex, "compensation failure"); r != recorded {
		return r == staleLease
	}
	if p.RetryAt != nil {
		e.tracer.outcome(ctx, "retrying", herr)
		e.tracer.retried(ctx, taskRef{RunID: ref.RunID, Step: ref.Step, Compensation: true, Attempt: attempt}.String())
		log.Warn("compensation failed; retrying", "err", firstLine(herr), "retry_at", p.RetryAt)
		e.enqueue(sr.Queue, taskRef{RunID: ref.RunID, Step: ref.Step, Compensation: true, Attempt: attempt + 1}.String(), *p.RetryAt, sr.Priority)
		return true
	}
	e.metrics.compensationEnded(res.Run.Workflow, false)
	e.tracer.outcome(ctx, "dead", herr)
	log.Error("compensation dead-lettered", "err", firstLine(herr))
	e.advanceSaga(ctx, ref.RunID)
	return true
}

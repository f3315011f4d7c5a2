package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// DeadLetters lists dead steps (the dead-letter queue), newest first, with
// their error and attempt count, decoded (Config.Codec).
func (e *Engine) DeadLetters(ctx context.Context, p persistence.StepListDeadParams) (persistence.StepPage, error) {
	page, err := e.store.StepListDead(ctx, p)
	if err != nil {
		return persistence.StepPage{}, err
	}
	if err := e.decodeSteps(ctx, page.Steps); err != nil {
		return persistence.StepPage{}, err
	}
	return page, nil
}

// RetryDead retries a dead step after its cause was fixed, resuming the run
// from that step and keeping the outputs of the steps that completed.
//
// Only a run that failed because the step dead-lettered with nothing to
// compensate can be resumed. When the run compensated (its completed steps
// were undone) or is compensating, retrying would run later steps on top of
// undone work, so it is refused with a *RetryRefusedError; trigger a new
// run instead.
func (e *Engine) RetryDead(ctx context.Context, runID, step string) error {
	_, err := e.reopen(ctx, runID, step)
	return err
}

// RetryRun retries every dead step of a failed run at once (RetryDead for
// each, in one transaction) and returns their names, in plan order. It is
// refused, with a *RetryRefusedError, as RetryDead is, and for a run with
// no dead step.
func (e *Engine) RetryRun(ctx context.Context, runID string) ([]string, error) {
	return e.reopen(ctx, runID, "")
}

// reopen resumes a failed run from its dead step (step), or from all of
// them (step empty).
func (e *Engine) reopen(ctx context.Context, runID, step string) ([]string, error) {
	if e.stopped() {
		return nil, ErrStopped
	}
	run, err := e.store.RunGet(ctx, runID)
	if err != nil {
		return nil, err
	}
	refuse := func(reason string) error { return &RetryRefusedError{RunID: runID, Step: step, Reason: reason} }
	sts, err := e.store.StepList(ctx, runID)
	if err != nil {
		return nil, err
	}
	var dead []string
	for _, x := range sts {
		if x.Status == persistence.StepDead && (step == "" || x.Step == step) {
			dead = append(dead, x.Step)
		}
	}
	if step != "" && len(dead) == 0 {
		s, err := e.store.StepGet(ctx, runID, step)
		if err != nil {
			return nil, err
		}
		return nil, refuse(fmt.Sprintf("step is %s, not dead", s.Status))
	}
	switch run.Status {
	case persistence.RunFailed:
	case persistence.RunCompensating, persistence.RunCompensated:
		return nil, refuse(fmt.Sprintf("run is %s: its completed steps are being or were undone", run.Status))
	default:
		return nil, refuse(fmt.Sprintf("run is %s", run.Status))
	}
	if len(dead) == 0 {
		return nil, refuse("run has no dead step")
	}
	for _, x := range sts {
		if x.Status == persistence.StepCompensationFailed || x.Status == persistence.StepCompensated || x.Status == persistence.StepCompensating {
			return nil, refuse("run failed during compensation")
		}
	}
	queued, err := e.store.RunReopen(ctx, persistence.RunReopenParams{RunID: runID, Steps: dead, Now: e.clock.Now()})
	if err != nil {
		if errors.Is(err, persistence.ErrInvalidTransition) || errors.Is(err, persistence.ErrRunFinished) {
			return nil, refuse(err.Error())
		}
		return nil, err
	}
	e.log.Info("dead steps retried", "run_id", runID, "steps", dead)
	return dead, e.enqueueSteps(ctx, queued)
}

// DiscardDead removes a dead step from the dead-letter queue (it becomes
// cancelled; its error stays in the history). The run is left as it is.
func (e *Engine) DiscardDead(ctx context.Context, runID, step string) error {
	changed, err := e.store.StepTransition(ctx, persistence.StepTransitionParams{
		RunID: runID, Steps: []string{step},
		From: []persistence.StepStatus{persistence.StepDead}, To: persistence.StepCancelled,
		Now: e.clock.Now(),
	})
	if err != nil {
		return err
	}
	if len(changed) == 0 {
		return fmt.Errorf("engine: run %s step %q: %w: not dead", runID, step, persistence.ErrInvalidTransition)
	}
	return nil
}

// deliveryLimit returns a permanent error when a step's earlier attempts
// of kind lost their worker (it died or froze past its lease, with no
// outcome) DeliveryLimit times or more: the task is probably killing its
// workers. It counts in the store, the truth, not Redis' delivery count:
// that one restarts from one whenever a step is requeued under a new task
// id (the reconciler requeues an expired step by its current attempt) or
// a redelivery is dropped as stale and enqueued afresh, and it grows while
// the store is unreachable and tasks are put back untried, which would
// dead-letter healthy steps after a database outage. A first attempt has
// nothing to count.
func (e *Engine) deliveryLimit(ctx context.Context, ex *execution, kind persistence.AttemptKind, attempt int) error {
	if attempt <= 1 {
		return nil
	}
	atts, err := e.store.AttemptList(ctx, ex.runID)
	if err != nil {
		return nil // the attempt budget still bounds the step
	}
	lost := 0
	for _, a := range atts {
		if a.Step == ex.step && a.Kind == kind && a.Outcome == persistence.OutcomeLost {
			lost++
			if a.Attempt == attempt-1 {
				e.tracer.lost(ctx, a, e.clock.Now())
			}
		}
	}
	if lost < e.cfg.DeliveryLimit {
		return nil
	}
	return steps.Permanent(fmt.Errorf("%d attempts lost their worker without an outcome (delivery limit %d): it may be killing its workers",
		lost, e.cfg.DeliveryLimit))
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// DeadLetters lists dead steps (the dead-letter queue), newest first, with
// their error and attempt count, decoded (Config.Codec; an error that
// cannot be decoded is left empty, and the step's PayloadError says why).
func (e *Engine) DeadLetters(ctx context.Context, p persistence.StepListDeadParams) (persistence.StepPage, error) {
	var page persistence.StepPage
	err := e.read(ctx, func(st persistence.Store) (err error) {
		page, err = st.StepListDead(ctx, p)
		return err
	})
	if err != nil {
		return persistence.StepPage{}, err
	}
	e.markSteps(ctx, page.Steps)
	return page, nil
}

// ActionOption configures an operator action on a run: RetryDead,
// RetryRun, RetryFrom, SkipStep.
type ActionOption func(*actionOptions)

type actionOptions struct {
	actor string
}

// DefaultActor is who an operator action is recorded as done by when the
// caller names no one (Actor).
const DefaultActor = "go"

// Actor names who performs an operator action; the run's history
// (RunInfo.Actions) records it. The HTTP API passes the API key's name,
// the CLI "cli"; without it the action is DefaultActor's.
func Actor(name string) ActionOption {
	return func(o *actionOptions) { o.actor = name }
}

func actionOpts(opts []ActionOption) actionOptions {
	o := actionOptions{actor: DefaultActor}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Cancel cancels an unfinished run: its pending steps are cancelled, and
// steps running now are told to stop (their context ends at their next
// heartbeat). A finished run gives an error wrapping
// persistence.ErrRunFinished.
func (e *Engine) Cancel(ctx context.Context, runID string) error {
	tr, err := e.store.RunTransition(ctx, persistence.RunTransitionParams{
		RunID:              runID,
		From:               []persistence.RunStatus{persistence.RunPending, persistence.RunRunning, persistence.RunCompensating},
		To:                 persistence.RunCancelled,
		Error:              "cancelled",
		Now:                e.clock.Now(),
		CancelPendingSteps: true,
	})
	if err != nil {
		return fmt.Errorf("engine: cancel run %s: %w", runID, err)
	}
	e.metrics.runFinished(tr.Run, persistence.RunCancelled, e.clock.Now())
	e.cancelLocal(runID)
	e.runEnded(ctx, tr.Run)
	// The run's unfinished children (and theirs) are cancelled too; a
	// failure here leaves them running, and is returned.
	if err := e.cancelChildren(ctx, runID); err != nil {
		return fmt.Errorf("engine: cancel run %s: its child runs: %w", runID, err)
	}
	return nil
}

// RetryDead retries a dead step after its cause was fixed, resuming the run
// from that step and keeping the outputs of the steps that completed.
//
// The run must be failed (finished because the step dead-lettered). A
// compensated run is refused with a *RetryRefusedError
// (ErrRetryRefused): its completed steps were undone, so retrying would
// go on from undone work; RetryFrom resumes it instead. A run whose
// compensation failed, or that is in flight, is refused too
// (persistence.RunStatus.ActionRefusal has the rule of run statuses).
// The action is recorded in the run's history (RunInfo.Actions) as done
// by the Actor option's name.
func (e *Engine) RetryDead(ctx context.Context, runID, step string, opts ...ActionOption) error {
	_, err := e.resume(ctx, runID, step, func(actor string) (persistence.RunRetryResult, error) {
		return e.store.RunRetry(ctx, persistence.RunRetryParams{RunID: runID, Mode: persistence.RetryFailed, Step: step,
			Actor: actor, Now: e.clock.Now()})
	}, opts)
	return err
}

// RetryRun retries every dead step of a finished run at once (the retry
// mode "failed": every success kept) and returns the steps that run again,
// in plan order. It is refused, with a *RetryRefusedError, as RetryDead
// is (a compensated run included), and for a run with nothing to retry.
func (e *Engine) RetryRun(ctx context.Context, runID string, opts ...ActionOption) ([]string, error) {
	return e.resume(ctx, runID, "", func(actor string) (persistence.RunRetryResult, error) {
		return e.store.RunRetry(ctx, persistence.RunRetryParams{RunID: runID, Mode: persistence.RetryFailed,
			Actor: actor, Now: e.clock.Now()})
	}, opts)
}

// RetryFrom reruns a finished run (succeeded, failed or compensated) from
// step: the step and every step downstream of it run again, as do the
// run's dead steps and, on a compensated run, its undone ones: it is the
// one action that resumes a compensated run, since it redoes the undone
// work instead of building on it. A step that had completed runs under a
// new idempotency key (steps.RerunKey). It returns the steps that run
// again, in plan order; refusals are *RetryRefusedError (see RetryDead).
func (e *Engine) RetryFrom(ctx context.Context, runID, step string, opts ...ActionOption) ([]string, error) {
	return e.resume(ctx, runID, step, func(actor string) (persistence.RunRetryResult, error) {
		return e.store.RunRetry(ctx, persistence.RunRetryParams{RunID: runID, Mode: persistence.RetryFromStep, Step: step,
			Actor: actor, Now: e.clock.Now()})
	}, opts)
}

// SkipStep gives a dead step of a finished run the output an operator
// provides (JSON; nil for none) instead of running it, and resumes the
// run: the step counts as succeeded (its dependents read that output; if
// the run later compensates, its compensation runs) and the run's other
// dead steps are retried. A run left with nothing to run succeeds.
// Refusals are *RetryRefusedError, a compensated run's included (see
// RetryDead).
func (e *Engine) SkipStep(ctx context.Context, runID, step string, output json.RawMessage, opts ...ActionOption) error {
	_, err := e.resume(ctx, runID, step, func(actor string) (persistence.RunRetryResult, error) {
		out, err := e.encodePayload(ctx, codec.Output, output)
		if err != nil {
			return persistence.RunRetryResult{}, fmt.Errorf("engine: run %s step %q: %w", runID, step, err)
		}
		return e.store.StepSkip(ctx, persistence.StepSkipParams{RunID: runID, Step: step, Output: out,
			Actor: actor, Now: e.clock.Now()})
	}, opts)
	return err
}

// resume carries out an operator action (act, given the actor) and
// enqueues the steps it made ready. The store decides what the action
// does and refuses it (retryPlan); a refusal becomes a *RetryRefusedError.
func (e *Engine) resume(ctx context.Context, runID, step string, act func(actor string) (persistence.RunRetryResult, error),
	opts []ActionOption) ([]string, error) {
	if e.stopped() {
		return nil, ErrStopped
	}
	o := actionOpts(opts)
	res, err := act(o.actor)
	var refused *persistence.RetryRefusedError
	if errors.As(err, &refused) {
		return nil, &RetryRefusedError{RunID: runID, Step: step, Reason: refused.Reason}
	}
	if err != nil {
		return nil, err
	}
	e.log.Info("run resumed by an operator", "run_id", runID, "action", string(res.Action.Action), "step", step,
		"actor", o.actor, "steps", res.Action.Steps)
	return res.Action.Steps, e.enqueueSteps(ctx, res.Queued)
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

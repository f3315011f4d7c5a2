package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// Recording a forward attempt's outcome: success and skip go through the
// committers (committer.go); a failure becomes a retry or a dead letter,
// and a dead letter may start the saga (saga.go).

// recordResult is how recording an attempt's outcome in the store went.
type recordResult int

const (
	recorded    recordResult = iota // the outcome is stored
	staleLease                      // refused: the attempt's lease was taken over
	storeFailed                     // the store could not be asked: try the task again
)

// record classifies the store's answer to recording an attempt's outcome
// (what: "completion", "failure", ...), counting and logging it: the one
// rule every outcome of a step or compensation follows. A refusal for a
// lost lease is a zombie's late result (Stats().StaleCompletions): its
// task is done. Any other error means the store could not be asked; the
// task is tried again and, at worst, the step runs again.
func (e *Engine) record(ctx context.Context, err error, ex *execution, what string) recordResult {
	switch {
	case err == nil:
		return recorded
	case errors.Is(err, persistence.ErrFenceMismatch):
		e.tracer.outcome(ctx, "stale", nil)
		e.stats.staleCompletions.Add(1)
		e.log.Warn("stale "+what+" refused: the lease was taken over", "run_id", ex.runID, "step", ex.step)
		return staleLease
	default:
		e.tracer.outcome(ctx, "store_error", err)
		e.stats.errors.Add(1)
		e.log.Error("recording a "+what+" failed; the step will run again", "run_id", ex.runID, "step", ex.step, "err", err)
		return storeFailed
	}
}

// releasedByStop reports whether Stop released the attempt's lease (and
// handed its task back): another node owns the step now, so this node
// records nothing of the attempt, however its handler ended.
func (e *Engine) releasedByStop(ex *execution) bool { return ex.released.Load() }

// retryAt is when a failed attempt (forward or compensation) runs again,
// or nil when it is dead: its error is permanent, or attempt is the last
// of max. The delay is the policy's backoff with jitter, unless the
// handler chose one with steps.RetryAfter. The one backoff rule.
func (e *Engine) retryAt(policy dag.RetryPolicy, attempt, max int, herr error, now time.Time) *time.Time {
	if steps.IsPermanent(herr) || attempt >= max {
		return nil
	}
	delay := policy.Backoff(attempt, e.cfg.Rand())
	if d, ok := steps.RetryDelay(herr); ok {
		delay = d
	}
	at := now.Add(delay)
	return &at
}

func (e *Engine) stepSucceeded(ctx context.Context, ex *execution, res persistence.StepClaimResult, out json.RawMessage, log interface {
	Info(string, ...any)
}) bool {
	if e.releasedByStop(ex) {
		return true
	}
	fail := func(err error) bool {
		w, perr := e.planFor(ctx, res.Run)
		if perr != nil {
			w = e.Workflow(res.Run.Workflow) // its retry policy, for want of the run's
		}
		var sdef *dag.Step
		if w != nil {
			sdef = w.Step(ex.step)
		}
		return e.stepFailed(ctx, ex, res, sdef, w, err, e.log.With("run_id", ex.runID, "step", ex.step))
	}
	stored, err := e.encodePayload(context.WithoutCancel(ctx), codec.Output, out)
	if err != nil {
		// The codec failed (a key service down?): try the step again.
		return fail(fmt.Errorf("step %q: %w", ex.step, err))
	}
	cres, err := e.complete(ctx, ex, persistence.StepCompleteParams{
		RunID: ex.runID, Step: ex.step, Fence: ex.fence, Output: stored, Now: e.clock.Now(),
	})
	if errors.Is(err, persistence.ErrTooLarge) || errors.Is(err, persistence.ErrInvalid) {
		// The store refuses the output itself (over MaxPayload): running
		// the step again would make the same output, so it is dead, with
		// the reason, rather than retried as if the store were down.
		return fail(steps.Permanent(e.encodedTooLarge(err, codec.Output, len(out), len(stored))))
	}
	if r := e.record(ctx, err, ex, "completion"); r != recorded {
		return r == staleLease
	}
	e.tracer.outcome(ctx, "succeeded", nil)
	e.stats.stepsSucceeded.Add(1)
	e.metrics.stepFinished(res.Run.Workflow, ex.step, metricSucceeded)
	if cres.RunFinished {
		e.metrics.runFinished(res.Run, persistence.RunSucceeded, cres.Step.UpdatedAt)
		log.Info("run succeeded")
		e.runEnded(ctx, res.Run)
	}
	if cres.RunStatus == persistence.RunCompensating {
		// The run began compensating while this step ran: its success
		// needs undoing too.
		e.advanceSaga(ctx, ex.runID)
	}
	return true
}

func (e *Engine) stepSkipped(ctx context.Context, ex *execution, res persistence.StepClaimResult, why string, log interface {
	Info(string, ...any)
}) bool {
	if e.releasedByStop(ex) {
		return true
	}
	cres, err := e.complete(ctx, ex, persistence.StepCompleteParams{
		RunID: ex.runID, Step: ex.step, Fence: ex.fence, Skipped: true, Now: e.clock.Now(),
	})
	if r := e.record(ctx, err, ex, "completion"); r != recorded {
		return r == staleLease
	}
	e.tracer.outcome(ctx, "skipped", nil)
	e.stats.stepsSkipped.Add(1)
	e.metrics.stepFinished(res.Run.Workflow, ex.step, metricSkipped)
	if cres.RunFinished {
		e.metrics.runFinished(res.Run, persistence.RunSucceeded, cres.Step.UpdatedAt)
		e.runEnded(ctx, res.Run)
	}
	log.Info("step skipped", "reason", why)
	if cres.RunStatus == persistence.RunCompensating {
		e.advanceSaga(ctx, ex.runID)
	}
	return true
}

// stepAborted records a step whose run stopped running (cancelled or
// compensating) or whose lease was lost while its handler ran.
func (e *Engine) stepAborted(ctx context.Context, ex *execution, res persistence.StepClaimResult, why error, log interface {
	Info(string, ...any)
}) bool {
	if e.releasedByStop(ex) {
		return true
	}
	if errors.Is(why, errLeaseLost) {
		e.tracer.outcome(ctx, "stale", why)
		e.stats.staleCompletions.Add(1)
		return true
	}
	_, err := e.store.StepTransition(context.WithoutCancel(ctx), persistence.StepTransitionParams{
		RunID: ex.runID, Steps: []string{ex.step},
		From: []persistence.StepStatus{persistence.StepRunning}, To: persistence.StepCancelled,
		Error: why.Error(), Now: e.clock.Now(),
	})
	if r := e.record(ctx, err, ex, "abort"); r != recorded {
		return r == staleLease
	}
	e.metrics.stepFinished(res.Run.Workflow, ex.step, metricCancelled)
	e.tracer.outcome(ctx, "aborted", why)
	log.Info("step aborted", "reason", why)
	e.maybeAdvanceSaga(ctx, ex.runID)
	return true
}

// stepFailed records a failed attempt: a retry with backoff, or a dead
// letter (and then the saga) when attempts are exhausted or the error is
// permanent.
func (e *Engine) stepFailed(ctx context.Context, ex *execution, res persistence.StepClaimResult, sdef *dag.Step, w *dag.Workflow, herr error, log interface {
	Warn(string, ...any)
}) bool {
	if e.releasedByStop(ex) {
		return true
	}
	e.stats.stepsFailed.Add(1)
	now := e.clock.Now()
	attempt := res.Step.Attempt
	p := persistence.StepFailParams{
		RunID: ex.runID, Step: ex.step, Fence: ex.fence, Error: e.encodeError(ctx, errorText(herr)), Now: now,
	}
	policy := dag.DefaultRetryPolicy()
	if sdef != nil {
		policy = sdef.Retry
	}
	if p.RetryAt = e.retryAt(policy, attempt, res.Step.MaxAttempts, herr, now); p.RetryAt == nil {
		p.DeadRunStatus = persistence.RunFailed
		p.DeadRunError = e.encodeError(ctx, fmt.Sprintf("step %q dead after %d attempt(s): %s", ex.step, attempt, firstLine(herr)))
		if e.needsCompensation(ctx, ex.runID, ex.step, w) {
			p.DeadRunStatus = persistence.RunCompensating
		}
	}
	sr, err := e.store.StepFail(context.WithoutCancel(ctx), p)
	if r := e.record(ctx, err, ex, "failure"); r != recorded {
		return r == staleLease
	}
	if p.RetryAt != nil {
		e.metrics.stepRetried(res.Run.Workflow, ex.step)
		e.tracer.outcome(ctx, "retrying", herr)
		e.tracer.retried(ctx, taskRef{RunID: ex.runID, Step: ex.step, Attempt: attempt}.String())
		log.Warn("step failed; retrying", "err", firstLine(herr), "retry_at", p.RetryAt)
		e.enqueue(sr.Queue, taskRef{RunID: ex.runID, Step: ex.step, Attempt: attempt + 1}.String(), *p.RetryAt, sr.Priority)
		return true
	}
	e.tracer.outcome(ctx, "dead", herr)
	e.stats.stepsDead.Add(1)
	e.metrics.stepFinished(res.Run.Workflow, ex.step, metricDead)
	if p.DeadRunStatus == persistence.RunFailed && res.Run.Status == persistence.RunRunning {
		// StepFail failed the run unless it had stopped running
		// meanwhile (cancelled, or another step dead first).
		e.metrics.runFinished(res.Run, persistence.RunFailed, now)
		e.runEnded(ctx, res.Run)
	}
	log.Warn("step dead-lettered", "err", firstLine(herr), "run_status", p.DeadRunStatus)
	e.cancelChildrenOfStopped(ctx, ex.runID, w)
	if p.DeadRunStatus == persistence.RunCompensating {
		e.advanceSaga(ctx, ex.runID)
	}
	return true
}

// needsCompensation reports whether a run has a step other than dead with
// a compensation that succeeded or may still succeed (is running).
func (e *Engine) needsCompensation(ctx context.Context, runID, dead string, w *dag.Workflow) bool {
	if w == nil {
		return false
	}
	any := false
	for _, s := range w.Steps() {
		if compensable(s) {
			any = true
			break
		}
	}
	if !any {
		return false
	}
	sts, err := e.store.StepList(ctx, runID)
	if err != nil {
		return true // compensating is the safe choice: the saga re-reads
	}
	for _, s := range sts {
		d := w.Step(s.Step)
		if s.Step != dead && compensable(d) && (s.Status == persistence.StepSucceeded || s.Status == persistence.StepRunning) {
			return true
		}
	}
	return false
}

// errorText is what the history keeps of an error: its message, and the
// stack of a panic.
func errorText(err error) string {
	var pe *steps.PanicError
	if errors.As(err, &pe) {
		return err.Error() + "\n" + string(pe.Stack)
	}
	return err.Error()
}

// maxErrorLine is the most of an error's first line that goes into a log
// line, a span's status or a run's error: an error can quote what a user
// or a remote server chose (a handler's message, a Location), which can
// be megabytes. The attempt's history keeps up to the store's limit.
const maxErrorLine = 2 << 10

// firstLine is err's first line, cut to maxErrorLine bytes (on a rune
// boundary) with the error's length when it was cut.
func firstLine(err error) string {
	s := err.Error()
	line, _, _ := strings.Cut(s, "\n")
	if len(line) <= maxErrorLine {
		return line
	}
	cut := maxErrorLine
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", line[:cut], len(s))
}

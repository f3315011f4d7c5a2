package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
	"github.com/dagflow/dagflow/steps"
)

// execution is one task being worked on by this node.
type execution struct {
	task     queue.Task
	runID    string
	step     string
	fence    string
	cancel   context.CancelCauseFunc
	released atomic.Bool // Stop released the lease: record nothing
	acked    bool        // the task was acked, or put back for later (owner goroutine only)
	eager    bool        // claimed at release: the task is not in Redis
	priority int         // an eager step's run priority, for when it must be enqueued
	// handedOver: the committer gave this execution's slot to a step it
	// claimed; the goroutine ends without giving it back (owner only).
	handedOver bool
}

var (
	errRunNotRunning = errors.New("engine: run is no longer running")
	errLeaseLost     = errors.New("engine: lease lost to another worker")
	errShutdown      = errors.New("engine: node shutting down")
)

// runClaimed executes a claimed forward attempt. It returns false when
// the task should be tried again because the store was unreachable.
func (e *Engine) runClaimed(ctx context.Context, ex *execution, res persistence.StepClaimResult) bool {
	// The attempt's span starts here, before runAttempt's large frame is
	// on the stack: under it, the tracing SDK's calls would grow the
	// stack of every step's goroutine (a copy per step).
	ctx, traceAttrs := e.tracer.startAttempt(ctx, res, ex.task.ID, false)
	defer e.tracer.endAttempt(ctx)
	return e.runAttempt(ctx, ex, res, traceAttrs)
}

// runAttempt is runClaimed's work; traceAttrs go to the attempt's logger.
func (e *Engine) runAttempt(ctx context.Context, ex *execution, res persistence.StepClaimResult, traceAttrs []slog.Attr) bool {
	ref := taskRef{RunID: ex.runID, Step: ex.step}
	e.stats.stepsStarted.Add(1)
	// One array for the step's attributes and the trace's.
	attrs := append(make([]slog.Attr, 0, 4+len(traceAttrs)), slog.String("run_id", ref.RunID), slog.String("workflow", res.Run.Workflow),
		slog.String("step", ref.Step), slog.Int("attempt", res.Step.Attempt))
	log := withLazy(e.log, append(attrs, traceAttrs...)...)
	w, err := e.planFor(ctx, res.Run)
	if err != nil {
		// The run's plan is unknown for now: run nothing rather than
		// follow another version's; the step is handed back, its
		// attempt not spent, and taken again shortly.
		log.Warn("step left for later: its workflow version could not be read", "err", err)
		_, ours := e.handBackClaim(context.WithoutCancel(ctx), ex.runID, ex.step, ex.fence)
		return !ours // no longer this node's claim: nothing to retry
	}
	var sdef *dag.Step
	if w != nil {
		sdef = w.Step(ref.Step)
	}
	if sdef == nil || !sdef.HasHandler() {
		// Another node may know the workflow; retry like a failure.
		err := fmt.Errorf("workflow %q step %q is not registered on node %s", res.Run.Workflow, ref.Step, e.cfg.NodeID)
		return e.stepFailed(ctx, ex, res, nil, w, err, log)
	}
	if err := e.attemptRefused(ctx, ex, res); err != nil {
		return e.stepFailed(ctx, ex, res, sdef, w, err, log)
	}

	res, err = e.decodeClaim(ctx, res)
	if err != nil {
		return e.stepFailed(ctx, ex, res, sdef, w, err, log)
	}
	sc := handlerContext(res, false, log)
	if dependencySkipped(w, sdef, ref.Step, res.Upstream) {
		return e.stepSkipped(ctx, ex, res, "a required dependency was skipped", log)
	}
	if err := e.checkStepInput(res, sc.Step); err != nil {
		return e.stepFailed(ctx, ex, res, sdef, w, err, log)
	}
	if sdef.Wait != nil {
		// A wait or sleep step runs no handler: it is parked.
		return e.park(ctx, ex, res, sc, sdef, w, log)
	}
	h := sdef.Handler
	if sdef.When != "" || hasLimitKeys(sdef) {
		h = e.guarded(sdef)
	}

	var started time.Time
	if e.metrics != nil {
		started = e.clock.Now()
		e.metrics.stepStarted(res.Step, started)
	}
	out, herr := e.execute(ctx, ex, h, sdef.Timeout, sc)
	if e.metrics != nil {
		e.metrics.stepRan(res.Run.Workflow, ref.Step, e.clock.Now().Sub(started))
	}
	if ex.released.Load() {
		return true
	}
	if errors.Is(herr, errWhenFalse) {
		return e.stepSkipped(ctx, ex, res, "when is false", log)
	}
	if herr == nil {
		return e.stepSucceeded(ctx, ex, res, out, log)
	}
	if errors.Is(herr, errRunNotRunning) || errors.Is(herr, errLeaseLost) {
		return e.stepAborted(ctx, ex, res, herr, log)
	}
	return e.stepFailed(ctx, ex, res, sdef, w, herr, log)
}

// attemptRefused says why a claimed forward attempt of a registered
// step must not run its handler (the error it then fails with), or nil:
// it is past the step's attempts, or past the delivery limit.
func (e *Engine) attemptRefused(ctx context.Context, ex *execution, res persistence.StepClaimResult) error {
	if res.Step.Attempt > res.Step.MaxAttempts {
		return steps.Permanent(fmt.Errorf("attempt %d exceeds the %d allowed: earlier attempts lost their worker", res.Step.Attempt, res.Step.MaxAttempts))
	}
	return e.deliveryLimit(ctx, ex, persistence.AttemptForward, res.Step.Attempt)
}

// dependencySkipped says whether step (sdef, of w) is skipped because of
// its dependencies' outcomes (upstream: their statuses, as claimed).
func dependencySkipped(w *dag.Workflow, sdef *dag.Step, step string, upstream map[string]persistence.StepStatus) bool {
	if len(sdef.Needs) == 0 {
		return false
	}
	outcomes := make(map[string]dag.Outcome, len(upstream))
	for k, st := range upstream {
		outcomes[k] = outcomeOf(st)
	}
	return w.ShouldSkip(step, outcomes)
}

// errWhenFalse is what a conditional handler returns, without running
// the step's handler, when the condition is false: the step is skipped.
var errWhenFalse = errors.New("engine: when is false")

// guarded wraps a step's handler with the expressions the engine
// evaluates for it in the attempt, so that they run under the step's
// timeout and heartbeat (the lease stays alive while they run, and a lost
// lease or Stop ends them), each within Config.WhenBudget: its limit keys
// (see keysOverBudget) and its `when` condition. A condition that fails,
// or an expression that runs over its budget, fails the step as a
// permanent error: the same data would fail again.
func (e *Engine) guarded(sdef *dag.Step) steps.Handler {
	return steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		if err := keysOverBudget(ctx, sdef, sc.Input); err != nil {
			return nil, steps.Permanent(err)
		}
		run, err := sdef.EvalWhen(ctx, sc.Input, sc.Outputs)
		if err != nil {
			return nil, steps.Permanent(err)
		}
		if !run {
			return nil, errWhenFalse
		}
		return sdef.Handler.Handle(ctx, sc)
	})
}

// hasLimitKeys reports whether s has a limit key expression.
func hasLimitKeys(s *dag.Step) bool {
	return s.Limits != nil && (s.Limits.Key != "" || s.Limits.RateKey != "")
}

// keysOverBudget evaluates s's limit keys again, as the attempt starts,
// and returns the error of one that runs over its budget. A key that
// did so when its task was enqueued was held under the empty key (a key
// that does not evaluate counts as empty, see stepLimit); here it ends
// the step instead of costing a budget at each retry's enqueue.
func keysOverBudget(ctx context.Context, s *dag.Step, input json.RawMessage) error {
	if !hasLimitKeys(s) {
		return nil
	}
	_, _, err := s.LimitKeys(ctx, input)
	var be *dag.ExprBudgetError
	if errors.As(err, &be) {
		return err
	}
	return nil
}

// exprBudget gives ctx the budget of every expression evaluated under
// it (Config.WhenBudget).
func (e *Engine) exprBudget(ctx context.Context) context.Context {
	return dag.WithExprBudget(ctx, e.cfg.WhenBudget, "Config.WhenBudget")
}

// handlerContext is what a claimed attempt's handler (its compensation's,
// with compensation) is given: the run's input and metadata, the step's
// stable idempotency key, and the outputs that came with the claim.
func handlerContext(res persistence.StepClaimResult, compensation bool, log *slog.Logger) steps.Context {
	sc := steps.Context{
		RunID:          res.Step.RunID,
		Workflow:       res.Run.Workflow,
		Step:           res.Step.Step,
		Attempt:        res.Step.Attempt,
		IdempotencyKey: steps.RerunKey(res.Step.RunID, res.Step.Step, res.Step.Reruns),
		Compensation:   compensation,
		Input:          json.RawMessage(res.Run.Input),
		Metadata:       userMetadata(res.Run.Metadata),
		Logger:         log,
	}
	if compensation {
		sc.Attempt = res.Step.CompAttempt
	}
	if len(res.Outputs) > 0 || compensation {
		sc.Outputs = make(map[string]json.RawMessage, len(res.Outputs))
		for k, v := range res.Outputs {
			sc.Outputs[k] = json.RawMessage(v)
		}
	}
	return sc
}

func outcomeOf(s persistence.StepStatus) dag.Outcome {
	switch s {
	case persistence.StepSucceeded, persistence.StepCompensating, persistence.StepCompensated, persistence.StepCompensationFailed:
		return dag.Succeeded
	case persistence.StepSkipped:
		return dag.Skipped
	case persistence.StepDead, persistence.StepCancelled:
		return dag.Failed
	}
	return dag.Pending
}

// execute runs a handler with the step's timeout while a heartbeat keeps
// the lease; a lost lease or a run that stopped running cancels it.
func (e *Engine) execute(ctx context.Context, ex *execution, h steps.Handler, timeout time.Duration, sc steps.Context) (json.RawMessage, error) {
	hctx, cancel := context.WithCancelCause(e.exprBudget(ctx))
	e.inflightMu.Lock()
	ex.cancel = cancel
	e.inflightMu.Unlock()
	defer cancel(nil)
	if timeout > 0 {
		var c2 context.CancelFunc
		hctx, c2 = context.WithTimeoutCause(hctx, timeout, &stepTimeoutError{step: sc.Step, timeout: timeout})
		defer c2()
	}
	// The heartbeat starts when the first beat is due: most steps end
	// before, and then no goroutine or ticker was made for them.
	hbDone := make(chan struct{})
	hbStopped := make(chan struct{})
	hb := time.AfterFunc(e.cfg.Heartbeat, func() {
		defer close(hbStopped)
		e.heartbeat(hctx, ex, cancel, hbDone)
	})
	out, err := steps.Call(hctx, h, sc)
	if !hb.Stop() {
		// It started: stop it and wait for it, so that no beat is in
		// flight once the attempt's outcome is decided below.
		close(hbDone)
		<-hbStopped
	}
	if cause := context.Cause(hctx); err != nil && cause != nil && (errors.Is(cause, errRunNotRunning) || errors.Is(cause, errLeaseLost) || errors.Is(cause, errShutdown)) {
		return nil, cause
	}
	if err == nil && hctx.Err() != nil && context.Cause(hctx) != nil && !errors.Is(context.Cause(hctx), context.Canceled) {
		// The handler ignored its context and returned after the timeout:
		// the attempt timed out.
		return nil, context.Cause(hctx)
	}
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		if cause := context.Cause(hctx); cause != nil && !errors.Is(cause, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
	}
	// steps.Call has refused an output that is not JSON.
	return out, err
}

// stepTimeoutError is the cause of a step context that reached the step's
// timeout. It is made for every step with a timeout and seen by few, so it
// formats its message only when asked.
type stepTimeoutError struct {
	step    string
	timeout time.Duration
}

func (e *stepTimeoutError) Error() string {
	return fmt.Sprintf("step %q timed out after %v", e.step, e.timeout)
}

// heartbeat extends the lease in the store and in Redis at once and then
// every Heartbeat until done, and cancels the handler when the lease is
// lost or the run stops running.
func (e *Engine) heartbeat(ctx context.Context, ex *execution, cancel context.CancelCauseFunc, done <-chan struct{}) {
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		default:
		}
		if stop := e.beat(ctx, ex, cancel); stop {
			return
		}
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// beat extends the lease once. It reports true when the handler was
// cancelled (its lease is lost, or its run stopped running).
func (e *Engine) beat(ctx context.Context, ex *execution, cancel context.CancelCauseFunc) bool {
	now := e.clock.Now()
	err := e.store.StepHeartbeat(ctx, persistence.StepHeartbeatParams{
		RunID: ex.runID, Step: ex.step, Fence: ex.fence, LeaseUntil: now.Add(e.cfg.Lease), Now: now,
	})
	if errors.Is(err, persistence.ErrFenceMismatch) {
		cancel(errLeaseLost)
		return true
	}
	if err != nil {
		e.log.Warn("heartbeat failed", "run_id", ex.runID, "step", ex.step, "err", err)
		return false
	}
	if !ex.eager {
		if _, err := e.q.Extend(ctx, ex.task.Queue, ex.task.ID, e.cfg.Lease); err != nil {
			e.redisError("extending a task's lease failed", err, "task", ex.task.ID)
		}
	}
	run, err := e.store.RunGet(ctx, ex.runID)
	if err == nil && run.Status != persistence.RunRunning && run.Status != persistence.RunCompensating {
		cancel(errRunNotRunning)
		return true
	}
	return false
}

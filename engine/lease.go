package engine

import (
	"context"
	"errors"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Leases this node gives back: on Stop, for running steps (their attempt
// is lost) and for steps claimed but never started (handed back, their
// attempt not spent), and cancelling a run's local handlers.

// releaseInflight gives back the leases of every running step at once (in
// the store and in Redis), for a Stop whose deadline passed.
func (e *Engine) releaseInflight() {
	type held struct {
		ex     *execution
		fence  string
		cancel context.CancelCauseFunc
	}
	e.inflightMu.Lock()
	list := make([]held, 0, len(e.inflight))
	for _, ex := range e.inflight {
		list = append(list, held{ex, ex.fence, ex.cancel})
	}
	e.inflightMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range list {
		ex := h.ex
		if h.fence == "" {
			continue
		}
		ex.released.Store(true)
		now := e.releaseLease(ctx, ex.runID, ex.step, h.fence)
		if ex.eager {
			// Claimed at release: hand it to the queue for another node.
			e.enqueue(ex.task.Queue, ex.task.ID, now, ex.priority)
		} else if err := e.q.Release(ctx, ex.task.Queue, ex.task.ID); err != nil {
			e.redisError("task release failed; its lease will expire", err, "task", ex.task.ID)
		}
		if h.cancel != nil {
			h.cancel(errShutdown)
		}
	}
}

// releaseLease ends a claim's lease now, so that the next claim takes the
// step over at once, and returns the time it used. A failure is logged:
// the lease then expires in its own time.
func (e *Engine) releaseLease(ctx context.Context, runID, step, fence string) time.Time {
	now := e.clock.Now()
	if err := e.store.StepHeartbeat(ctx, persistence.StepHeartbeatParams{
		RunID: runID, Step: step, Fence: fence, LeaseUntil: now.Add(-time.Millisecond), Now: now,
	}); err != nil {
		e.log.Warn("lease release failed; it will expire", "run_id", runID, "step", step, "err", err)
	}
	return now
}

// handBack gives back a step claimed for this node that it will not run
// (it is stopping), un-started (handBackClaim), and queues the step for
// another node.
func (e *Engine) handBack(res persistence.StepClaimResult, fence string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, ok := e.handBackClaim(ctx, res.Step.RunID, res.Step.Step, fence)
	if !ok {
		return
	}
	ref := taskRef{RunID: res.Step.RunID, Step: res.Step.Step, Attempt: res.Step.Attempt}
	e.enqueue(res.Step.Queue, ref.String(), now, res.Step.Priority)
}

// handBackClaim undoes a forward claim whose handler never started, so
// that it costs the step no attempt: the step is queued again with its
// attempt number (StepHandBack), and the next claim is that attempt, not
// a takeover of a lost one. It returns the time it used, and false when
// the claim is no longer this node's (another node took the step, or it
// finished): there is nothing to queue. If the store cannot be asked the
// lease is released instead, as for a step that ran.
func (e *Engine) handBackClaim(ctx context.Context, runID, step, fence string) (time.Time, bool) {
	now := e.clock.Now()
	err := e.store.StepHandBack(ctx, persistence.StepHandBackParams{RunID: runID, Step: step, Fence: fence, Now: now})
	switch {
	case err == nil:
		return now, true
	case errors.Is(err, persistence.ErrFenceMismatch), errors.Is(err, persistence.ErrStepNotFound):
		return now, false
	}
	e.log.Warn("hand-back failed; releasing the lease", "run_id", runID, "step", step, "err", err)
	return e.releaseLease(ctx, runID, step, fence), true
}

// cancelLocal cancels this node's running steps of a run.
func (e *Engine) cancelLocal(runID string) {
	e.inflightMu.Lock()
	defer e.inflightMu.Unlock()
	for _, ex := range e.inflight {
		if ex.runID == runID && ex.cancel != nil {
			ex.cancel(errRunNotRunning)
		}
	}
}

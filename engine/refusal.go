package engine

import (
	"context"
	"errors"
	"time"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// onRefused settles a task whose claim the store refused (err wraps
// ErrNotClaimable, ErrStepNotFound or ErrRunNotFound). Every refusal is
// counted by reason. A step whose retry is not due yet, or whose run has
// not started yet, goes back to the queue for its due time (a node whose
// clock runs a little ahead may take a task early; it must never drop
// it). Any other refused task is stale (its step is owned, finished or
// gone) and dropped.
//
// It reports whether the task was put back: then it must not be acked.
func (e *Engine) onRefused(ctx context.Context, t queue.Task, runID, step string, err error) (putBack bool) {
	reason := persistence.RefusalOf(err)
	e.stats.countRefusal(reason)
	var ce *persistence.ClaimRefusedError
	errors.As(err, &ce)
	switch reason {
	case persistence.RefusedUnhandled:
		// This node was deployed without the step: another node runs it.
		return e.refusedUnhandled(ctx, t, ce)
	case persistence.RefusedNotDue:
		return e.putBack(ctx, t, ce.DueAt)
	case persistence.RefusedRunPending:
		// Taken before the run's start (the claim of a task due then
		// starts the run).
		return e.putBack(ctx, t, ce.DueAt)
	case persistence.RefusedOwned, persistence.RefusedFinished, persistence.RefusedDuplicate,
		persistence.RefusedRunNotRunning, persistence.RefusedRunPaused:
		// A paused run's step stays queued in the store; resuming the run
		// enqueues it again (ResumeRun).
		// The ordinary races of at-least-once delivery (and of a run
		// cancelled or compensating while its tasks were queued).
	default:
		e.log.Debug("claim refused; dropping the task", "run_id", runID, "step", step, "task", t.ID,
			"reason", string(reason), "err", err)
	}
	return false
}

// putBack moves a leased task back to its queue, due at at. It reports
// false when the task could not be put back (the reconciler then finds
// its step in the store).
func (e *Engine) putBack(ctx context.Context, t queue.Task, at time.Time) bool {
	if err := e.q.Retry(context.WithoutCancel(ctx), t.Queue, t.ID, at); err != nil {
		if errors.Is(err, queue.ErrNotLeased) {
			return false
		}
		e.redisError("putting a task back failed; the reconciler will find its step", err, "task", t.ID)
		return false
	}
	return true
}

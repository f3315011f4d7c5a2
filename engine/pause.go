package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// Pausing queues and runs. The store holds the truth (queue_pauses, a
// run's paused_at); a paused queue is mirrored into Redis, where the
// dequeue script of every node reads it, and every reconcile pass mirrors
// it again (Redis may have lost it). A paused run is enforced by the
// claim itself (persistence.RefusedRunPaused): its tasks are dropped when
// taken, and ResumeRun enqueues its steps again.

// PauseQueue pauses a queue on every node: from their next dequeue (at
// once for a waiting one) no node takes its tasks. Steps that run go on;
// tasks stay in the queue, nothing is dead-lettered, and enqueues go on.
// The pause is recorded in the store first, so it outlives a Redis that
// loses its data.
func (e *Engine) PauseQueue(ctx context.Context, name string) error {
	return e.setQueuePaused(ctx, name, true)
}

// ResumeQueue undoes PauseQueue: waiting nodes are woken and take the
// queue's tasks at once.
func (e *Engine) ResumeQueue(ctx context.Context, name string) error {
	return e.setQueuePaused(ctx, name, false)
}

func (e *Engine) setQueuePaused(ctx context.Context, name string, paused bool) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	if !names.Valid(name) {
		return fmt.Errorf("%w: %q", ErrInvalidQueue, name)
	}
	if _, err := e.store.QueueSetPaused(ctx, persistence.QueueSetPausedParams{Queue: name, Paused: paused, Now: e.clock.Now()}); err != nil {
		return fmt.Errorf("engine: %s queue %q: %w", verb, name, err)
	}
	var err error
	if paused {
		err = e.q.Pause(ctx, name)
	} else {
		err = e.q.Resume(ctx, name)
	}
	// After Redis: a watch pass that read Redis before this write fails
	// its swap (watchPausedQueues), and one that starts later reads it.
	e.notePaused(name, paused)
	if err != nil {
		// Recorded in the store: the next reconcile pass mirrors it.
		return fmt.Errorf("engine: %s queue %q: recorded, but not yet in Redis: %w", verb, name, err)
	}
	return nil
}

// PausedQueues lists the paused queues, by name.
func (e *Engine) PausedQueues(ctx context.Context) ([]persistence.QueuePause, error) {
	qs, err := e.store.QueueListPaused(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: paused queues: %w", err)
	}
	return qs, nil
}

// PauseRun pauses an unfinished run: no new step of it starts (its
// queued tasks are dropped when taken, steps it releases are not
// claimed, the reconciler leaves it alone); steps that run now finish and
// record their outcome. A finished run gives an error wrapping
// persistence.ErrRunFinished.
func (e *Engine) PauseRun(ctx context.Context, runID string) error {
	if _, err := e.store.RunSetPaused(ctx, persistence.RunSetPausedParams{RunID: runID, Paused: true, Now: e.clock.Now()}); err != nil {
		return fmt.Errorf("engine: pause run %s: %w", runID, err)
	}
	return nil
}

// ResumeRun undoes PauseRun and dispatches what became ready meanwhile:
// its queued steps at once, its retries at their due times.
func (e *Engine) ResumeRun(ctx context.Context, runID string) error {
	res, err := e.store.RunSetPaused(ctx, persistence.RunSetPausedParams{RunID: runID, Paused: false, Now: e.clock.Now()})
	if err != nil {
		return fmt.Errorf("engine: resume run %s: %w", runID, err)
	}
	if err := e.dispatchResumed(ctx, res.Run, res.Steps); err != nil {
		// The store says the steps wait: the reconciler enqueues them.
		return fmt.Errorf("engine: resume run %s: resumed, but not yet enqueued: %w", runID, err)
	}
	return nil
}

// dispatchResumed enqueues the steps of a resumed run that wait for a
// worker: queued ones now, retrying ones (forward or compensation) at
// their due time, compensating ones without a lease now. Enqueue is
// idempotent per task, so what is still in Redis is left as it is.
func (e *Engine) dispatchResumed(ctx context.Context, run persistence.Run, steps []persistence.StepRun) error {
	if run.Status == persistence.RunPending {
		return e.enqueueCreated(ctx, []persistence.RunCreateResult{{Run: run, Steps: steps}})
	}
	byQueue := map[string][]queue.Item{}
	for _, s := range steps {
		ref := taskRef{RunID: s.RunID, Step: s.Step, Attempt: s.Attempt + 1}
		it := queue.Item{Priority: s.Priority}
		switch s.Status {
		case persistence.StepQueued:
		case persistence.StepRetrying:
			if s.NextAttemptAt != nil {
				it.At = *s.NextAttemptAt
			}
		case persistence.StepCompensating:
			if s.LeaseExpiresAt != nil {
				continue // its compensation runs now
			}
			ref = taskRef{RunID: s.RunID, Step: s.Step, Compensation: true, Attempt: s.CompAttempt + 1}
			if s.NextAttemptAt != nil {
				it.At = *s.NextAttemptAt
			}
		default:
			continue
		}
		it.ID = ref.String()
		byQueue[s.Queue] = append(byQueue[s.Queue], it)
	}
	return e.enqueueItems(ctx, byQueue, nil)
}

// mirrorPausedQueues makes Redis say what the store says about paused
// queues: the store's paused queues are paused in Redis (after Redis lost
// them), and the queues this node works that Redis holds paused but the
// store does not are resumed (a ResumeQueue whose Redis call failed).
// Redis is read before the store, so a PauseQueue racing with the pass
// (store, then Redis) is never undone.
func (e *Engine) mirrorPausedQueues(ctx context.Context) error {
	local := e.allQueues()
	inRedis := map[string]bool{}
	for name := range local {
		p, err := e.q.Paused(ctx, name)
		if err != nil {
			return err
		}
		inRedis[name] = p
	}
	paused, err := e.store.QueueListPaused(ctx)
	if err != nil {
		return err
	}
	inStore := map[string]bool{}
	for _, p := range paused {
		inStore[p.Queue] = true
		if !inRedis[p.Queue] {
			if err := e.q.Pause(ctx, p.Queue); err != nil {
				return err
			}
		}
	}
	for name, p := range inRedis {
		if p && !inStore[name] {
			if err := e.q.Resume(ctx, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// pauseWatchInterval is how often a node with workers reads which of its
// queues are paused: claims at create and at release, which bypass the
// queue, leave a paused queue's steps within this time of a pause made
// on another node (at once for one made on this node).
const pauseWatchInterval = 500 * time.Millisecond

// watchPausedQueues reads which of this node's queues Redis holds paused.
// On a failure the last answer stands (the dequeue script enforces the
// pause anyway; only claims that bypass the queue read this). Its answer
// replaces the one it started from only: a PauseQueue or ResumeQueue of
// this node that lands while it reads Redis (notePaused) is newer than
// what it read, and stands until the next pass.
func (e *Engine) watchPausedQueues(ctx context.Context) {
	start := e.pausedQueues.Load()
	paused := map[string]bool{}
	for _, name := range e.queueNames() {
		p, err := e.q.Paused(ctx, name)
		if err != nil {
			e.redisError("reading paused queues failed", err, "queue", name)
			return
		}
		if p {
			paused[name] = true
		}
	}
	e.pausedQueues.CompareAndSwap(start, &paused)
}

// notePaused records this node's own PauseQueue or ResumeQueue at once,
// as a new map, so a watch pass that started before it fails its swap.
func (e *Engine) notePaused(name string, paused bool) {
	for {
		old := e.pausedQueues.Load()
		m := map[string]bool{}
		if old != nil {
			for k, v := range *old {
				m[k] = v
			}
		}
		if paused {
			m[name] = true
		} else {
			delete(m, name)
		}
		if e.pausedQueues.CompareAndSwap(old, &m) {
			return
		}
	}
}

// claimQueues are the queues whose steps this node may claim without
// going through Redis (at create and at release): its queues, less the
// limited ones (eagerQueues) and the paused ones.
func (e *Engine) claimQueues() []string {
	all := e.eagerQueues()
	paused := e.pausedQueues.Load()
	if paused == nil || len(*paused) == 0 {
		return all
	}
	out := make([]string, 0, len(all))
	for _, name := range all {
		if !(*paused)[name] {
			out = append(out, name)
		}
	}
	return out
}

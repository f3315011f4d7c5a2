package engine

import (
	"context"
	"sort"
	"time"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// Enqueueing: the store says what is ready; these put its tasks into Redis.
// A failed enqueue is counted and logged, never fatal: the reconciler
// re-enqueues from the store.

// enqueueSteps puts the queued ones of sts (forward, attempt+1) into
// Redis, grouped by queue. Failures are logged: the reconciler re-enqueues
// from the store.
func (e *Engine) enqueueSteps(ctx context.Context, sts []persistence.StepRun) error {
	byQueue := map[string][]queue.Item{}
	for _, s := range sts {
		if s.Status != persistence.StepQueued {
			continue
		}
		ref := taskRef{RunID: s.RunID, Step: s.Step, Attempt: s.Attempt + 1}
		byQueue[s.Queue] = append(byQueue[s.Queue], queue.Item{ID: ref.String(), Priority: s.Priority})
	}
	return e.enqueueItems(ctx, byQueue, nil)
}

// enqueueCreated dispatches runs that were just created (or committed, for
// TriggerTx): the queued root steps at once, and the root steps of a run
// that starts later (pending) as tasks due at its StartAt, so that a
// delayed run starts on time like a delayed retry. Its claim then starts
// the run (onRefused); the reconciler is only the safety net.
func (e *Engine) enqueueCreated(ctx context.Context, runs []persistence.RunCreateResult) error {
	byQueue := map[string][]queue.Item{}
	var known map[string]persistence.Run
	if e.anyStepLimited() {
		known = make(map[string]persistence.Run, len(runs))
		for _, r := range runs {
			known[r.Run.ID] = r.Run
		}
	}
	for _, r := range runs {
		for _, s := range r.Steps {
			ref := taskRef{RunID: s.RunID, Step: s.Step, Attempt: s.Attempt + 1}
			switch {
			case r.Run.Status == persistence.RunPending && len(s.Deps) == 0 && s.Status == persistence.StepWaiting:
				byQueue[s.Queue] = append(byQueue[s.Queue], queue.Item{ID: ref.String(), At: r.Run.StartAt, Priority: s.Priority})
			case s.Status == persistence.StepQueued:
				byQueue[s.Queue] = append(byQueue[s.Queue], queue.Item{ID: ref.String(), Priority: s.Priority})
			}
		}
	}
	return e.enqueueItems(ctx, byQueue, known)
}

// enqueueItems enqueues tasks, one Redis call per queue in name order,
// with the limits of their steps (known: runs at hand, by id).
func (e *Engine) enqueueItems(ctx context.Context, byQueue map[string][]queue.Item, known map[string]persistence.Run) error {
	e.withStepLimits(ctx, byQueue, known)
	names := make([]string, 0, len(byQueue))
	for n := range byQueue {
		names = append(names, n)
	}
	sort.Strings(names)
	var firstErr error
	for _, n := range names {
		if len(byQueue[n]) == 0 {
			continue
		}
		if _, err := e.q.Enqueue(context.WithoutCancel(ctx), n, byQueue[n]...); err != nil {
			e.redisError("enqueue failed; the reconciler will retry", err, "queue", n)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// enqueue puts one task of a run of priority into Redis, due at at. A
// failure is logged: the store still says the step waits, so the
// reconciler enqueues it later.
func (e *Engine) enqueue(queueName, id string, at time.Time, priority int) {
	item := queue.Item{ID: id, At: at, Priority: priority}
	if e.isStepLimited(queueName) {
		byQueue := map[string][]queue.Item{queueName: {item}}
		if e.withStepLimits(context.Background(), byQueue, nil); len(byQueue[queueName]) == 0 {
			return
		}
		item = byQueue[queueName][0]
	}
	if _, err := e.q.Enqueue(context.Background(), queueName, item); err != nil {
		e.redisError("enqueue failed; the reconciler will retry", err, "task", id)
	}
}

package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/queue"
)

// QueueDepth is a queue as an operator sees it: its tasks by state,
// whether it is paused, and the task it hands out next.
type QueueDepth struct {
	queue.Stats
	Name string
	// NextTask is the id of the ready task the queue hands out next ("" when
	// none is ready).
	NextTask string
	// ReadySince is when NextTask's step became ready: when it was queued,
	// when its retry came due, or when its run's delayed start came. It
	// is zero when it is unknown (the task was taken or its run deleted
	// since it was listed, or its id is not the engine's).
	ReadySince time.Time
}

// QueueDepth reads a queue's depth from Redis and, when a task is ready,
// the task it hands out next. Redis keeps no time for a ready task, so
// ReadySince comes from the store's row of the task's step.
func (e *Engine) QueueDepth(ctx context.Context, name string) (QueueDepth, error) {
	st, err := e.q.Stats(ctx, name)
	if err != nil {
		return QueueDepth{}, fmt.Errorf("engine: queue %q: %w", name, err)
	}
	d := QueueDepth{Stats: st, Name: name}
	if st.Ready == 0 {
		return d, nil
	}
	tasks, err := e.q.List(ctx, name, queue.StateReady, 0, 1)
	if err != nil {
		return QueueDepth{}, fmt.Errorf("engine: queue %q: %w", name, err)
	}
	if len(tasks) == 0 {
		return d, nil
	}
	d.NextTask = tasks[0].ID
	d.ReadySince = e.readySince(ctx, d.NextTask)
	return d, nil
}

// readySince is when the step of a ready task became ready, or zero.
func (e *Engine) readySince(ctx context.Context, taskID string) time.Time {
	ref, err := parseTaskID(taskID)
	if err != nil {
		return time.Time{}
	}
	st, err := e.store.StepGet(ctx, ref.RunID, ref.Step)
	if err != nil {
		return time.Time{} // acked or deleted since it was listed
	}
	var since time.Time
	for _, t := range []*time.Time{st.QueuedAt, st.NextAttemptAt} {
		if t != nil && t.After(since) {
			since = *t
		}
	}
	if run, err := e.store.RunGet(ctx, ref.RunID); err == nil && run.StartAt.After(since) {
		since = run.StartAt
	}
	if since.IsZero() {
		since = st.UpdatedAt
	}
	return since
}

// Ping checks, side by side, that the store and Redis answer within
// ctx: the readiness of a node (GET /readyz).
func (e *Engine) Ping(ctx context.Context) (storeErr, redisErr error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.q.Ping(ctx); err != nil {
			redisErr = fmt.Errorf("engine: redis: %w", err)
		}
	}()
	if _, err := e.store.Now(ctx); err != nil {
		storeErr = fmt.Errorf("engine: store: %w", err)
	}
	<-done
	return storeErr, redisErr
}

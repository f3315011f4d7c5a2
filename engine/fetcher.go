package engine

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// The fetcher: the fetch loop takes tasks from Redis while slots are free,
// claims a batch in one store transaction and starts a goroutine per
// claimed step (step.go); outcomes go to the committers (committer.go).

// takeSlots takes a slot for every task after the first (whose slot the
// fetch loop holds) and gives back to the queue, at once, the tasks for
// which none is free any more (the committers took them meanwhile).
func (e *Engine) takeSlots(tasks []queue.Task) []queue.Task {
	got := min(len(tasks), 1)
	got += e.slots.tryTake(len(tasks) - got)
	e.giveBack(tasks[got:])
	return tasks[:got]
}

// giveBack returns leased tasks to their queues untried, ready at once.
func (e *Engine) giveBack(tasks []queue.Task) {
	byQueue := map[string][]string{}
	for _, t := range tasks {
		byQueue[t.Queue] = append(byQueue[t.Queue], t.ID)
	}
	for name, ids := range byQueue {
		if err := e.q.Release(context.Background(), name, ids...); err != nil {
			e.redisError("giving tasks back failed; their lease will expire", err, "queue", name)
		}
	}
}

// fetchLoop takes tasks from Redis while slots are free, claims them in
// batches and runs each in its own goroutine.
func (e *Engine) fetchLoop() {
	defer close(e.fetchDone)
	backoff := 50 * time.Millisecond
	for {
		if !e.stats.bound.Load() {
			// Redis did not answer at Start: bind the prefix first.
			if err := e.bindNamespace(e.fetchCtx); err != nil && !errors.Is(err, ErrNamespaceConflict) {
				e.redisError("binding the Redis prefix failed", err)
			}
		}
		if e.paused() {
			// This node's clock is off (health.go), or its Redis prefix
			// is another database's (isolation.go): claim nothing until
			// that is right again.
			select {
			case <-e.clockOK:
			case <-time.After(time.Second):
			case <-e.fetchCtx.Done():
				return
			}
			continue
		}
		// Hold one free slot while waiting for tasks, no more: the other
		// free slots stay free for the committers, which claim released
		// steps into them (claim at release). The batch asked for is
		// what is free now; slots for its other tasks are taken after.
		if !e.slots.acquire(e.fetchCtx) {
			return
		}
		want := min(1+e.slots.idle(), 64)
		tasks, err := e.q.Dequeue(e.fetchCtx, queue.DequeueParams{
			Queues: e.queueNames(),
			Max:    max(want, 1),
			Lease:  e.cfg.Lease,
			Kinds:  e.routingKinds(),
		})
		if len(tasks) == 0 {
			e.slots.release()
		}
		tasks = e.takeSlots(tasks)
		if e.fetchCtx.Err() != nil {
			// Stopping: take no new steps; hand back what was leased.
			e.giveBack(tasks)
			e.slots.free(len(tasks))
			return
		}
		if len(tasks) > 0 && e.paused() {
			// Paused while the dequeue waited (its registry heartbeat
			// failing, its clock off): claim none of them.
			e.giveBack(tasks)
			e.slots.free(len(tasks))
			continue
		}
		// Tasks the queue leased are run even if the wait then failed.
		e.dispatch(tasks)
		if err != nil {
			if e.fetchCtx.Err() != nil {
				return
			}
			e.redisError("dequeue failed", err)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-e.fetchCtx.Done():
				t.Stop()
				return
			}
			if backoff < time.Second {
				backoff *= 2
			}
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// dispatch claims the forward tasks of a dequeued batch and starts a
// goroutine for every task this node may run. Each task holds a slot until
// its goroutine ends, or is given back at once when dropped.
func (e *Engine) dispatch(tasks []queue.Task) {
	var fwd []*execution
	for _, t := range tasks {
		ref, err := parseTaskID(t.ID)
		if err != nil {
			e.log.Error("dropping malformed task", "task", t.ID, "err", err)
			e.ackTasks([]queue.Task{t})
			e.slots.release()
			continue
		}
		ex := &execution{task: t, runID: ref.RunID, step: ref.Step}
		if ref.Compensation {
			e.goRun(ex, func() bool { return e.runCompensation(e.runCtx, ex, ref) })
			continue
		}
		fwd = append(fwd, ex)
	}
	for len(fwd) > 0 {
		n := min(len(fwd), maxCommitBatch)
		e.claimBatch(fwd[:n])
		fwd = fwd[n:]
	}
}

// claimBatch claims forward tasks in one transaction.
func (e *Engine) claimBatch(batch []*execution) {
	fence := uuid.NewString()
	now := e.clock.Now()
	items := make([]persistence.StepClaimItem, len(batch))
	for i, ex := range batch {
		items[i] = persistence.StepClaimItem{RunID: ex.runID, Step: ex.step}
	}
	e.stats.claimBatches.Add(1)
	e.stats.claimItems.Add(int64(len(batch)))
	outs, err := e.store.StepClaimMany(e.runCtx, persistence.StepClaimManyParams{
		Items: items, Fence: fence, Worker: e.cfg.NodeID, LeaseUntil: now.Add(e.cfg.Lease), Now: now,
		Handles: e.handles,
		MaxRead: e.cfg.MaxStepInput,
	})
	if err != nil {
		// The store could not be asked: the tasks come back soon.
		e.stats.errors.Add(1)
		e.log.Warn("claim failed; tasks retried shortly", "tasks", len(batch), "err", err)
		for _, ex := range batch {
			e.retrySoon(ex.task)
			e.slots.release()
		}
		return
	}
	var drop []queue.Task
	for i, ex := range batch {
		o := outs[i]
		if o.Err != nil {
			// Not due yet (put back for its time), or stale: someone
			// else owns the step, or it is finished or gone.
			if !e.onRefused(e.runCtx, ex.task, ex.runID, ex.step, o.Err) {
				drop = append(drop, ex.task)
			}
			e.slots.release()
			continue
		}
		ex.fence = fence
		res := o.Result
		e.goRun(ex, func() bool { return e.runClaimed(e.runCtx, ex, res) })
	}
	e.ackTasks(drop)
}

// claim takes a step in the store. ok is false when the task is stale
// (someone else owns the step, or it is finished); err is set when the
// store could not be asked.
func (e *Engine) claim(ctx context.Context, ex *execution, ref taskRef, withOutputs []string) (persistence.StepClaimResult, bool, error) {
	fence := uuid.NewString()
	e.inflightMu.Lock()
	ex.fence = fence
	e.inflightMu.Unlock()
	now := e.clock.Now()
	handles := e.handles
	if ref.Compensation {
		handles = e.handlesCompensation
	}
	res, err := e.store.StepClaim(ctx, persistence.StepClaimParams{
		RunID:        ref.RunID,
		Step:         ref.Step,
		Compensation: ref.Compensation,
		Fence:        fence,
		Worker:       e.cfg.NodeID,
		LeaseUntil:   now.Add(e.cfg.Lease),
		Now:          now,
		WithOutputs:  withOutputs,
		Handles:      handles,
	})
	switch {
	case err == nil:
		return res, true, nil
	case errors.Is(err, persistence.ErrNotClaimable), errors.Is(err, persistence.ErrStepNotFound),
		errors.Is(err, persistence.ErrRunNotFound), errors.Is(err, persistence.ErrRunFinished):
		if !ex.eager && e.onRefused(ctx, ex.task, ref.RunID, ref.Step, err) {
			ex.acked = true // put back for later: not to be acked
		}
		return res, false, nil
	default:
		e.stats.errors.Add(1)
		e.log.Warn("claim failed", "run_id", ref.RunID, "step", ref.Step, "err", err)
		return res, false, err
	}
}

// goRun runs one task's work in its own goroutine, then acks the task
// (unless the work acked it, or Stop released it) or, when the work could
// not reach the store, hands it back for a retry shortly.
func (e *Engine) goRun(ex *execution, work func() bool) {
	e.handlers.Add(1)
	e.inflightMu.Lock()
	e.inflight[ex.task.ID] = ex
	e.inflightMu.Unlock()
	go func() {
		defer func() {
			e.inflightMu.Lock()
			delete(e.inflight, ex.task.ID)
			e.inflightMu.Unlock()
			if !ex.handedOver {
				e.slots.release()
			}
			e.handlers.Done()
		}()
		done := work()
		switch {
		case ex.released.Load(), ex.acked:
		case done:
			if !ex.eager {
				e.ackTasks([]queue.Task{ex.task})
			}
		case ex.eager:
			// Claimed at release, so not in Redis: enqueue it for later.
			e.enqueue(ex.task.Queue, ex.task.ID, e.clock.Now().Add(time.Second), ex.priority)
		default:
			e.retrySoon(ex.task)
		}
	}()
}

func (e *Engine) retrySoon(t queue.Task) {
	if err := e.q.Retry(context.Background(), t.Queue, t.ID, e.clock.Now().Add(time.Second)); err != nil {
		e.redisError("retry of a task failed; its lease will expire", err, "task", t.ID)
	}
}

// ackTasks acks tasks, one Redis call per queue. A failed ack is harmless:
// the task comes back after its lease and the store's claim drops it.
func (e *Engine) ackTasks(tasks []queue.Task) {
	if len(tasks) == 0 {
		return
	}
	byQueue := map[string][]string{}
	for _, t := range tasks {
		byQueue[t.Queue] = append(byQueue[t.Queue], t.ID)
	}
	for name, ids := range byQueue {
		if err := e.q.Ack(context.Background(), name, ids...); err != nil {
			e.redisError("ack failed", err, "queue", name, "tasks", len(ids))
		}
	}
}

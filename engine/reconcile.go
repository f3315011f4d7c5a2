package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// reconcileBatch bounds each of the reconciler's store queries.
const reconcileBatch = 500

// The reconciler makes Redis rebuildable: every pass it reads from the
// store what should be in Redis and enqueues it (enqueue is idempotent per
// task id, so what is already there is left alone):
//   - pending runs whose start time has come are started;
//   - queued steps (and compensations waiting for a worker) that have been
//     waiting longer than one interval;
//   - retries that are due;
//   - running steps whose lease expired (their worker died);
//   - compensating runs, whose saga is advanced in case a crash
//     interrupted it.
//
// A node reconciles only the workflows it has registered: the runs and
// steps of others (a newer deploy's, or another application's sharing
// the database) are left to the nodes that run them.
//
// Every node runs one; passes on several nodes at once are safe.
func (e *Engine) reconcilePass(ctx context.Context) {
	if err := e.bindNamespace(ctx); err != nil && !errors.Is(err, ErrNamespaceConflict) && ctx.Err() == nil {
		e.log.Debug("reconcile: binding the Redis prefix failed", "err", err)
	}
	if e.paused() {
		// A skewed clock would start retries and delayed runs early;
		// another database's prefix is not this node's to refill.
		return
	}
	if _, err := e.Reconcile(ctx); err != nil && ctx.Err() == nil {
		e.log.Warn("reconcile pass failed", "err", err)
	}
}

// ReconcileResult counts what one reconcile pass did.
type ReconcileResult struct {
	RunsStarted  int
	Queued       int
	RetriesDue   int
	LeaseExpired int
	Sagas        int
	// Parked counts the parked steps whose time came: sleeps completed,
	// waits timed out.
	Parked ParkedResult
	// ChildrenResolved counts the parked `child` steps whose ended child
	// the pass found unresolved (its node crashed before resolving them).
	ChildrenResolved int
	// EventsDispatched counts committed events of PublishTx whose runs
	// this pass enqueued.
	EventsDispatched int
}

// Reconcile runs one reconcile pass now. The engine runs it every
// ReconcileInterval; tools and tests may call it directly.
func (e *Engine) Reconcile(ctx context.Context) (ReconcileResult, error) {
	var r ReconcileResult
	// Paused queues first: what this pass enqueues must not be taken
	// from a queue the store says is paused.
	if err := e.mirrorPausedQueues(ctx); err != nil {
		return r, fmt.Errorf("engine: reconcile: paused queues: %w", err)
	}
	now := e.clock.Now()
	workflows := e.registeredNames()
	if len(workflows) > 0 {
		if err := e.reconcileStore(ctx, now, workflows, &r); err != nil {
			return r, err
		}
	}
	for name := range e.allQueues() {
		if _, err := e.q.Sweep(ctx, name, reconcileBatch); err != nil {
			return r, err
		}
	}
	if len(workflows) > 0 {
		parked, _, err := e.wakeParked(ctx, now)
		r.Parked = parked
		if err != nil {
			return r, fmt.Errorf("engine: reconcile: parked steps: %w", err)
		}
		if r.ChildrenResolved, err = e.resolveChildren(ctx); err != nil {
			return r, fmt.Errorf("engine: reconcile: child runs: %w", err)
		}
	}
	n, err := e.dispatchOutbox(ctx)
	r.EventsDispatched = n
	if err != nil {
		return r, fmt.Errorf("engine: reconcile: published events: %w", err)
	}
	return r, nil
}

// reconcileStore is the part of a pass that reads the store: the runs
// and steps of workflows, due or lost, are put back into Redis.
func (e *Engine) reconcileStore(ctx context.Context, now time.Time, workflows []string, r *ReconcileResult) error {
	due, err := e.store.RunListDue(ctx, persistence.ListDueParams{Before: now, Limit: reconcileBatch, Workflows: workflows})
	if err != nil {
		return err
	}
	for _, run := range due {
		queued, err := e.store.RunStart(ctx, persistence.RunStartParams{RunID: run.ID, Now: now})
		if err != nil {
			return err
		}
		r.RunsStarted++
		e.enqueueSteps(ctx, queued)
	}

	// Steps queued less than one interval ago are most likely in Redis
	// already (or being enqueued right now); leave them.
	queued, err := e.store.StepListQueued(ctx, persistence.ListDueParams{Before: now.Add(-e.cfg.ReconcileInterval), Limit: reconcileBatch, Workflows: workflows})
	if err != nil {
		return err
	}
	r.Queued = e.requeue(ctx, queued, now, false)
	e.metrics.reconciled(requeueQueued, r.Queued)

	retries, err := e.store.StepListRetryDue(ctx, persistence.ListDueParams{Before: now, Limit: reconcileBatch, Workflows: workflows})
	if err != nil {
		return err
	}
	r.RetriesDue = e.requeue(ctx, retries, now, false)
	e.metrics.reconciled(requeueRetryDue, r.RetriesDue)

	expired, err := e.store.StepListLeaseExpired(ctx, persistence.ListDueParams{Before: now, Limit: reconcileBatch, Workflows: workflows})
	if err != nil {
		return err
	}
	r.LeaseExpired = e.requeue(ctx, expired, now, true)
	e.metrics.reconciled(requeueLeaseExpired, r.LeaseExpired)

	for _, wf := range workflows {
		page, err := e.store.RunList(ctx, persistence.RunListParams{Workflow: wf, Status: []persistence.RunStatus{persistence.RunCompensating}, Limit: reconcileBatch})
		if err != nil {
			return err
		}
		for _, run := range page.Runs {
			e.advanceSagaRun(ctx, run)
			r.Sagas++
		}
	}
	return nil
}

// requeue enqueues the task each step is waiting for. For a step whose
// lease expired the task is the lost attempt's own id (it may still be in
// Redis, leased); otherwise it is the next attempt's.
func (e *Engine) requeue(ctx context.Context, sts []persistence.StepRun, now time.Time, expired bool) int {
	byQueue := map[string][]queue.Item{}
	for _, s := range sts {
		ref := taskRef{RunID: s.RunID, Step: s.Step}
		switch {
		case s.Status == persistence.StepCompensating:
			ref.Compensation = true
			ref.Attempt = s.CompAttempt + 1
			if expired {
				ref.Attempt = max(s.CompAttempt, 1)
			}
		case expired:
			ref.Attempt = max(s.Attempt, 1)
		default:
			ref.Attempt = s.Attempt + 1
		}
		byQueue[s.Queue] = append(byQueue[s.Queue], queue.Item{ID: ref.String(), At: now, Priority: s.Priority})
	}
	if expired {
		e.freeSlots(ctx, byQueue)
	}
	e.withStepLimits(ctx, byQueue, nil)
	n := 0
	for name, items := range byQueue {
		if len(items) == 0 {
			continue
		}
		added, err := e.q.Enqueue(ctx, name, items...)
		if err != nil {
			e.redisError("reconcile: enqueue failed", err, "queue", name)
			continue
		}
		for _, a := range added {
			if a {
				n++
			}
		}
	}
	e.stats.reconciled.Add(int64(n))
	return n
}

func (e *Engine) allQueues() map[string]bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make(map[string]bool, len(e.queues))
	for k := range e.queues {
		out[k] = true
	}
	return out
}

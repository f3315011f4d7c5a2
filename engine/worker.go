package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
	"github.com/dagflow/dagflow/steps"
)

// counters are the engine's running totals; see Stats.
type counters struct {
	runsCreated      atomic.Int64
	stepsStarted     atomic.Int64
	stepsSucceeded   atomic.Int64
	stepsFailed      atomic.Int64
	stepsDead        atomic.Int64
	stepsSkipped     atomic.Int64
	staleCompletions atomic.Int64
	compensations    atomic.Int64
	reconciled       atomic.Int64
	errors           atomic.Int64
	claimBatches     atomic.Int64
	claimItems       atomic.Int64
	commitBatches    atomic.Int64
	commitItems      atomic.Int64
	createBatches    atomic.Int64
	createItems      atomic.Int64
	claimedAtRelease atomic.Int64
	claimedAtCreate  atomic.Int64
	redisErrors      atomic.Int64
	clockSkew        atomic.Int64 // nanoseconds, this node's clock minus the database's
	clockSkewed      atomic.Bool

	refusedMu sync.Mutex
	refused   map[persistence.ClaimRefusal]int64
}

// countRefusal counts a claim the store refused, by reason.
func (c *counters) countRefusal(r persistence.ClaimRefusal) {
	c.refusedMu.Lock()
	if c.refused == nil {
		c.refused = map[persistence.ClaimRefusal]int64{}
	}
	c.refused[r]++
	c.refusedMu.Unlock()
}

// Stats are an engine's running totals since New.
type Stats struct {
	RunsCreated    int64
	StepsStarted   int64
	StepsSucceeded int64
	StepsFailed    int64 // failed attempts, retried or not
	StepsDead      int64
	StepsSkipped   int64
	// StaleCompletions counts outcomes refused because the worker had lost
	// its lease (a zombie worker's late result).
	StaleCompletions int64
	Compensations    int64
	Reconciled       int64 // tasks the reconciler put back into Redis
	Errors           int64 // store or Redis errors seen by workers
	// RedisErrors counts the Redis calls that failed (Redis unreachable,
	// refused or timed out); they are in Errors too.
	RedisErrors int64
	// ClaimsRefused counts the tasks whose claim the store refused, by
	// reason (persistence.RefusedNotDue, RefusedOwned, RefusedFinished...).
	// A task refused as not due yet is put back for its due time; the
	// others are stale and dropped.
	ClaimsRefused map[persistence.ClaimRefusal]int64
	InFlight      int
	// ClaimBatches and ClaimItems count claim transactions and the tasks
	// they carried; CommitBatches and CommitItems the same for completions.
	// Items per batch is the group commit's effect.
	ClaimBatches, ClaimItems   int64
	CommitBatches, CommitItems int64
	// CreateBatches and CreateItems count the transactions that created
	// runs for Trigger calls, and the runs they created together.
	CreateBatches, CreateItems int64
	// ClaimedAtRelease counts steps claimed by the transaction that
	// released them and run on this node without a trip through Redis.
	ClaimedAtRelease int64
	// ClaimedAtCreate counts root steps claimed by the transaction that
	// created their run (a Trigger on a node with free workers) and run on
	// this node without a trip through Redis.
	ClaimedAtCreate int64
	// ClockSkew is how far this node's clock was ahead of the database's
	// (negative: behind) at the last check, and ClockSkewed whether that
	// is over Config.MaxClockSkew, so that the node claims nothing.
	ClockSkew   time.Duration
	ClockSkewed bool
}

// Stats returns the engine's running totals.
func (e *Engine) Stats() Stats {
	e.inflightMu.Lock()
	n := len(e.inflight)
	e.inflightMu.Unlock()
	c := &e.stats
	c.refusedMu.Lock()
	refused := make(map[persistence.ClaimRefusal]int64, len(c.refused))
	for k, v := range c.refused {
		refused[k] = v
	}
	c.refusedMu.Unlock()
	return Stats{
		RedisErrors: c.redisErrors.Load(), ClaimsRefused: refused,
		ClockSkew: time.Duration(c.clockSkew.Load()), ClockSkewed: c.clockSkewed.Load(),
		RunsCreated: c.runsCreated.Load(), StepsStarted: c.stepsStarted.Load(),
		StepsSucceeded: c.stepsSucceeded.Load(), StepsFailed: c.stepsFailed.Load(),
		StepsDead: c.stepsDead.Load(), StepsSkipped: c.stepsSkipped.Load(),
		StaleCompletions: c.staleCompletions.Load(), Compensations: c.compensations.Load(),
		Reconciled: c.reconciled.Load(), Errors: c.errors.Load(), InFlight: n,
		ClaimBatches: c.claimBatches.Load(), ClaimItems: c.claimItems.Load(),
		CommitBatches: c.commitBatches.Load(), CommitItems: c.commitItems.Load(),
		CreateBatches: c.createBatches.Load(), CreateItems: c.createItems.Load(),
		ClaimedAtRelease: c.claimedAtRelease.Load(), ClaimedAtCreate: c.claimedAtCreate.Load(),
	}
}

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
	// handedOver: the committer gave this execution's slot to a step it
	// claimed; the goroutine ends without giving it back (owner only).
	handedOver bool
}

var (
	errRunNotRunning = errors.New("engine: run is no longer running")
	errLeaseLost     = errors.New("engine: lease lost to another worker")
	errShutdown      = errors.New("engine: node shutting down")
)

// takeSlots takes a slot for every task after the first (whose slot the
// fetch loop holds) and gives back to the queue, at once, the tasks for
// which none is free any more (the committers took them meanwhile).
func (e *Engine) takeSlots(tasks []queue.Task) []queue.Task {
	got := min(len(tasks), 1)
	got += e.tryTakeSlots(len(tasks) - got)
	e.giveBack(tasks[got:])
	return tasks[:got]
}

// tryTakeSlots takes up to n free slots without waiting and returns how
// many it took.
func (e *Engine) tryTakeSlots(n int) int {
	got := 0
	for got < n {
		select {
		case e.slots <- struct{}{}:
			got++
		default:
			return got
		}
	}
	return got
}

// freeSlots gives n slots back.
func (e *Engine) freeSlots(n int) {
	for range n {
		<-e.slots
	}
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

// queueNames are the queues this node works: Config.Queues, or else every
// queue of the registered workflows.
func (e *Engine) queueNames() []string {
	if len(e.cfg.Queues) > 0 {
		return e.cfg.Queues
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	names := make([]string, 0, len(e.queues))
	for n := range e.queues {
		names = append(names, n)
	}
	if len(names) == 0 {
		return []string{dag.DefaultQueueName}
	}
	sort.Strings(names)
	return names
}

// fetchLoop takes tasks from Redis while slots are free, claims them in
// batches and runs each in its own goroutine.
func (e *Engine) fetchLoop() {
	defer close(e.fetchDone)
	backoff := 50 * time.Millisecond
	for {
		if e.clockSkewed() {
			// This node's clock is off (health.go): claim nothing until
			// it is right again.
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
		select {
		case e.slots <- struct{}{}:
		case <-e.fetchCtx.Done():
			return
		}
		want := min(1+cap(e.slots)-len(e.slots), 64)
		tasks, err := e.q.Dequeue(e.fetchCtx, queue.DequeueParams{
			Queues: e.queueNames(),
			Max:    max(want, 1),
			Lease:  e.cfg.Lease,
		})
		if len(tasks) == 0 {
			<-e.slots
		}
		tasks = e.takeSlots(tasks)
		if e.fetchCtx.Err() != nil {
			// Stopping: take no new steps; hand back what was leased.
			e.giveBack(tasks)
			for range tasks {
				<-e.slots
			}
			return
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

// claim takes a step in the store. ok is false when the task is stale
// (someone else owns the step, or it is finished); err is set when the
// store could not be asked.
func (e *Engine) claim(ctx context.Context, ex *execution, ref taskRef, withOutputs []string) (persistence.StepClaimResult, bool, error) {
	fence := uuid.NewString()
	e.inflightMu.Lock()
	ex.fence = fence
	e.inflightMu.Unlock()
	now := e.clock.Now()
	res, err := e.store.StepClaim(ctx, persistence.StepClaimParams{
		RunID:        ref.RunID,
		Step:         ref.Step,
		Compensation: ref.Compensation,
		Fence:        fence,
		Worker:       e.cfg.NodeID,
		LeaseUntil:   now.Add(e.cfg.Lease),
		Now:          now,
		WithOutputs:  withOutputs,
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

// runClaimed executes a claimed forward attempt. It returns false when
// the task should be tried again because the store was unreachable.
func (e *Engine) runClaimed(ctx context.Context, ex *execution, res persistence.StepClaimResult) bool {
	ref := taskRef{RunID: ex.runID, Step: ex.step}
	e.stats.stepsStarted.Add(1)
	log := withLazy(e.log, slog.String("run_id", ref.RunID), slog.String("workflow", res.Run.Workflow),
		slog.String("step", ref.Step), slog.Int("attempt", res.Step.Attempt))
	w := e.Workflow(res.Run.Workflow)
	var sdef *dag.Step
	if w != nil {
		sdef = w.Step(ref.Step)
	}
	if sdef == nil {
		// Another node may know the workflow; retry like a failure.
		err := fmt.Errorf("workflow %q step %q is not registered on node %s", res.Run.Workflow, ref.Step, e.cfg.NodeID)
		return e.stepFailed(ctx, ex, res, nil, w, err, log)
	}
	if res.Step.Attempt > res.Step.MaxAttempts {
		err := steps.Permanent(fmt.Errorf("attempt %d exceeds the %d allowed: earlier attempts lost their worker", res.Step.Attempt, res.Step.MaxAttempts))
		return e.stepFailed(ctx, ex, res, sdef, w, err, log)
	}
	if err := e.deliveryLimit(ctx, ex, persistence.AttemptForward, res.Step.Attempt); err != nil {
		return e.stepFailed(ctx, ex, res, sdef, w, err, log)
	}

	sc := steps.Context{
		RunID:          ref.RunID,
		Workflow:       res.Run.Workflow,
		Step:           ref.Step,
		Attempt:        res.Step.Attempt,
		IdempotencyKey: ref.RunID + "/" + ref.Step,
		Input:          json.RawMessage(res.Run.Input),
		Metadata:       res.Run.Metadata,
		Logger:         log,
	}
	if len(res.Outputs) > 0 {
		sc.Outputs = make(map[string]json.RawMessage, len(res.Outputs))
		for k, v := range res.Outputs {
			sc.Outputs[k] = json.RawMessage(v)
		}
	}
	if len(sdef.Needs) > 0 {
		outcomes := make(map[string]dag.Outcome, len(res.Upstream))
		for k, st := range res.Upstream {
			outcomes[k] = outcomeOf(st)
		}
		if w.ShouldSkip(ref.Step, outcomes) {
			return e.stepSkipped(ctx, ex, res, "a required dependency was skipped", log)
		}
	}
	if sdef.When != "" {
		run, err := sdef.EvalWhen(sc.Input, sc.Outputs)
		if err != nil {
			return e.stepFailed(ctx, ex, res, sdef, w, steps.Permanent(err), log)
		}
		if !run {
			return e.stepSkipped(ctx, ex, res, "when is false", log)
		}
	}

	out, herr := e.execute(ctx, ex, sdef.Handler, sdef.Timeout, sc)
	if ex.released.Load() {
		return true
	}
	if herr == nil {
		return e.stepSucceeded(ctx, ex, res, out, log)
	}
	if errors.Is(herr, errRunNotRunning) || errors.Is(herr, errLeaseLost) {
		return e.stepAborted(ctx, ex, res, herr, log)
	}
	return e.stepFailed(ctx, ex, res, sdef, w, herr, log)
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
	hctx, cancel := context.WithCancelCause(ctx)
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
	if err == nil && len(out) > 0 && !json.Valid(out) {
		err = steps.Permanent(fmt.Errorf("step %q returned output that is not valid JSON", sc.Step))
	}
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

func (e *Engine) stepSucceeded(ctx context.Context, ex *execution, res persistence.StepClaimResult, out json.RawMessage, log interface {
	Info(string, ...any)
}) bool {
	cres, err := e.complete(ex, persistence.StepCompleteParams{
		RunID: ex.runID, Step: ex.step, Fence: ex.fence, Output: out, Now: e.clock.Now(),
	})
	if errors.Is(err, persistence.ErrFenceMismatch) {
		e.stats.staleCompletions.Add(1)
		e.log.Warn("stale completion refused: the lease was taken over", "run_id", ex.runID, "step", ex.step, "attempt", res.Step.Attempt)
		return true
	}
	if errors.Is(err, persistence.ErrTooLarge) || errors.Is(err, persistence.ErrInvalid) {
		// The store refuses the output itself (over MaxPayload): running
		// the step again would make the same output, so it is dead, with
		// the reason, rather than retried as if the store were down.
		w := e.Workflow(res.Run.Workflow)
		var sdef *dag.Step
		if w != nil {
			sdef = w.Step(ex.step)
		}
		return e.stepFailed(ctx, ex, res, sdef, w, steps.Permanent(err), e.log.With("run_id", ex.runID, "step", ex.step))
	}
	if err != nil {
		e.stats.errors.Add(1)
		e.log.Error("recording success failed; the step will run again", "run_id", ex.runID, "step", ex.step, "err", err)
		return false
	}
	e.stats.stepsSucceeded.Add(1)
	if cres.RunFinished {
		log.Info("run succeeded")
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
	cres, err := e.complete(ex, persistence.StepCompleteParams{
		RunID: ex.runID, Step: ex.step, Fence: ex.fence, Skipped: true, Now: e.clock.Now(),
	})
	if errors.Is(err, persistence.ErrFenceMismatch) {
		e.stats.staleCompletions.Add(1)
		return true
	}
	if err != nil {
		e.stats.errors.Add(1)
		return false
	}
	e.stats.stepsSkipped.Add(1)
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
	if errors.Is(why, errLeaseLost) {
		e.stats.staleCompletions.Add(1)
		return true
	}
	_, err := e.store.StepTransition(context.WithoutCancel(ctx), persistence.StepTransitionParams{
		RunID: ex.runID, Steps: []string{ex.step},
		From: []persistence.StepStatus{persistence.StepRunning}, To: persistence.StepCancelled,
		Error: why.Error(), Now: e.clock.Now(),
	})
	if err != nil {
		e.stats.errors.Add(1)
		return false
	}
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
	e.stats.stepsFailed.Add(1)
	now := e.clock.Now()
	attempt := res.Step.Attempt
	p := persistence.StepFailParams{
		RunID: ex.runID, Step: ex.step, Fence: ex.fence, Error: errorText(herr), Now: now,
	}
	policy := dag.DefaultRetryPolicy()
	if sdef != nil {
		policy = sdef.Retry
	}
	dead := steps.IsPermanent(herr) || attempt >= res.Step.MaxAttempts
	if !dead {
		delay := policy.Backoff(attempt, e.cfg.Rand())
		if d, ok := steps.RetryDelay(herr); ok {
			delay = d
		}
		at := now.Add(delay)
		p.RetryAt = &at
	} else {
		p.DeadRunStatus = persistence.RunFailed
		p.DeadRunError = fmt.Sprintf("step %q dead after %d attempt(s): %s", ex.step, attempt, firstLine(herr))
		if e.needsCompensation(ctx, ex.runID, ex.step, w) {
			p.DeadRunStatus = persistence.RunCompensating
		}
	}
	sr, err := e.store.StepFail(context.WithoutCancel(ctx), p)
	if errors.Is(err, persistence.ErrFenceMismatch) {
		e.stats.staleCompletions.Add(1)
		return true
	}
	if err != nil {
		e.stats.errors.Add(1)
		e.log.Error("recording failure failed; the step will run again", "run_id", ex.runID, "step", ex.step, "err", err)
		return false
	}
	if p.RetryAt != nil {
		log.Warn("step failed; retrying", "err", firstLine(herr), "retry_at", p.RetryAt)
		e.enqueue(sr.Queue, taskRef{RunID: ex.runID, Step: ex.step, Attempt: attempt + 1}.String(), *p.RetryAt)
		return true
	}
	e.stats.stepsDead.Add(1)
	log.Warn("step dead-lettered", "err", firstLine(herr), "run_status", p.DeadRunStatus)
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
		if s.Compensation != nil {
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
		if s.Step != dead && d != nil && d.Compensation != nil && (s.Status == persistence.StepSucceeded || s.Status == persistence.StepRunning) {
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

func firstLine(err error) string {
	s := err.Error()
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

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
		byQueue[s.Queue] = append(byQueue[s.Queue], queue.Item{ID: ref.String()})
	}
	return e.enqueueItems(ctx, byQueue)
}

// enqueueCreated dispatches runs that were just created (or committed, for
// TriggerTx): the queued root steps at once, and the root steps of a run
// that starts later (pending) as tasks due at its StartAt, so that a
// delayed run starts on time like a delayed retry. Its claim then starts
// the run (onRefused); the reconciler is only the safety net.
func (e *Engine) enqueueCreated(ctx context.Context, runs []persistence.RunCreateResult) error {
	byQueue := map[string][]queue.Item{}
	for _, r := range runs {
		for _, s := range r.Steps {
			ref := taskRef{RunID: s.RunID, Step: s.Step, Attempt: s.Attempt + 1}
			switch {
			case r.Run.Status == persistence.RunPending && len(s.Deps) == 0 && s.Status == persistence.StepWaiting:
				byQueue[s.Queue] = append(byQueue[s.Queue], queue.Item{ID: ref.String(), At: r.Run.StartAt})
			case s.Status == persistence.StepQueued:
				byQueue[s.Queue] = append(byQueue[s.Queue], queue.Item{ID: ref.String()})
			}
		}
	}
	return e.enqueueItems(ctx, byQueue)
}

// enqueueItems enqueues tasks, one Redis call per queue in name order.
func (e *Engine) enqueueItems(ctx context.Context, byQueue map[string][]queue.Item) error {
	names := make([]string, 0, len(byQueue))
	for n := range byQueue {
		names = append(names, n)
	}
	sort.Strings(names)
	var firstErr error
	for _, n := range names {
		if _, err := e.q.Enqueue(context.WithoutCancel(ctx), n, byQueue[n]...); err != nil {
			e.redisError("enqueue failed; the reconciler will retry", err, "queue", n)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// enqueue puts one task into Redis, due at at. A failure is logged: the
// store still says the step waits, so the reconciler enqueues it later.
func (e *Engine) enqueue(queueName, id string, at time.Time) {
	if _, err := e.q.Enqueue(context.Background(), queueName, queue.Item{ID: id, At: at}); err != nil {
		e.redisError("enqueue failed; the reconciler will retry", err, "task", id)
	}
}

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
			e.enqueue(ex.task.Queue, ex.task.ID, now)
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

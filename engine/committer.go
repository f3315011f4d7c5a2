package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// Group commit on the hot path. The fetch loop claims every forward task
// of a dequeued batch in one store transaction (StepClaimMany), and the
// outcomes of steps that succeeded or were skipped are recorded by a few
// committers, each batch of waiting completions (up to maxCommitBatch) in
// one transaction (StepCompleteMany; commitLoop says when a second one
// starts beside the first), then enqueueing
// the released steps and acking the finished tasks in one Redis call per
// queue. Under load batches grow by themselves; an idle engine commits a
// lone completion at once, so batching adds no waiting.

const (
	// maxCommitBatch bounds one completion transaction.
	maxCommitBatch = 256
	// storeCallTimeout bounds a batch's store call, so that a database
	// that stopped answering (rather than refusing) cannot hold the
	// committers forever; the items are retried like any failed call.
	storeCallTimeout = 30 * time.Second
	// committers is how many completion transactions may be in flight at
	// once: while one commits, the next batches gather and go. Two, not
	// more: the transactions are cheap, so a third only splits the backlog
	// into smaller batches whose fixed costs come back per step.
	committers = 2
	// extraCommitAt is the backlog of completions for which a second
	// completion transaction starts beside one in flight.
	extraCommitAt = 32
)

// completion is one step outcome waiting for a committer.
type completion struct {
	p     persistence.StepCompleteParams
	task  queue.Task
	eager bool // the task is not in Redis (claimed at release)
	done  chan completionResult
	span  trace.SpanContext // the attempt's, when the node traces
}

type completionResult struct {
	res persistence.StepCompleteResult
	err error // the item's error, or the batch's
	// handover: the item's slot now belongs to a step its batch claimed.
	handover bool
	commit   trace.SpanContext // the transaction's span, when the node traces
}

// complete records a success or skip through the committers and waits for
// the outcome. When it returns without error the task was acked and the
// released steps enqueued. A batch that could not reach the store is tried
// again for up to half a lease, so a short database outage does not make a
// finished step run again.
func (e *Engine) complete(ctx context.Context, ex *execution, p persistence.StepCompleteParams) (persistence.StepCompleteResult, error) {
	span := e.tracer.attemptSpan(ctx)
	// A real wait, not the engine's time: with a fake clock that stands
	// still, an outage must still end the tries.
	deadline := time.Now().Add(e.cfg.Lease / 2)
	backoff := 50 * time.Millisecond
	for {
		c := &completion{p: p, task: ex.task, eager: ex.eager, done: make(chan completionResult, 1), span: span}
		select {
		case e.completions <- c:
		case <-e.commitGone:
			// Stop abandoned this handler and the committers are gone.
			return persistence.StepCompleteResult{}, errShutdown
		}
		r := <-c.done
		e.tracer.committed(ctx, r.commit)
		if r.err == nil {
			ex.acked = true
			ex.handedOver = r.handover
			return r.res, nil
		}
		if isItemError(r.err) || time.Now().After(deadline) || e.runCtx.Err() != nil {
			return r.res, r.err
		}
		e.log.Warn("recording an outcome failed; trying again", "run_id", p.RunID, "step", p.Step, "err", r.err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// isItemError reports an answer about the item itself (not a store that
// could not be reached), which trying again would not change.
func isItemError(err error) bool {
	return errors.Is(err, persistence.ErrFenceMismatch) || errors.Is(err, persistence.ErrStepNotFound) ||
		errors.Is(err, persistence.ErrInvalid) || errors.Is(err, persistence.ErrTooLarge) ||
		errors.Is(err, persistence.ErrRunNotFound)
}

// commitLoop gathers waiting completions and hands them in batches to the
// committers until stopCommit is closed (after every handler has
// finished). One transaction takes everything waiting while none is in
// flight; a second starts beside it only for a backlog of extraCommitAt
// completions. Under light load that makes fewer, larger
// transactions, which cost less CPU per step: on a busy machine CPU is
// what the transactions queue for, so the dispatch latency drops. Under
// heavy load the backlog keeps all of them busy, for throughput. A
// completion that holds a queue's concurrency slot (queuelimits.go) does not
// wait for the transaction in flight: its slot is given back only after
// its commit, and other nodes' steps wait for it.
func (e *Engine) commitLoop() {
	defer e.commitWG.Done()
	batches := make(chan []*completion)
	done := make(chan struct{}, committers)
	var wg sync.WaitGroup
	for range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				e.commitBatch(b)
				done <- struct{}{}
			}
		}()
	}
	defer func() {
		close(batches)
		wg.Wait()
	}()
	var buf []*completion
	inflight := 0
	holding := 0 // completions in buf that hold a queue concurrency slot
	for {
		var out chan []*completion
		var next []*completion
		if len(buf) > 0 && inflight < committers && (inflight == 0 || len(buf) >= extraCommitAt || holding > 0) {
			out, next = batches, buf[:min(len(buf), maxCommitBatch)]
		}
		in := e.completions
		if len(buf) >= committers*maxCommitBatch {
			in = nil // enough waiting: let complete() block
		}
		select {
		case c := <-in:
			buf = append(buf, c)
			holding += e.holdsSlot(c)
		gather:
			for len(buf) < committers*maxCommitBatch {
				select {
				case c := <-e.completions:
					buf = append(buf, c)
					holding += e.holdsSlot(c)
				default:
					break gather
				}
			}
		case out <- next:
			for _, c := range next {
				holding -= e.holdsSlot(c)
			}
			buf = slices.Clone(buf[len(next):])
			inflight++
		case <-done:
			inflight--
		case <-e.stopCommit:
			// Every handler has heard back, so nothing is waiting; the
			// transactions in flight end before the committers do.
			for ; inflight > 0; inflight-- {
				<-done
			}
			for len(buf) > 0 {
				n := min(len(buf), maxCommitBatch)
				e.commitBatch(buf[:n])
				buf = buf[n:]
			}
			return
		}
	}
}

// commitBatch records a batch of completions in one store transaction,
// starts the steps it claimed at release, enqueues the steps it released,
// acks the finished tasks and tells every completion its outcome.
func (e *Engine) commitBatch(batch []*completion) {
	ps := make([]persistence.StepCompleteParams, len(batch))
	for i, c := range batch {
		ps[i] = c.p
	}
	e.stats.commitBatches.Add(1)
	e.stats.commitItems.Add(int64(len(batch)))
	// Claim at release: the steps this batch releases run here at once,
	// without a trip through Redis and a claim transaction, on free slots
	// and on the slots of the batch's own steps, which are done once it
	// commits (a worker goes on with the step its step released).
	rc, slots := e.releaseClaim(2*len(batch), len(batch))
	span := e.tracer.startBatch(batch)
	var commit trace.SpanContext
	if span != nil {
		commit = span.SpanContext()
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	outs, err := e.store.StepCompleteMany(ctx, persistence.StepCompleteManyParams{Items: ps, ClaimReleased: rc})
	cancel()
	if err != nil {
		e.batchFailed(batch, span, commit, slots, err)
		return
	}
	var ready []persistence.StepRun
	var acks []queue.Task
	var claimed []persistence.StepClaimResult
	for i, c := range batch {
		o := outs[i]
		switch {
		case o.Err == nil:
			ready = append(ready, o.Result.Ready...)
			if !c.eager {
				acks = append(acks, c.task)
			}
			claimed = append(claimed, o.Result.Claimed...)
		case errors.Is(o.Err, persistence.ErrFenceMismatch) && !c.eager:
			acks = append(acks, c.task) // a zombie's task: the new owner has its own
		}
	}
	// Slots for the claimed steps: the free ones taken, then those of the
	// batch's steps that have nothing left to do once they hear back (a
	// success or skip in a run that is not compensating).
	fromFree := min(len(claimed), slots)
	e.slots.free(slots - fromFree)
	handover := make([]bool, len(batch))
	need := markHandovers(handover, outs, len(claimed)-fromFree)
	// The claimed steps start first: their claims are committed, and the
	// Redis calls below need not delay them.
	e.stats.claimedAtRelease.Add(int64(len(claimed)))
	for i, cl := range claimed {
		if i < len(claimed)-need {
			e.runEager(cl, rc.Fence)
		} else {
			// More claimed than slots (a fan-out beside steps that did
			// not complete): this one waits for a slot.
			e.runEagerWhenFree(cl, rc.Fence)
		}
	}
	// Enqueue before ack: a crash in between leaves a duplicate task (the
	// claim drops it), never a lost one.
	e.enqueueSteps(context.Background(), ready)
	e.ackTasks(acks)
	e.tracer.endBatch(span, len(claimed), nil)
	for i, c := range batch {
		c.done <- completionResult{res: outs[i].Result, err: outs[i].Err, handover: handover[i], commit: commit}
	}
}

// batchFailed ends a batch whose transaction failed: the free slots it
// took are given back and every completion hears the batch's error.
func (e *Engine) batchFailed(batch []*completion, span trace.Span, commit trace.SpanContext, slots int, err error) {
	e.tracer.endBatch(span, 0, err)
	e.stats.errors.Add(1)
	e.slots.free(slots)
	for _, c := range batch {
		c.done <- completionResult{err: err, commit: commit}
	}
}

// markHandovers marks, in the batch's order, up to need completions whose
// slots go to steps the batch claimed: those that committed in a run that
// is not compensating (handover holds a mark per completion). It returns
// how many claimed steps are still without a slot.
func markHandovers(handover []bool, outs []persistence.StepCompleteOutcome, need int) int {
	for i := range handover {
		if need == 0 {
			break
		}
		if o := outs[i]; o.Err == nil && o.Result.RunStatus != persistence.RunCompensating {
			handover[i] = true
			need--
		}
	}
	return need
}

// releaseClaim takes up to max free slots without waiting and returns the
// claim that lets a completion batch fill them and extra more (the slots
// of the batch's own steps), or nil when there is nothing to fill (or the
// node is stopping or runs no workers). It returns the free slots taken.
func (e *Engine) releaseClaim(max, extra int) (*persistence.ReleaseClaim, int) {
	if e.slots == nil || e.fetchCtx.Err() != nil || e.paused() {
		return nil, 0
	}
	queues := e.claimQueues()
	if len(queues) == 0 {
		return nil, 0 // every queue of this node is paused or limited
	}
	n := e.slots.tryTake(max)
	if n+extra == 0 {
		return nil, 0
	}
	return &persistence.ReleaseClaim{
		Queues: queues, Max: n + extra, Fence: uuid.NewString(), Worker: e.cfg.NodeID,
		LeaseUntil: e.clock.Now().Add(e.cfg.Lease), Handles: e.handles, MaxRead: e.cfg.MaxStepInput,
	}, n
}

// runEagerWhenFree runs a step claimed at release once a slot is free. If
// the node stops first, the lease is released and the step handed to the
// queue, as Stop does for running steps.
func (e *Engine) runEagerWhenFree(res persistence.StepClaimResult, fence string) {
	e.handlers.Add(1)
	go func() {
		defer e.handlers.Done()
		if e.fetchCtx.Err() == nil {
			if e.slots.acquire(e.fetchCtx) {
				e.runEager(res, fence)
				return
			}
		}
		e.handBack(res, fence)
	}()
}

// runEager runs a step claimed at release (or at create) on one of the
// slots its batch took. Its task is not in Redis.
func (e *Engine) runEager(res persistence.StepClaimResult, fence string) {
	ref := taskRef{RunID: res.Step.RunID, Step: res.Step.Step, Attempt: res.Step.Attempt}
	ex := &execution{
		task:  queue.Task{ID: ref.String(), Queue: res.Step.Queue, Deliveries: 1, LeaseUntil: *res.Step.LeaseExpiresAt},
		runID: ref.RunID, step: ref.Step, fence: fence, eager: true, priority: res.Step.Priority,
	}
	e.goRun(ex, func() bool { return e.runClaimed(e.runCtx, ex, res) })
}

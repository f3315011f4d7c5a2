package engine

import (
	"context"
	"errors"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// The outbox: an event PublishTx records commits with the caller's
// transaction, and its runs are enqueued after the commit by the outbox
// loop of any running engine, and by every reconcile pass.

// DefaultOutboxInterval is how often an engine looks for committed events
// of PublishTx whose runs no node has enqueued yet
// (Config.OutboxInterval).
const DefaultOutboxInterval = 500 * time.Millisecond

// outboxFast is how often the outbox loop polls, and for how long, after
// a PublishTx on this node: the caller commits right after it.
const (
	outboxFastInterval = 25 * time.Millisecond
	outboxFastFor      = 2 * time.Second
)

// nudgeOutbox makes the outbox loop poll at once and often for a while.
func (e *Engine) nudgeOutbox() {
	select {
	case e.outboxNudge <- struct{}{}:
	default:
	}
}

// outboxLoop enqueues the runs of committed PublishTx events until Stop.
func (e *Engine) outboxLoop() {
	defer e.wg.Done()
	var fastUntil time.Time
	t := time.NewTimer(e.cfg.OutboxInterval)
	defer t.Stop()
	for {
		select {
		case <-e.fetchCtx.Done():
			return
		case <-e.outboxNudge:
			fastUntil = time.Now().Add(outboxFastFor)
		case <-t.C:
		}
		if !e.paused() {
			if _, err := e.dispatchOutbox(e.fetchCtx); err != nil && e.fetchCtx.Err() == nil {
				e.log.Warn("dispatching published events failed", "err", err)
			}
		}
		next := e.cfg.OutboxInterval
		if time.Now().Before(fastUntil) {
			next = outboxFastInterval
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

// outboxBatch is how many pending events one dispatch pass handles, so a
// backlog does not hold up the reconcile pass that runs it; outboxRead is
// how many it reads to find them among other applications' events.
const (
	outboxBatch = 100
	outboxRead  = 1000
)

// dispatchOutbox enqueues the runs of the committed events no node has
// dispatched (an idempotent enqueue: several nodes may do it at once)
// and marks them dispatched, returning how many it marked.
func (e *Engine) dispatchOutbox(ctx context.Context) (int, error) {
	// Every pending event, whatever the nodes' clocks say. Events of
	// other applications (workflows this node has not registered, on the
	// same database under another Redis prefix) are in the page too, so
	// it reads further than it handles.
	evs, err := e.store.EventListPending(ctx, persistence.EventListPendingParams{
		Before: e.clock.Now().Add(24 * time.Hour), Limit: outboxRead})
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	ids := make([]string, 0, outboxBatch)
	for _, ev := range evs {
		if len(ids) == outboxBatch {
			break // the rest is the next pass's
		}
		ok := true
		for _, r := range ev.Runs {
			if w, _ := e.registered(r.Workflow); w == nil {
				// Another application's run: its nodes dispatch it
				// into their queues and mark the event.
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for _, r := range ev.Runs {
			if err := e.Dispatch(ctx, r.RunID); err != nil && !errors.Is(err, persistence.ErrRunNotFound) {
				e.log.Warn("dispatching a published event's run failed", "event", ev.ID, "run_id", r.RunID, "err", err)
				ok = false
			}
		}
		if ok {
			ids = append(ids, ev.ID)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return e.store.EventMarkDispatched(ctx, persistence.EventMarkDispatchedParams{IDs: ids, Now: e.clock.Now()})
}

package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/queue"
)

// Flow control: the limits of Config.QueueLimits are enforced by the
// queue's dequeue script (queue.Limit), before a task is leased, so a
// step over its limit is never claimed and spends no attempt. This file
// holds the engine's side: the configuration, the steps that may not be
// claimed at create or at release (their queue is limited, so they must
// go through Redis), slots given back when a node is declared dead, and
// what WhyWaiting says about a limited queue.

// QueueLimit bounds the steps of one queue across every node that uses
// the same Redis prefix (see Config.QueueLimits). Its zero value limits
// nothing.
type QueueLimit struct {
	// Concurrency is the most steps of the queue running at once, on all
	// nodes together; 0 for no bound. A running step holds its slot for
	// its lease: the slot is given back when the step's task is acked
	// (it finished, or failed and its retry was queued), when its lease
	// runs out, or when its node is declared dead (Config.NodeTimeout).
	Concurrency int
	// Rate steps of the queue start per Per at most, on all nodes
	// together (a token bucket); 0 for no rate limit.
	Rate int
	// Per is the rate's period; required with Rate, at least 1ms.
	Per time.Duration
	// Burst is how many steps may start at once after an idle while,
	// default 1 (starts are spaced Per/Rate apart).
	Burst int
}

func (l QueueLimit) queueLimit() queue.Limit {
	return queue.Limit{Concurrency: l.Concurrency, Rate: l.Rate, Per: l.Per, Burst: l.Burst}
}

// validateLimits checks Config.QueueLimits.
func (c Config) validateLimits() []error {
	var errs []error
	for _, name := range sortedKeys(c.QueueLimits) {
		if !names.Valid(name) {
			errs = append(errs, fmt.Errorf("engine: Config.QueueLimits: %q is not a valid queue name (want %s)", name, names.Rule))
			continue
		}
		if err := c.QueueLimits[name].queueLimit().Validate(name); err != nil {
			errs = append(errs, fmt.Errorf("engine: Config.QueueLimits: %w", err))
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// queueLimits converts Config.QueueLimits for the queue.
func (c Config) queueLimits() map[string]queue.Limit {
	if len(c.QueueLimits) == 0 {
		return nil
	}
	out := make(map[string]queue.Limit, len(c.QueueLimits))
	for name, l := range c.QueueLimits {
		out[name] = l.queueLimit()
	}
	return out
}

// limited reports whether queue has a limit, its own or one of a step's.
func (e *Engine) limited(queue string) bool {
	l, ok := e.cfg.QueueLimits[queue]
	return ok && (l.Concurrency > 0 || l.Rate > 0) || e.isStepLimited(queue)
}

// eagerQueues are the queues whose steps this node may claim at create
// or at release: its queues but the limited ones, whose steps must be
// dequeued (the dequeue script is where their limit is held).
func (e *Engine) eagerQueues() []string {
	qs := e.queueNames()
	if len(e.cfg.QueueLimits) == 0 && !e.anyStepLimited() {
		return qs
	}
	return slices.DeleteFunc(slices.Clone(qs), e.limited)
}

// freeSlots gives back at once the Redis leases of steps released from
// a dead node (or whose store lease expired), in limited queues only:
// the dead node's slots then free now rather than when its Redis leases
// run out. ids not leased are skipped by the queue.
func (e *Engine) freeSlots(ctx context.Context, byQueue map[string][]queue.Item) {
	for name, items := range byQueue {
		if l := e.cfg.QueueLimits[name]; l.Concurrency == 0 && !e.isStepLimited(name) {
			continue
		}
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.ID
		}
		if err := e.q.Release(ctx, name, ids...); err != nil {
			e.redisError("giving back the slots of released steps failed; their leases will expire", err, "queue", name)
		}
	}
}

// holdsSlot is 1 for a completion whose task holds a slot of its queue's
// concurrency limit until the completion commits and acks it, 0
// otherwise (a step claimed at release holds none: its queue is not
// limited).
func (e *Engine) holdsSlot(c *completion) int {
	if len(e.cfg.QueueLimits) == 0 || c.eager || e.cfg.QueueLimits[c.task.Queue].Concurrency == 0 {
		return 0
	}
	return 1
}

// whyLimited tells, for a step queued for live nodes, whether its queue
// is at its concurrency limit or paced by its rate limit.
func (e *Engine) whyLimited(ctx context.Context, w *StepWait) {
	if e.whyStepLimited(ctx, w) {
		return
	}
	l, ok := e.cfg.QueueLimits[w.Queue]
	if !ok || (l.Concurrency == 0 && l.Rate == 0) {
		return
	}
	st, err := e.q.Stats(ctx, w.Queue)
	if err != nil {
		return // the store's answer (queued) stands
	}
	switch {
	case l.Concurrency > 0 && st.Leased >= int64(l.Concurrency):
		w.Reason = WaitLimited
		w.Detail = fmt.Sprintf("queue %q is at its concurrency limit: %d of %d steps running on all nodes; it starts when one ends",
			w.Queue, st.Leased, l.Concurrency)
	case l.Rate > 0 && st.Ready > 0:
		w.Reason = WaitLimited
		w.Detail = fmt.Sprintf("queue %q is rate limited to %d per %v; %d step(s) ready wait for their turn",
			w.Queue, l.Rate, l.Per, st.Ready)
	}
}

package queue

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
)

// Routing by kind. Consumers that share a queue need not all run every
// task on it: a consumer that leased a task it cannot run hands it back
// with Route, naming the task's kind, and from then on only a Dequeue
// that lists the kind in DequeueParams.Kinds leases it. The task does not
// wait for a timer: the consumers waiting on the queue are woken at once,
// and a consumer of its kind takes it ahead of the queue's other ready
// tasks. The delivery of the consumer that routed it is undone, as by
// Release. Stats counts routed tasks in Ready and in Routed; List shows
// them after the other ready tasks. The keys are in lua/routed.lua.

// Route hands the leased task id of queue back for a consumer of kind: it
// leaves the lease, its delivery is undone, and only a Dequeue naming kind
// in DequeueParams.Kinds leases it again. kind follows the rule of task
// ids (ValidateID). It returns an error wrapping ErrNotLeased if the task
// is not leased.
func (q *Queue) Route(ctx context.Context, queue, id, kind string) error {
	if err := checkIDs(queue, []string{id}); err != nil {
		return err
	}
	if err := validKind(kind); err != nil {
		return err
	}
	k := q.keys(queue)
	keys := []string{k.ready, k.leased, k.index, k.waiting, k.lim}
	n, err := q.run(ctx, scriptRoute, keys, k.channel, q.how(), q.perTaskHint(queue), id, kind).Int()
	if err != nil {
		return fmt.Errorf("queue: route %q in %q to kind %q: %w", id, queue, kind, err)
	}
	if n == 0 {
		return notLeased(queue, id)
	}
	q.routedFlag(queue).Store(true)
	return nil
}

// validKind checks a routing kind: the rule of task ids.
func validKind(kind string) error {
	if err := ValidateID(kind); err != nil {
		return fmt.Errorf("%w (as a routing kind)", err)
	}
	return nil
}

// routedFlag is whether queue had routed tasks at its last dequeue (or a
// Route of this process): only then does Dequeue send the caller's kinds,
// so that a queue that routes nothing costs no bytes for them.
func (q *Queue) routedFlag(queue string) *atomic.Bool {
	if v, ok := q.routed.Load(queue); ok {
		return v.(*atomic.Bool)
	}
	v, _ := q.routed.LoadOrStore(queue, new(atomic.Bool))
	return v.(*atomic.Bool)
}

// kindsArg is the dequeue script's ARGV[13] for queue: the caller's
// kinds, one per line, if the queue was last seen with routed tasks.
func (q *Queue) kindsArg(queue string, kinds []string) string {
	if len(kinds) == 0 || !q.routedFlag(queue).Load() {
		return ""
	}
	return strings.Join(kinds, "\n")
}

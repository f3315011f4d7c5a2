package queue

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// DequeueParams says where to take tasks from and how.
type DequeueParams struct {
	// Queues are tried in strict priority order: the first queue with a
	// ready task gives the batch...
	Queues []string
	// ...unless Weights is given: then the queues are tried in a weighted
	// random order, drawn anew on each call. Every queue needs a positive
	// weight; if Queues is empty the queues are the keys of Weights.
	Weights map[string]int
	// Max is the largest batch, default 1, at most 1000. A batch comes
	// from one queue.
	Max int
	// Lease is how long the consumer owns the tasks before they are
	// handed out again (unless it calls Extend). Required.
	Lease time.Duration
	// Kinds are the kinds of routed tasks (see Route) the consumer can
	// run; it is given those ahead of the queues' other ready tasks, and
	// never a task routed to another kind. Each follows the rule of task
	// ids.
	Kinds []string
}

// Task is a leased task.
type Task struct {
	ID    string
	Queue string
	// Deliveries counts the times the task was dequeued, this one
	// included.
	Deliveries int
	// LeaseUntil is the lease deadline.
	LeaseUntil time.Time
}

// Dequeue leases up to p.Max ready tasks from the first queue that has
// some, moving due delayed tasks and expired leases to ready on the way
// (a bounded number per call). If there is none it blocks, without
// polling Redis, until an Enqueue (or Retry, Release, Sweep) makes one
// ready, a delayed task falls due, a lease expires or PollInterval passes,
// and looks again. It returns ctx.Err() when ctx ends first, and ErrClosed
// after Close.
//
// Once a script has leased tasks they are returned even if ctx ended
// meanwhile, so that a lease is never taken without being reported.
func (q *Queue) Dequeue(ctx context.Context, p DequeueParams) ([]Task, error) {
	order, err := p.order()
	if err != nil {
		return nil, err
	}
	if p.Max == 0 {
		p.Max = 1
	}
	if p.Max < 0 || p.Max > maxBatch {
		return nil, fmt.Errorf("%w: Max %d not in 1..%d", ErrInvalidArgument, p.Max, maxBatch)
	}
	if p.Lease <= 0 {
		return nil, fmt.Errorf("%w: Lease %v is not positive", ErrInvalidArgument, p.Lease)
	}
	for _, kind := range p.Kinds {
		if err := validKind(kind); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	channels := make([]string, len(order))
	for i, name := range order {
		channels[i] = q.keys(name).channel
	}
	if err := q.notifier.subscribe(ctx, channels); err != nil {
		return nil, err
	}
	w := q.notifier.newWaiter(channels, p.Max)
	defer q.notifier.finish(w, "")
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		q.notifier.register(w)
		next := int64(-1)
		for i, name := range order {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			others := q.notifier.look(w, channels[i])
			tasks, left, due, err := q.dequeueFrom(ctx, name, p, others)
			if err != nil {
				return nil, err
			}
			if len(tasks) > 0 {
				chain := ""
				if left > 0 {
					chain = channels[i]
				}
				q.notifier.finish(w, chain)
				return tasks, nil
			}
			if due >= 0 && (next < 0 || due < next) {
				next = due
			}
		}
		wait := q.poll
		if next >= 0 {
			if d := time.UnixMilli(next).Sub(q.now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		q.notifier.setSleeping(w, true)
		select {
		case <-w.ch:
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.notifier.closing:
			return nil, ErrClosed
		}
		q.notifier.setSleeping(w, false)
	}
}

// dequeueFrom runs the dequeue script on one queue. The script runs
// without ctx's cancellation: once it leased tasks, they are reported.
func (q *Queue) dequeueFrom(ctx context.Context, queue string, p DequeueParams, others bool) (tasks []Task, left int64, next int64, err error) {
	k := q.keys(queue)
	now := q.now()
	deadline := now.Add(p.Lease).UnixMilli()
	kinds := q.kindsArg(queue, p.Kinds)
	arm := 0
	if others {
		arm = 1
	}
	conc, rate, per, burst := q.limitArgs(queue)
	keys := []string{k.ready, k.delayed, k.leased, k.index, k.waiting, k.bucket, k.lim}
	args := []any{k.channel, now.UnixMilli(), deadline, p.Max, promoteLimit + p.Max, arm, q.how(),
		conc, rate, per, burst, q.perTaskHint(queue), kinds}
	res, err := q.run(context.WithoutCancel(ctx), scriptDequeue, keys, args...).Slice()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("queue: dequeue from %q: %w", queue, err)
	}
	if len(res) < 3 {
		return nil, 0, 0, fmt.Errorf("queue: dequeue from %q: short reply %v", queue, res)
	}
	next, left = asInt(res[0]), asInt(res[1])
	until := time.UnixMilli(deadline)
	for i := 3; i+1 < len(res); i += 2 {
		tasks = append(tasks, Task{ID: asString(res[i]), Queue: queue, Deliveries: int(asInt(res[i+1])), LeaseUntil: until})
	}
	routed := asInt(res[2]) == 1
	q.routedFlag(queue).Store(routed)
	if routed && kinds == "" && len(p.Kinds) > 0 && len(tasks) == 0 {
		// Routed tasks appeared, and the script was not told the
		// caller's kinds: look again at once, with them.
		next = 0
	}
	return tasks, left, next, nil
}

// order returns the queues to try, in order.
func (p DequeueParams) order() ([]string, error) {
	queues := p.Queues
	if len(queues) == 0 && len(p.Weights) > 0 {
		queues = make([]string, 0, len(p.Weights))
		for name := range p.Weights {
			queues = append(queues, name)
		}
		sort.Strings(queues)
	}
	if len(queues) == 0 {
		return nil, fmt.Errorf("%w: no queues to dequeue from", ErrInvalidArgument)
	}
	for i, name := range queues {
		if err := ValidateQueue(name); err != nil {
			return nil, err
		}
		if slices.Contains(queues[:i], name) {
			return nil, fmt.Errorf("%w: queue %q listed twice", ErrInvalidArgument, name)
		}
	}
	if len(p.Weights) == 0 {
		return queues, nil
	}
	for name := range p.Weights {
		if !slices.Contains(queues, name) {
			return nil, fmt.Errorf("%w: weight for queue %q, which is not in Queues", ErrInvalidArgument, name)
		}
	}
	// Weighted random order without replacement (Efraimidis-Spirakis):
	// sort by u^(1/w), largest first.
	type keyed struct {
		name string
		key  float64
	}
	ks := make([]keyed, len(queues))
	for i, name := range queues {
		w := p.Weights[name]
		if w <= 0 {
			return nil, fmt.Errorf("%w: queue %q has weight %d, want > 0", ErrInvalidArgument, name, w)
		}
		ks[i] = keyed{name, math.Pow(rand.Float64(), 1/float64(w))}
	}
	sort.SliceStable(ks, func(a, b int) bool { return ks[a].key > ks[b].key })
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.name
	}
	return out, nil
}

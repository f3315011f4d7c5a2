package queue

import (
	"context"
	"fmt"
	"time"
)

// Limit is the flow control of one queue, held across every consumer of
// the queue (every process, every node) because it is kept in Redis, in
// the queue's own hash slot. The zero Limit limits nothing and costs
// nothing.
//
// The dequeue script enforces it before it leases: a task over a limit
// stays ready and is not handed out, so it spends no delivery, and the
// consumer sleeps (it does not poll) until a slot frees — an Ack of the
// queue wakes it — or, for the rate, until the next token is due.
type Limit struct {
	// Concurrency is the most tasks of the queue leased at once, 0 for no
	// bound. A lease is a slot: Ack, Retry and Release give it back, and
	// a lease that runs out (its consumer died) gives it back when it is
	// reclaimed by the next Dequeue or Sweep.
	Concurrency int
	// Rate tasks are handed out per Per at most (a token bucket refilled
	// at Rate/Per), 0 for no rate limit.
	Rate int
	// Per is the rate's period, required with Rate (at least 1ms).
	Per time.Duration
	// Burst is the bucket's size: how many tasks may be handed out at
	// once after an idle while. Default 1: tasks are spaced Per/Rate
	// apart, so that any window of length Per holds at most Rate+1.
	Burst int
	// PerTask says that tasks of the queue carry limits of their own
	// (Item.Limit). It is a hint, not a switch: any task may carry a
	// limit, and once one has, every consumer of the queue holds the
	// tasks to theirs (the scripts find the queue's task limit hash in
	// Redis). With the hint they do not look for the hash, one EXISTS
	// less per call.
	PerTask bool
}

// limited reports whether l limits anything.
func (l Limit) limited() bool { return l.Concurrency > 0 || l.Rate > 0 || l.PerTask }

func (l Limit) withDefaults() Limit {
	if l.Rate > 0 && l.Burst == 0 {
		l.Burst = 1
	}
	return l
}

// Validate reports what is wrong with l, naming the queue.
func (l Limit) Validate(queue string) error {
	switch {
	case l.Concurrency < 0:
		return fmt.Errorf("%w: queue %q: Concurrency %d is negative", ErrInvalidConfig, queue, l.Concurrency)
	case l.Rate < 0:
		return fmt.Errorf("%w: queue %q: Rate %d is negative", ErrInvalidConfig, queue, l.Rate)
	case l.Burst < 0:
		return fmt.Errorf("%w: queue %q: Burst %d is negative", ErrInvalidConfig, queue, l.Burst)
	case l.Rate > 0 && l.Per < time.Millisecond:
		return fmt.Errorf("%w: queue %q: Rate %d needs a Per of at least 1ms, got %v", ErrInvalidConfig, queue, l.Rate, l.Per)
	case l.Rate == 0 && (l.Per != 0 || l.Burst != 0):
		return fmt.Errorf("%w: queue %q: Per and Burst need a Rate", ErrInvalidConfig, queue)
	}
	return nil
}

// TaskLimit is a limit a task carries itself (Item.Limit): at most Concurrency tasks with the same Key
// leased at once, and at most Rate tasks with the same RateKey handed out
// per Per (a token bucket of size Burst, default 1). Tasks with the same
// Key share its slots whatever their Concurrency: each is let through
// while fewer than its own Concurrency hold one. A task over its limit
// is parked (see lua/keyed.lua): it does not block the tasks of other
// keys behind it, spends no delivery, and is ready again when a slot of
// its key frees (the longest waiting first) or at its turn for a token
// (the k-th task waiting for a bucket at the k-th token). Every consumer
// of the queue holds the limit, whether or not it was told that the
// queue's tasks carry limits (Limit.PerTask).
type TaskLimit struct {
	// Concurrency is the most tasks of Key leased at once, 0 for none.
	Concurrency int
	// Key names the slots' owner, e.g. a customer id.
	Key string
	// Rate tasks of RateKey are handed out per Per at most, 0 for none.
	Rate int
	// Per is the rate's period, at least 1ms with Rate.
	Per time.Duration
	// Burst is the bucket's size, default 1.
	Burst int
	// RateKey names the token bucket, e.g. a step, or a step and a
	// customer id.
	RateKey string
}

// Validate reports what is wrong with l, naming the task.
func (l TaskLimit) Validate(id string) error {
	switch {
	case l.Concurrency < 0 || l.Rate < 0 || l.Burst < 0:
		return fmt.Errorf("%w: task %q: negative limit %+v", ErrInvalidArgument, id, l)
	case l.Rate > 0 && l.Per < time.Millisecond:
		return fmt.Errorf("%w: task %q: Rate %d needs a Per of at least 1ms, got %v", ErrInvalidArgument, id, l.Rate, l.Per)
	}
	return nil
}

// spec is l as the scripts read it (tspec in lua/keyed.lua).
func (l TaskLimit) spec() string {
	burst := l.Burst
	if burst == 0 {
		burst = 1
	}
	rate := l.Rate
	if rate == 0 {
		burst = 0
	}
	return fmt.Sprintf("%d:%d:%d:%d:%d:%s%s", l.Concurrency, rate, l.Per.Milliseconds(), burst, len(l.Key), l.Key, l.RateKey)
}

// SetPerTask gives queue the PerTask hint (see Limit.PerTask) from now
// on, as if Config.Limits said so: for a process that learns only after
// New that tasks of the queue carry limits (dagflow's engine, when a
// workflow with per-step limits is registered).
func (q *Queue) SetPerTask(queue string) { q.perTask.Store(queue, true) }

// isPerTask reports whether tasks of queue may carry limits.
func (q *Queue) isPerTask(queue string) bool {
	if q.limits[queue].PerTask {
		return true
	}
	_, ok := q.perTask.Load(queue)
	return ok
}

// KeyHeld returns how many tasks of queue hold a slot of the task limit
// key (TaskLimit.Key) now, and how many tasks were parked waiting for one
// (an upper bound: a parked task that left meanwhile is counted until the
// next slot frees).
func (q *Queue) KeyHeld(ctx context.Context, queue, key string) (held, parked int64, err error) {
	if err := ValidateQueue(queue); err != nil {
		return 0, 0, err
	}
	k := q.keys(queue)
	res, err := q.run(ctx, scriptKeyHeld, []string{k.ready, k.leased, k.index}, key).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("queue: key %q of %q: %w", key, queue, err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("queue: key %q of %q: short reply %v", key, queue, res)
	}
	return res[0], res[1], nil
}

// perTaskHint is the scripts' argument that says whether the caller
// knows that tasks of queue carry limits ("1") or lets them look ("0").
func (q *Queue) perTaskHint(queue string) string {
	if q.isPerTask(queue) {
		return "1"
	}
	return "0"
}

// limitArgs are the dequeue script's ARGV[8..11] for queue: concurrency,
// rate, period in ms and burst; all zero when the queue has no limit.
func (q *Queue) limitArgs(queue string) (int, int, int64, int) {
	l, ok := q.limits[queue]
	if !ok {
		return 0, 0, 0, 0
	}
	return l.Concurrency, l.Rate, l.Per.Milliseconds(), l.Burst
}

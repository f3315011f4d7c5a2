package queue

import (
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
}

// limited reports whether l limits anything.
func (l Limit) limited() bool { return l.Concurrency > 0 || l.Rate > 0 }

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

// limitArgs are the dequeue script's ARGV[8..11] for queue: concurrency,
// rate, period in ms and burst; all zero when the queue has no limit.
func (q *Queue) limitArgs(queue string) (int, int, int64, int) {
	l, ok := q.limits[queue]
	if !ok {
		return 0, 0, 0, 0
	}
	return l.Concurrency, l.Rate, l.Per.Milliseconds(), l.Burst
}

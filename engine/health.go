package engine

import (
	"context"
	"sync"
	"time"
)

// redisWarnEvery bounds how often a node logs that Redis fails: an
// unreachable Redis fails every call, and one line per call would bury
// everything else.
const redisWarnEvery = 10 * time.Second

// redisWarnings rate-limits the "Redis fails" warning.
type redisWarnings struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// redisError counts a failed Redis call and logs it at Warn at most once
// every redisWarnEvery, with the number of failures not logged since.
// The store keeps every transition, so a Redis failure delays work (the
// reconciler re-enqueues it) but loses none.
func (e *Engine) redisError(msg string, err error, attrs ...any) {
	e.stats.errors.Add(1)
	e.stats.redisErrors.Add(1)
	w := &e.redisWarn
	now := e.clock.Now()
	w.mu.Lock()
	if !w.last.IsZero() && now.Sub(w.last) < redisWarnEvery {
		w.suppressed++
		w.mu.Unlock()
		return
	}
	suppressed := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	e.log.Warn("redis: "+msg, append(attrs, "err", err, "failures_not_logged", suppressed,
		"redis_errors", e.stats.redisErrors.Load())...)
}

// checkClock compares this node's clock with the database's and records
// the skew. A node whose clock is off by more than MaxClockSkew would
// judge leases and due times wrongly (take over healthy steps, start
// retries and delayed runs early), so it claims nothing, reconciles
// nothing and fires no schedule until its clock is right again. A
// measurement whose round trip is too slow to tell is ignored.
func (e *Engine) checkClock(ctx context.Context) {
	if e.cfg.MaxClockSkew < 0 {
		return
	}
	t0 := e.clock.Now()
	db, err := e.store.Now(ctx)
	t1 := e.clock.Now()
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("clock check: reading the database's clock failed", "err", err)
		}
		return
	}
	rtt := t1.Sub(t0)
	if rtt > e.cfg.MaxClockSkew {
		e.log.Debug("clock check: round trip too slow to measure the skew", "rtt", rtt)
		return
	}
	skew := t0.Add(rtt / 2).Sub(db)
	e.stats.clockSkew.Store(int64(skew))
	off := skew
	if off < 0 {
		off = -off
	}
	// The round trip's half is the measurement's uncertainty.
	skewed := off-rtt/2 > e.cfg.MaxClockSkew
	was := e.stats.clockSkewed.Swap(skewed)
	switch {
	case skewed && !was:
		e.log.Error("this node's clock is off from the database's by more than MaxClockSkew: it claims no steps, reconciles nothing and fires no schedules until the clock is right",
			"skew", skew, "max_clock_skew", e.cfg.MaxClockSkew)
	case !skewed && was:
		e.log.Info("this node's clock agrees with the database's again; claiming steps", "skew", skew)
		e.wakeFetch()
	}
}

// clockSkewed reports whether this node must not claim or reconcile
// because its clock is off.
func (e *Engine) clockSkewed() bool { return e.stats.clockSkewed.Load() }

// clockCheckEvery is how often a node compares its clock with the
// database's (and once at Start).
const clockCheckEvery = 10 * time.Second

// wakeFetch wakes a fetch loop that waits for the clock to be right.
func (e *Engine) wakeFetch() {
	select {
	case e.clockOK <- struct{}{}:
	default:
	}
}

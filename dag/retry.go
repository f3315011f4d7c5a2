package dag

import (
	"fmt"
	"math"
	"time"
)

// NoJitter, as RetryPolicy.Jitter, asks for no jitter at all. (A zero Jitter
// means "inherit the default", like every zero field of a RetryPolicy.)
const NoJitter = -1.0

// RetryPolicy says how often and how fast a failed step is tried again.
//
// Zero fields inherit: a step's policy from the workflow's DefaultRetry,
// the workflow's from [DefaultRetryPolicy]. So Retry(RetryPolicy{MaxAttempts:
// 3}) changes only the number of attempts. After Build, [Step].Retry holds
// the resolved policy with every field set (Jitter in [0, 1]).
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included: 1 means no
	// retry. When attempts run out the step is dead-lettered.
	MaxAttempts int
	// InitialBackoff is the delay before the first retry.
	InitialBackoff time.Duration
	// MaxBackoff caps the delay.
	MaxBackoff time.Duration
	// Multiplier grows the delay after each failure (at least 1).
	Multiplier float64
	// Jitter is the fraction of the delay that is randomised: with jitter j
	// the delay d becomes a value in [d*(1-j), d]. 1 is full jitter, which
	// spreads retries of many runs that failed together. Use [NoJitter] for
	// none.
	Jitter float64
}

// DefaultRetryPolicy is the policy of a step that sets none: 5 attempts,
// 1s then doubling up to 1m, full jitter.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2, Jitter: 1}
}

// inherit fills p's zero fields from base.
func (p RetryPolicy) inherit(base RetryPolicy) RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = base.MaxAttempts
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = base.InitialBackoff
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = base.MaxBackoff
	}
	if p.Multiplier == 0 {
		p.Multiplier = base.Multiplier
	}
	if p.Jitter == 0 {
		p.Jitter = base.Jitter
	}
	return p
}

// resolved turns NoJitter into 0 once inheritance is done.
func (p RetryPolicy) resolved() RetryPolicy {
	if p.Jitter < 0 {
		p.Jitter = 0
	}
	return p
}

// check reports what is out of range in a resolved policy.
func (p RetryPolicy) check() error {
	switch {
	case p.MaxAttempts < 1:
		return fmt.Errorf("max attempts %d, want at least 1", p.MaxAttempts)
	case p.InitialBackoff < 0:
		return fmt.Errorf("initial backoff %s is negative", p.InitialBackoff)
	case p.MaxBackoff < p.InitialBackoff:
		return fmt.Errorf("max backoff %s is less than initial backoff %s", p.MaxBackoff, p.InitialBackoff)
	case math.IsNaN(p.Multiplier) || p.Multiplier < 1:
		return fmt.Errorf("multiplier %v, want at least 1", p.Multiplier)
	case math.IsNaN(p.Jitter) || p.Jitter < 0 || p.Jitter > 1:
		return fmt.Errorf("jitter %v, want between 0 and 1", p.Jitter)
	}
	return nil
}

// Backoff returns the delay before the next attempt after failures failed
// attempts (1 gives the delay before the first retry). rnd is the jitter
// draw in [0, 1) (the caller owns the random source, so tests are
// deterministic).
//
// The undelayed value is InitialBackoff * Multiplier^(failures-1), capped at
// MaxBackoff; with Jitter j the result is d - d*j*rnd, in [d*(1-j), d].
// Out-of-range fields are clamped (failures below 1 count as 1, a
// multiplier below 1 as 1, jitter into [0, 1], rnd into [0, 1)), and a zero
// MaxBackoff means no cap, so Backoff never panics or overflows.
func (p RetryPolicy) Backoff(failures int, rnd float64) time.Duration {
	if failures < 1 {
		failures = 1
	}
	mult := p.Multiplier
	if !(mult >= 1) { // also catches NaN
		mult = 1
	}
	limit := float64(math.MaxInt64)
	if p.MaxBackoff > 0 {
		limit = float64(p.MaxBackoff)
	}
	d := float64(max(p.InitialBackoff, 0)) * math.Pow(mult, float64(failures-1))
	if math.IsNaN(d) || d > limit {
		d = limit
	}
	j := p.Jitter
	if !(j > 0) {
		j = 0
	}
	j = min(j, 1)
	if !(rnd > 0) {
		rnd = 0
	}
	rnd = min(rnd, math.Nextafter(1, 0))
	d -= d * j * rnd
	if d >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

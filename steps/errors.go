package steps

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrPermanent matches every error made by [Permanent]:
// errors.Is(err, ErrPermanent) is the same as [IsPermanent](err).
var ErrPermanent = errors.New("steps: permanent failure")

// PermanentError marks a failure that retrying cannot fix: the engine
// dead-letters the step at once instead of retrying. Build it with
// [Permanent].
type PermanentError struct {
	// Err is the underlying failure; it may be nil.
	Err error
}

// Error returns the underlying error's message (or "steps: permanent
// failure" without one).
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return ErrPermanent.Error()
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrPermanent].
func (e *PermanentError) Is(target error) bool { return target == ErrPermanent }

// Permanent wraps err so that the step is not retried: it is dead-lettered
// now and the run is compensated. The result is never nil, even for a nil
// err (a handler returning Permanent(nil) still fails). It can be wrapped
// further with %w and still be recognised by [IsPermanent].
func Permanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent reports whether err, or an error it wraps, was made by
// [Permanent].
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

// RetryAfterError asks for the next attempt after a given delay instead of
// the step's backoff. The attempt still counts toward the step's maximum.
// Build it with [RetryAfter].
type RetryAfterError struct {
	// Delay is the wait before the next attempt (never negative).
	Delay time.Duration
	// Err is the underlying failure; it may be nil.
	Err error
}

// Error returns the underlying error's message followed by the delay.
func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("steps: retry after %s", e.Delay)
	}
	return fmt.Sprintf("%s (retry after %s)", e.Err.Error(), e.Delay)
}

// Unwrap returns the underlying error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err so that the next attempt waits d (a rate limit's
// Retry-After, a resource known to be busy) instead of the backoff of the
// step's retry policy. The failed attempt still counts: when attempts run
// out the step is dead-lettered as usual. A negative d counts as zero; the
// result is never nil.
func RetryAfter(d time.Duration, err error) error {
	if d < 0 {
		d = 0
	}
	return &RetryAfterError{Delay: d, Err: err}
}

// RetryDelay returns the delay asked for by a [RetryAfter] error in err's
// chain, and whether there is one.
func RetryDelay(err error) (time.Duration, bool) {
	var re *RetryAfterError
	if errors.As(err, &re) {
		return re.Delay, true
	}
	return 0, false
}

// unprefixed returns err's message without its leading "steps: ", for a
// message that already has one.
func unprefixed(err error) string { return strings.TrimPrefix(err.Error(), "steps: ") }

// sentinelError is an error with a message of its own that wraps a
// sentinel for errors.Is without repeating the sentinel's text.
type sentinelError struct {
	msg      string
	sentinel error
}

func (e *sentinelError) Error() string { return e.msg }
func (e *sentinelError) Unwrap() error { return e.sentinel }

// wrapf returns an error reading format (which starts with "steps: ")
// that wraps sentinel.
func wrapf(sentinel error, format string, args ...any) error {
	return &sentinelError{msg: fmt.Sprintf(format, args...), sentinel: sentinel}
}

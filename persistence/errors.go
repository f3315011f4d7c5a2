package persistence

import (
	"errors"
	"fmt"
)

// Sentinel errors. Drivers return them (or typed errors that wrap them) so
// callers can branch with errors.Is.
var (
	ErrRunNotFound         = errors.New("persistence: run not found")
	ErrStepNotFound        = errors.New("persistence: step not found")
	ErrScheduleNotFound    = errors.New("persistence: schedule not found")
	ErrIdempotencyConflict = errors.New("persistence: idempotency key reused with a different input")
	ErrNotClaimable        = errors.New("persistence: step is not claimable")
	ErrFenceMismatch       = errors.New("persistence: fence does not match (lease lost)")
	ErrRunFinished         = errors.New("persistence: run is finished")
	ErrInvalidTransition   = errors.New("persistence: invalid transition")
	ErrTooLarge            = errors.New("persistence: value too large")
	ErrInvalid             = errors.New("persistence: invalid value")
)

// IdempotencyConflictError reports a reused idempotency key whose input
// differs from the stored run's.
type IdempotencyConflictError struct {
	Workflow string
	Key      string
	RunID    string // the existing run
}

func (e *IdempotencyConflictError) Error() string {
	return fmt.Sprintf("persistence: workflow %q: idempotency key %q already used by run %s with a different input",
		e.Workflow, e.Key, e.RunID)
}

// Unwrap makes errors.Is(err, ErrIdempotencyConflict) true.
func (e *IdempotencyConflictError) Unwrap() error { return ErrIdempotencyConflict }

// TransitionError reports a run or step transition that the state machine
// (or the current state) does not allow.
type TransitionError struct {
	RunID string
	Step  string // empty for a run transition
	From  string // the current status
	To    string
}

func (e *TransitionError) Error() string {
	if e.Step != "" {
		return fmt.Sprintf("persistence: run %s step %q: cannot move from %s to %s", e.RunID, e.Step, e.From, e.To)
	}
	return fmt.Sprintf("persistence: run %s: cannot move from %s to %s", e.RunID, e.From, e.To)
}

// Unwrap makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// LimitError reports a value over a configured size limit.
type LimitError struct {
	Field string // e.g. "input", "output", "step \"ship\" output"
	Size  int
	Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("persistence: %s is %d bytes, over the limit of %d", e.Field, e.Size, e.Limit)
}

// Unwrap makes errors.Is(err, ErrTooLarge) true.
func (e *LimitError) Unwrap() error { return ErrTooLarge }

// ValidationError reports a value the store refuses (a bad name, invalid
// JSON, an unknown status).
type ValidationError struct {
	Field  string
	Value  string // possibly truncated
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("persistence: invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

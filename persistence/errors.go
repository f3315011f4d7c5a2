package persistence

import (
	"errors"
	"fmt"
	"time"
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
	ErrDefinitionNotFound  = errors.New("persistence: workflow definition not found")
	ErrAPIKeyNotFound      = errors.New("persistence: API key not found")
	ErrAPIKeyExists        = errors.New("persistence: an API key that is not revoked already has this name")
	ErrEventNotFound       = errors.New("persistence: event not found")
	ErrScheduleExists      = errors.New("persistence: a schedule of this name already exists")
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

// RetryRefusedError reports an operator action on a run (a retry, a rerun
// from a step, a skip) that the run's state does not allow, and why.
type RetryRefusedError struct {
	RunID  string
	Step   string // empty when the action names no step
	Action RunActionKind
	Reason string
}

func (e *RetryRefusedError) Error() string {
	if e.Step != "" {
		return fmt.Sprintf("persistence: run %s step %q: %s refused: %s", e.RunID, e.Step, e.Action, e.Reason)
	}
	return fmt.Sprintf("persistence: run %s: %s refused: %s", e.RunID, e.Action, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidTransition) true.
func (e *RetryRefusedError) Unwrap() error { return ErrInvalidTransition }

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

// ClaimRefusal says why a claim was refused; see ClaimRefusedError.
type ClaimRefusal string

// Why a store refuses a claim. An engine counts each (Stats) and acts on
// some: a step not due yet is tried again at DueAt, never dropped.
const (
	// RefusedNotDue: the step's retry (or the run's delayed start, with
	// RefusedRunPending) is due after the claim's Now; DueAt says when.
	RefusedNotDue ClaimRefusal = "not_due"
	// RefusedOwned: another worker holds the step under a lease that has
	// not expired; DueAt is the lease's end.
	RefusedOwned ClaimRefusal = "owned"
	// RefusedFinished: the step ended (succeeded, skipped, dead,
	// cancelled, compensated...), or its run did.
	RefusedFinished ClaimRefusal = "finished"
	// RefusedNotReady: the step waits for its dependencies, or is in a
	// state the claim's kind (forward or compensation) does not take.
	RefusedNotReady ClaimRefusal = "not_ready"
	// RefusedRunPending: the run has not started; DueAt is its start time.
	RefusedRunPending ClaimRefusal = "run_pending"
	// RefusedRunNotRunning: the run is in a phase (forward or
	// compensating) other than the claim's.
	RefusedRunNotRunning ClaimRefusal = "run_not_running"
	// RefusedDuplicate: the same step was named twice in one batch.
	RefusedDuplicate ClaimRefusal = "duplicate"
	// RefusedNotFound: the step or its run does not exist (deleted by
	// retention, or a task of another database).
	RefusedNotFound ClaimRefusal = "not_found"
	// RefusedUnhandled: the claiming node cannot run the step (the claim's
	// Handles rejected its workflow or step: the node was deployed
	// without it); nothing changed and no attempt was used.
	RefusedUnhandled ClaimRefusal = "unhandled"
	// RefusedRunPaused: the step's run is paused (Store.RunSetPaused);
	// resuming it makes the step claimable again.
	RefusedRunPaused ClaimRefusal = "run_paused"
)

// ClaimRefusedError reports a claim the store refused, with the reason.
// It wraps ErrNotClaimable.
type ClaimRefusedError struct {
	RunID  string
	Step   string
	Reason ClaimRefusal
	// Workflow is the step's workflow (set with RefusedUnhandled).
	Workflow string
	// Status is the step's status (or, for the run reasons, the run's).
	Status string
	// DueAt is when the step (or run) becomes claimable, for
	// RefusedNotDue, RefusedRunPending and RefusedOwned; zero otherwise.
	DueAt time.Time
}

func (e *ClaimRefusedError) Error() string {
	switch e.Reason {
	case RefusedUnhandled:
		return fmt.Sprintf("persistence: step is not claimable: run %s step %q of workflow %q: the claiming node cannot run it (%s)", e.RunID, e.Step, e.Workflow, e.Reason)
	case RefusedRunPending, RefusedRunNotRunning:
		return fmt.Sprintf("persistence: step is not claimable: run %s step %q: run is %s (%s)", e.RunID, e.Step, e.Status, e.Reason)
	}
	if !e.DueAt.IsZero() {
		return fmt.Sprintf("persistence: step is not claimable: run %s step %q is %s (%s until %s)", e.RunID, e.Step, e.Status, e.Reason, e.DueAt.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("persistence: step is not claimable: run %s step %q is %s (%s)", e.RunID, e.Step, e.Status, e.Reason)
}

// Unwrap makes errors.Is(err, ErrNotClaimable) true.
func (e *ClaimRefusedError) Unwrap() error { return ErrNotClaimable }

// RefusalOf returns the reason of a refused claim: the ClaimRefusedError's,
// "not_found" for ErrStepNotFound or ErrRunNotFound, or "" for any other
// error.
func RefusalOf(err error) ClaimRefusal {
	var ce *ClaimRefusedError
	switch {
	case errors.As(err, &ce):
		return ce.Reason
	case errors.Is(err, ErrStepNotFound), errors.Is(err, ErrRunNotFound):
		return RefusedNotFound
	case errors.Is(err, ErrRunFinished):
		return RefusedRunNotRunning
	case errors.Is(err, ErrNotClaimable):
		return RefusedNotReady
	}
	return ""
}

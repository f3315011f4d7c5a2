package engine

import (
	"errors"
	"fmt"

	"github.com/dagflow/dagflow/internal/clip"
)

// Errors callers branch on.
var (
	// ErrStopped is returned by calls made after Stop.
	ErrStopped = errors.New("engine: stopped")
	// ErrUnknownWorkflow is returned for a workflow that was not registered.
	ErrUnknownWorkflow = errors.New("engine: unknown workflow")
	// ErrDuplicateWorkflow is returned when a workflow name is registered twice.
	ErrDuplicateWorkflow = errors.New("engine: workflow already registered")
	// ErrRetryRefused is returned when the run's state refuses an
	// operator action (a retry, a rerun or a skip): see RetryRefusedError.
	ErrRetryRefused = errors.New("engine: retry refused")
	// ErrInvalidInput is returned for an input that is not valid JSON,
	// or that does not match the workflow's input schema
	// (dag.InputSchema; the error then wraps a *dag.InputError too).
	ErrInvalidInput = errors.New("engine: invalid input")
	// ErrReservedKey is wrapped by the *ReservedKeyError of an
	// idempotency key starting with one of ReservedKeyPrefixes: those
	// are the keys of the runs dagflow starts itself (children, events,
	// schedule ticks), so a caller's run can never take one's place.
	ErrReservedKey = errors.New("engine: reserved idempotency key")
	// ErrInvalidPriority is returned for a run priority outside
	// MinPriority..MaxPriority.
	ErrInvalidPriority = errors.New("engine: invalid priority")
	// ErrInvalidQueue is returned for a queue name that is not a dagflow
	// name (PauseQueue, ResumeQueue).
	ErrInvalidQueue = errors.New("engine: invalid queue name")
	// ErrAlreadyStarted is returned by a second Start.
	ErrAlreadyStarted = errors.New("engine: already started")
	// ErrNoTx is returned by DB and TriggerTx when the store does not
	// take caller transactions (it is not a persistence.TxStore).
	ErrNoTx = errors.New("engine: the store does not support caller transactions")
)

// WorkflowError names the workflow an error is about.
type WorkflowError struct {
	Workflow string
	Err      error
}

func (e *WorkflowError) Error() string {
	return fmt.Sprintf("%v: %q", e.Err, clip.String(e.Workflow))
}

// Unwrap returns the sentinel.
func (e *WorkflowError) Unwrap() error { return e.Err }

// RetryRefusedError says why a dead step (RetryDead), a run's dead
// steps (RetryRun, Step empty), a rerun (RetryFrom) or a skip (SkipStep)
// is refused, and, where another action would do, which: a compensated
// run's refusal says to rerun it from a step.
type RetryRefusedError struct {
	RunID  string
	Step   string
	Reason string
}

func (e *RetryRefusedError) Error() string {
	if e.Step == "" {
		return fmt.Sprintf("engine: run %s: retry refused: %s", e.RunID, e.Reason)
	}
	return fmt.Sprintf("engine: run %s step %q: retry refused: %s", e.RunID, e.Step, e.Reason)
}

// Unwrap makes errors.Is(err, ErrRetryRefused) true.
func (e *RetryRefusedError) Unwrap() error { return ErrRetryRefused }

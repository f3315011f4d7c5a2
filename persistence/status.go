package persistence

import (
	"slices"
	"strings"
)

// RunStatus is the state of a workflow run.
//
//	pending -> running -> succeeded
//	running -> compensating -> compensated
//	running|compensating -> failed
//	any unfinished -> cancelled
type RunStatus string

// Run statuses.
const (
	RunPending      RunStatus = "pending"
	RunRunning      RunStatus = "running"
	RunSucceeded    RunStatus = "succeeded"
	RunCompensating RunStatus = "compensating"
	RunCompensated  RunStatus = "compensated"
	RunFailed       RunStatus = "failed"
	RunCancelled    RunStatus = "cancelled"
)

// Terminal reports whether a run in this status never changes again.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunSucceeded, RunCompensated, RunFailed, RunCancelled:
		return true
	}
	return false
}

// runStatuses are the run statuses, in the order of a run's life.
var runStatuses = []RunStatus{RunPending, RunRunning, RunSucceeded, RunCompensating, RunCompensated, RunFailed, RunCancelled}

// RunStatuses returns the defined run statuses, in the order of a run's
// life: the values a status filter accepts. The slice is the caller's.
func RunStatuses() []RunStatus { return append([]RunStatus(nil), runStatuses...) }

// RunStatusList is the run statuses, comma-separated, for a message
// that lists the valid values.
func RunStatusList() string {
	names := make([]string, len(runStatuses))
	for i, s := range runStatuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Valid reports whether s is one of the defined run statuses.
func (s RunStatus) Valid() bool { return slices.Contains(runStatuses, s) }

// ActionRefusal is the one rule of which operator actions a run in
// this status takes: it returns why action (ActionRetry of its failed
// steps or of one dead step, ActionRerun from a step, ActionSkip of a
// dead step) is refused, or "" when the status allows it. The store
// applies it under the run's lock (besides the rules about the run's
// steps, such as a compensation that failed); a caller may ask it first
// to offer only the actions that can succeed.
//
// A compensated run's completed steps were undone: retrying its failed
// steps, or skipping one, would go on from work that no longer exists,
// so only a rerun from a step (which runs the undone steps again too)
// resumes it.
func (s RunStatus) ActionRefusal(action RunActionKind) string {
	switch s {
	case RunFailed:
		return ""
	case RunCompensated:
		if action == ActionRerun {
			return ""
		}
		verb := "retrying its failed steps"
		if action == ActionSkip {
			verb = "skipping a step"
		}
		return "run compensated: its completed steps were undone; rerun it from a step instead (" + verb +
			" would go on from undone work)"
	case RunSucceeded:
		switch action {
		case ActionSkip:
			return "run succeeded: no step is dead"
		case ActionRetry:
			return "run succeeded: nothing failed (a rerun from a step runs it again)"
		}
		return ""
	case RunCancelled:
		return "run was cancelled: trigger a new run"
	}
	return "run is " + string(s) + ": only a finished run can be retried"
}

// StepStatus is the state of one step of a run.
//
//	waiting -> queued -> running -> succeeded
//	running -> retrying -> (claimed again) running
//	running -> dead
//	waiting|queued -> skipped
//	running -> parked (a wait or sleep step, once claimed: no lease, no task)
//	parked -> succeeded (event matched, signal, timer fired)
//	parked -> retrying | dead (a wait's timeout)
//	succeeded -> compensating -> compensated | compensation_failed
//	waiting|queued|retrying|parked -> cancelled
type StepStatus string

// Step statuses.
const (
	StepWaiting            StepStatus = "waiting"
	StepQueued             StepStatus = "queued"
	StepRunning            StepStatus = "running"
	StepRetrying           StepStatus = "retrying"
	StepSucceeded          StepStatus = "succeeded"
	StepDead               StepStatus = "dead"
	StepSkipped            StepStatus = "skipped"
	StepCompensating       StepStatus = "compensating"
	StepCompensated        StepStatus = "compensated"
	StepCompensationFailed StepStatus = "compensation_failed"
	StepCancelled          StepStatus = "cancelled"
	// StepParked is a wait or sleep step waiting for its event, signal
	// or timer: a row and nothing else (no worker slot, lease or task).
	StepParked StepStatus = "parked"
)

// Valid reports whether s is one of the defined step statuses.
func (s StepStatus) Valid() bool {
	switch s {
	case StepWaiting, StepQueued, StepRunning, StepRetrying, StepSucceeded, StepDead,
		StepSkipped, StepCompensating, StepCompensated, StepCompensationFailed, StepCancelled, StepParked:
		return true
	}
	return false
}

// Done reports whether the step counts as finished for its dependents:
// succeeded or skipped.
func (s StepStatus) Done() bool { return s == StepSucceeded || s == StepSkipped }

// Pending reports whether the step has not started its forward execution
// yet, or is parked, and can still be cancelled: waiting, queued,
// retrying or parked.
func (s StepStatus) Pending() bool {
	return s == StepWaiting || s == StepQueued || s == StepRetrying || s == StepParked
}

// CancellableSteps are the step statuses a cancelled or failed run
// cancels: those of Pending.
var CancellableSteps = []StepStatus{StepWaiting, StepQueued, StepRetrying, StepParked}

// AttemptKind says whether an attempt ran a step's handler or its
// compensation.
type AttemptKind string

// Attempt kinds.
const (
	AttemptForward      AttemptKind = "step"
	AttemptCompensation AttemptKind = "compensation"
)

// AttemptOutcome is how an attempt ended.
type AttemptOutcome string

// Attempt outcomes. An attempt whose worker vanished stays running until a
// takeover marks it lost; one aborted by a step transition (its run was
// cancelled or began compensating) stays running in the history.
const (
	OutcomeRunning   AttemptOutcome = "running"
	OutcomeSucceeded AttemptOutcome = "succeeded"
	OutcomeFailed    AttemptOutcome = "failed"
	OutcomeSkipped   AttemptOutcome = "skipped"
	OutcomeLost      AttemptOutcome = "lost"
)

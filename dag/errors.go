package dag

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors wrapped by *[DefinitionError]; branch on them with
// errors.Is. Like every error of the package, their text starts with
// "dag: "; the messages that wrap them name the workflow, the step and the
// value instead of repeating it.
var (
	ErrCycle             = errors.New("dag: dependency cycle")
	ErrSelfDependency    = errors.New("dag: step depends on itself")
	ErrUnknownDependency = errors.New("dag: unknown dependency")
	ErrDuplicateStep     = errors.New("dag: duplicate step")
	ErrEmptyWorkflow     = errors.New("dag: workflow has no steps")
	ErrInvalidName       = errors.New("dag: invalid name")
	ErrTooManySteps      = errors.New("dag: too many steps")
	ErrBadCondition      = errors.New("dag: bad when condition")
	// ErrStepWithoutHandler reports a step declared with a nil handler or
	// a nil compensation handler.
	ErrStepWithoutHandler = errors.New("dag: nil handler")
	// ErrInvalidOption reports a retry policy, timeout or version out of
	// range (negative durations, jitter above 1, a multiplier below 1...).
	ErrInvalidOption = errors.New("dag: invalid option")
	// ErrUnknownHandler reports a YAML step naming a handler that is not in
	// the registry.
	ErrUnknownHandler = errors.New("dag: unknown handler")
	// ErrEvalCondition is wrapped by the errors of [Step.EvalWhen]: the
	// condition compiled but failed on this run's data.
	ErrEvalCondition = errors.New("dag: when condition failed")
)

// prefix starts every message of the package.
const prefix = "dag: "

// unprefixed returns err's message without its leading "dag: ", for a
// message that already has one.
func unprefixed(err error) string { return strings.TrimPrefix(err.Error(), prefix) }

// sentinelError is an error with a message of its own that wraps a
// sentinel for errors.Is without repeating the sentinel's text.
type sentinelError struct {
	msg      string
	sentinel error
}

func (e *sentinelError) Error() string { return e.msg }
func (e *sentinelError) Unwrap() error { return e.sentinel }

// DefinitionError is one problem found while building a workflow. Its
// message names the workflow, the step (when there is one) and the
// problem, like
//
//	dag: workflow "order": step "ship" depends on unknown step "pack"
//
// Err is one of the sentinels above (or wraps one), so errors.Is works.
type DefinitionError struct {
	Workflow string
	Step     string // empty for workflow-level problems
	Reason   string // the human part of the message
	Err      error  // a sentinel such as ErrCycle
}

// Error returns `dag: workflow "<name>": <reason>`.
func (e *DefinitionError) Error() string {
	return fmt.Sprintf("dag: workflow %q: %s", e.Workflow, e.Reason)
}

// Unwrap returns the sentinel.
func (e *DefinitionError) Unwrap() error { return e.Err }

// Deprecated names, kept so code written against them still builds. They
// are the same values and types as the new names, so errors.Is and
// errors.As match either. The new names do not clash with the engine's,
// the steps package's and the persistence package's.
var (
	// Deprecated: use [ErrStepWithoutHandler].
	ErrNilHandler = ErrStepWithoutHandler
	// Deprecated: use [ErrWorkflowDefinedTwice].
	ErrDuplicateWorkflow = ErrWorkflowDefinedTwice
)

// Deprecated: use [DefinitionError].
type ValidationError = DefinitionError

// YAMLError is a problem in a YAML workflow file, located by file, line and
// column. Field is the offending key path (like "steps[2].retry.jitter")
// when there is one. Err is the cause: often a *[DefinitionError] (the
// workflow loaded but did not validate) or a sentinel.
type YAMLError struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int // 1-based; 0 when unknown
	Field  string
	Err    error

	// ours is set by this package's loaders: their errors start with
	// "dag: ", like every error of the package. A YAMLError made
	// elsewhere (another package's loader reusing the type) starts with
	// its location.
	ours bool
}

// Error returns "dag: <file>:<line>:<column>: <field>: <cause>", leaving
// out what is unknown, like
//
//	dag: order.yaml:12:12: steps[1].after: workflow "order": step "ship" depends on unknown step "pack"
//
// The cause's own "dag: " is not repeated. A YAMLError made outside this
// package has no "dag: " in front.
func (e *YAMLError) Error() string {
	loc := e.File
	if loc == "" {
		loc = "<yaml>"
	}
	switch {
	case e.Line > 0 && e.Column > 0:
		loc = fmt.Sprintf("%s:%d:%d", loc, e.Line, e.Column)
	case e.Line > 0:
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	if e.ours {
		loc = prefix + loc
	}
	cause := "<nil>"
	if e.Err != nil {
		cause = unprefixed(e.Err)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, cause)
	}
	return fmt.Sprintf("%s: %s", loc, cause)
}

// Unwrap returns the cause.
func (e *YAMLError) Unwrap() error { return e.Err }

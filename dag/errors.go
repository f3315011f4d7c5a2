package dag

import (
	"errors"
	"fmt"
)

// Sentinel errors wrapped by *[ValidationError]; branch on them with
// errors.Is.
var (
	ErrCycle             = errors.New("dependency cycle")
	ErrSelfDependency    = errors.New("step depends on itself")
	ErrUnknownDependency = errors.New("unknown dependency")
	ErrDuplicateStep     = errors.New("duplicate step")
	ErrEmptyWorkflow     = errors.New("workflow has no steps")
	ErrInvalidName       = errors.New("invalid name")
	ErrTooManySteps      = errors.New("too many steps")
	ErrBadCondition      = errors.New("bad when condition")
	ErrNilHandler        = errors.New("nil handler")
	// ErrInvalidOption reports a retry policy, timeout or version out of
	// range (negative durations, jitter above 1, a multiplier below 1...).
	ErrInvalidOption = errors.New("invalid option")
	// ErrUnknownHandler reports a YAML step naming a handler that is not in
	// the registry.
	ErrUnknownHandler = errors.New("unknown handler")
	// ErrEvalCondition is wrapped by the errors of [Step.EvalWhen]: the
	// condition compiled but failed on this run's data.
	ErrEvalCondition = errors.New("when condition failed")
)

// ValidationError is one problem found while building a workflow. Its
// message names the workflow, the step (when there is one) and the
// problem, like
//
//	dag: workflow "order": step "ship" depends on unknown step "pack"
//
// Err is one of the sentinels above (or wraps one), so errors.Is works.
type ValidationError struct {
	Workflow string
	Step     string // empty for workflow-level problems
	Reason   string // the human part of the message
	Err      error  // a sentinel such as ErrCycle
}

// Error returns `dag: workflow "<name>": <reason>`.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("dag: workflow %q: %s", e.Workflow, e.Reason)
}

// Unwrap returns the sentinel.
func (e *ValidationError) Unwrap() error { return e.Err }

// YAMLError is a problem in a YAML workflow file, located by file, line and
// column. Field is the offending key path (like "steps[2].retry.jitter")
// when there is one. Err is the cause: often a *[ValidationError] (the
// workflow loaded but did not validate) or a sentinel.
type YAMLError struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int // 1-based; 0 when unknown
	Field  string
	Err    error
}

// Error returns "<file>:<line>:<column>: <field>: <cause>", leaving out
// what is unknown.
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
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %v", loc, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: %v", loc, e.Err)
}

// Unwrap returns the cause.
func (e *YAMLError) Unwrap() error { return e.Err }

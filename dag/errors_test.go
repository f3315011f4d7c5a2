package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/dag"
)

// TestErrorStyle pins the message style of the package's errors: one
// "dag: " in front and nowhere else, the offending name or value named
// once, and the sentinel reachable with errors.Is.
func TestErrorStyle(t *testing.T) {
	build := func(b *dag.Builder) error {
		_, err := b.Build()
		return err
	}
	eval := func() error {
		w, err := dag.New("order").Step("points", noop, dag.When("input.total >= 100")).Build()
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.Step("points").EvalWhen(context.Background(), json.RawMessage(`{"total":"many"}`), nil)
		return err
	}
	loadYAML := func(src string) error {
		_, err := dag.LoadYAML([]byte(src), "order.yaml", registry(t))
		return err
	}
	tests := []struct {
		name  string
		err   error
		is    error
		value string // named exactly once
	}{
		{"cycle", build(dag.New("order").Step("reserve", noop, dag.After("ship")).Step("ship", noop, dag.After("reserve"))),
			dag.ErrCycle, "reserve -> ship -> reserve"},
		{"unknown dependency", build(dag.New("order").Step("ship", noop, dag.After("pack"))),
			dag.ErrUnknownDependency, `"pack"`},
		{"invalid name", build(dag.New("order").Step("ship:{eu}", noop)),
			dag.ErrInvalidName, `"ship:{eu}"`},
		{"invalid retry policy", build(dag.New("order").Step("ship", noop, dag.Retry(dag.RetryPolicy{Jitter: 1.5}))),
			dag.ErrInvalidOption, "jitter 1.5"},
		{"when fails on the data", eval(), dag.ErrEvalCondition, `"input.total >= 100"`},
		{"YAML unknown field", loadYAML("name: order\ntimeout: 3s\nsteps:\n  - {name: a, handler: order.ship}\n"),
			dag.ErrUnknownField, "timeout"},
		{"YAML unknown dependency", loadYAML("name: order\nsteps:\n  - {name: ship, handler: order.ship, after: pack}\n"),
			dag.ErrUnknownDependency, `"pack"`},
		{"YAML unknown handler", loadYAML("name: order\nsteps:\n  - {name: a, handler: order.pack}\n"),
			dag.ErrUnknownHandler, `"order.pack"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("no error")
			}
			msg := tt.err.Error()
			if !strings.HasPrefix(msg, "dag: ") || strings.Count(msg, "dag: ") != 1 {
				t.Errorf("%q: want one \"dag: \", in front", msg)
			}
			if n := strings.Count(msg, tt.value); n != 1 {
				t.Errorf("%q names %s %d times, want once", msg, tt.value, n)
			}
			if !errors.Is(tt.err, tt.is) {
				t.Errorf("errors.Is(%q, %q) = false", msg, tt.is)
			}
		})
	}

	for _, s := range []error{dag.ErrCycle, dag.ErrSelfDependency, dag.ErrUnknownDependency, dag.ErrDuplicateStep,
		dag.ErrEmptyWorkflow, dag.ErrInvalidName, dag.ErrTooManySteps, dag.ErrBadCondition, dag.ErrStepWithoutHandler,
		dag.ErrInvalidOption, dag.ErrUnknownHandler, dag.ErrEvalCondition, dag.ErrUnknownField,
		dag.ErrMissingField, dag.ErrWorkflowDefinedTwice} {
		if !strings.HasPrefix(s.Error(), "dag: ") {
			t.Errorf("sentinel %q does not start with \"dag: \"", s)
		}
	}
}

// A YAMLError made outside the package keeps its location first and does
// not repeat the "dag: " of a dag sentinel it wraps.
func TestYAMLErrorMadeElsewhere(t *testing.T) {
	err := &dag.YAMLError{File: "schedules.yaml", Line: 2, Column: 5, Field: "schedules[0].spec", Err: dag.ErrMissingField}
	if got, want := err.Error(), "schedules.yaml:2:5: schedules[0].spec: missing field"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// The deprecated names are the new ones: errors.Is and errors.As match
// either, whichever the caller and the package use.
func TestDeprecatedNames(t *testing.T) {
	if !errors.Is(dag.ErrStepWithoutHandler, dag.ErrNilHandler) {
		t.Error("errors.Is(ErrStepWithoutHandler, ErrNilHandler) = false")
	}
	if !errors.Is(dag.ErrWorkflowDefinedTwice, dag.ErrDuplicateWorkflow) {
		t.Error("errors.Is(ErrWorkflowDefinedTwice, ErrDuplicateWorkflow) = false")
	}
	var err error = &dag.DefinitionError{Workflow: "order", Reason: "r", Err: dag.ErrCycle}
	var old *dag.ValidationError
	if !errors.As(err, &old) || old.Workflow != "order" {
		t.Errorf("errors.As(*DefinitionError, **ValidationError) = false or lost the workflow (%v)", old)
	}
}

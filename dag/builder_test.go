package dag_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

func TestBuildValidationErrors(t *testing.T) {
	tooMany := dag.New("big")
	for i := range dag.MaxSteps + 1 {
		tooMany.Step(fmt.Sprintf("s%d", i), noop)
	}
	exactly := dag.New("full")
	for i := range dag.MaxSteps {
		exactly.Step(fmt.Sprintf("s%d", i), noop)
	}
	if _, err := exactly.Build(); err != nil {
		t.Fatalf("a workflow of MaxSteps steps: %v", err)
	}

	tests := []struct {
		name     string
		b        *dag.Builder
		wantIs   error
		wantStep string
		wantMsg  string
	}{
		{
			name: "unknown dependency", wantIs: dag.ErrUnknownDependency, wantStep: "ship",
			b:       dag.New("order").Step("reserve", noop).Step("ship", noop, dag.After("pack")),
			wantMsg: `dag: workflow "order": step "ship" depends on unknown step "pack"`,
		},
		{
			name: "self dependency", wantIs: dag.ErrSelfDependency, wantStep: "ship",
			b:       dag.New("order").Step("ship", noop, dag.Needs("ship")),
			wantMsg: `dag: workflow "order": step "ship" depends on itself`,
		},
		{
			name: "two step cycle", wantIs: dag.ErrCycle, wantStep: "reserve",
			b: dag.New("order").
				Step("reserve", noop, dag.After("ship")).
				Step("ship", noop, dag.After("reserve")),
			wantMsg: `dag: workflow "order": dependency cycle: reserve -> ship -> reserve`,
		},
		{
			name: "longer cycle starts at the first declared step", wantIs: dag.ErrCycle, wantStep: "b",
			b: dag.New("loop").
				Step("a", noop).
				Step("b", noop, dag.After("a", "d")).
				Step("c", noop, dag.After("b")).
				Step("d", noop, dag.After("c")),
			wantMsg: `dag: workflow "loop": dependency cycle: b -> c -> d -> b`,
		},
		{
			name: "duplicate step", wantIs: dag.ErrDuplicateStep, wantStep: "ship",
			b:       dag.New("order").Step("ship", noop).Step("ship", noop),
			wantMsg: `dag: workflow "order": step "ship" declared twice`,
		},
		{
			name: "empty workflow", wantIs: dag.ErrEmptyWorkflow,
			b:       dag.New("order"),
			wantMsg: `dag: workflow "order": no steps`,
		},
		{
			name: "invalid workflow name", wantIs: dag.ErrInvalidName,
			b:       dag.New("order/v2").Step("ship", noop),
			wantMsg: `dag: workflow "order/v2": invalid workflow name "order/v2" (want a letter followed by up to 63 letters, digits, '_' or '-')`,
		},
		{
			name: "workflow name too long", wantIs: dag.ErrInvalidName,
			b:       dag.New(strings.Repeat("w", 65)).Step("ship", noop),
			wantMsg: fmt.Sprintf(`dag: workflow %[1]q: invalid workflow name %[1]q (want a letter followed by up to 63 letters, digits, '_' or '-')`, strings.Repeat("w", 65)),
		},
		{
			name: "invalid step name", wantIs: dag.ErrInvalidName, wantStep: "ship:{eu}",
			b:       dag.New("order").Step("ship:{eu}", noop),
			wantMsg: `dag: workflow "order": invalid step name "ship:{eu}" (want a letter followed by up to 63 letters, digits, '_' or '-')`,
		},
		{
			name: "step name starting with a digit", wantIs: dag.ErrInvalidName, wantStep: "1ship",
			b:       dag.New("order").Step("1ship", noop),
			wantMsg: `dag: workflow "order": invalid step name "1ship" (want a letter followed by up to 63 letters, digits, '_' or '-')`,
		},
		{
			name: "invalid queue name", wantIs: dag.ErrInvalidName, wantStep: "ship",
			b:       dag.New("order").Step("ship", noop, dag.Queue("slow queue")),
			wantMsg: `dag: workflow "order": step "ship": invalid queue name "slow queue" (want a letter followed by up to 63 letters, digits, '_' or '-')`,
		},
		{
			name: "invalid default queue name", wantIs: dag.ErrInvalidName,
			b:       dag.New("order", dag.DefaultQueue("{q}")).Step("ship", noop),
			wantMsg: `dag: workflow "order": invalid default queue name "{q}" (want a letter followed by up to 63 letters, digits, '_' or '-')`,
		},
		{
			name: "too many steps", wantIs: dag.ErrTooManySteps,
			b:       tooMany,
			wantMsg: `dag: workflow "big": 257 steps, more than the limit of 256`,
		},
		{
			name: "condition does not compile", wantIs: dag.ErrBadCondition, wantStep: "points",
			b:       dag.New("order").Step("points", noop, dag.When("input.total >=")),
			wantMsg: `dag: workflow "order": step "points": when "input.total >=" does not compile: unexpected token EOF (1:14)`,
		},
		{
			name: "condition with unknown variable", wantIs: dag.ErrBadCondition, wantStep: "points",
			b:       dag.New("order").Step("points", noop, dag.When("order.total > 1")),
			wantMsg: `dag: workflow "order": step "points": when "order.total > 1" does not compile: unknown name order (1:1)`,
		},
		{
			name: "condition reading a step that is not upstream", wantIs: dag.ErrBadCondition, wantStep: "points",
			b: dag.New("order").Step("reserve", noop).Step("ship", noop).
				Step("points", noop, dag.After("reserve"), dag.When(`steps.ship.output.ok == true`)),
			wantMsg: `dag: workflow "order": step "points": when "steps.ship.output.ok == true" refers to step "ship", which is not upstream of "points"`,
		},
		{
			name: "nil handler", wantIs: dag.ErrStepWithoutHandler, wantStep: "ship",
			b:       dag.New("order").Step("ship", nil),
			wantMsg: `dag: workflow "order": step "ship": nil handler`,
		},
		{
			name: "nil HandlerFunc", wantIs: dag.ErrStepWithoutHandler, wantStep: "ship",
			b:       dag.New("order").Step("ship", steps.HandlerFunc(nil)),
			wantMsg: `dag: workflow "order": step "ship": nil handler`,
		},
		{
			name: "nil compensation", wantIs: dag.ErrStepWithoutHandler, wantStep: "ship",
			b:       dag.New("order").Step("ship", noop, dag.Compensate(nil)),
			wantMsg: `dag: workflow "order": step "ship": nil compensation handler`,
		},
		{
			name: "bad jitter", wantIs: dag.ErrInvalidOption, wantStep: "ship",
			b:       dag.New("order").Step("ship", noop, dag.Retry(dag.RetryPolicy{Jitter: 1.5})),
			wantMsg: `dag: workflow "order": step "ship": retry policy: jitter 1.5, want between 0 and 1`,
		},
		{
			name: "bad max attempts", wantIs: dag.ErrInvalidOption, wantStep: "ship",
			b:       dag.New("order").Step("ship", noop, dag.Retry(dag.RetryPolicy{MaxAttempts: -1})),
			wantMsg: `dag: workflow "order": step "ship": retry policy: max attempts -1, want at least 1`,
		},
		{
			name: "max backoff below initial", wantIs: dag.ErrInvalidOption, wantStep: "ship",
			b:       dag.New("order").Step("ship", noop, dag.Retry(dag.RetryPolicy{InitialBackoff: 2 * time.Minute})),
			wantMsg: `dag: workflow "order": step "ship": retry policy: max backoff 1m0s is less than initial backoff 2m0s`,
		},
		{
			name: "multiplier below one", wantIs: dag.ErrInvalidOption,
			b:       dag.New("order", dag.DefaultRetry(dag.RetryPolicy{Multiplier: 0.5})).Step("ship", noop),
			wantMsg: `dag: workflow "order": default retry policy: multiplier 0.5, want at least 1`,
		},
		{
			name: "negative timeout", wantIs: dag.ErrInvalidOption, wantStep: "ship",
			b:       dag.New("order").Step("ship", noop, dag.Timeout(-time.Second)),
			wantMsg: `dag: workflow "order": step "ship": timeout -1s is negative`,
		},
		{
			name: "negative version", wantIs: dag.ErrInvalidOption,
			b:       dag.New("order", dag.Version(-2)).Step("ship", noop),
			wantMsg: `dag: workflow "order": version -2, want at least 1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := tt.b.Build()
			if err == nil {
				t.Fatalf("Build() = %v, nil; want error %q", w, tt.wantMsg)
			}
			if w != nil {
				t.Errorf("Build() returned a workflow with an error")
			}
			if got := err.Error(); got != tt.wantMsg {
				t.Errorf("Build() error\n got: %s\nwant: %s", got, tt.wantMsg)
			}
			if !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(err, %v) = false", tt.wantIs)
			}
			var ve *dag.DefinitionError
			if !errors.As(err, &ve) {
				t.Fatalf("errors.As(err, *DefinitionError) = false for %T", err)
			}
			if ve.Step != tt.wantStep {
				t.Errorf("DefinitionError.Step = %q, want %q", ve.Step, tt.wantStep)
			}
		})
	}
}

func TestBuildReportsEveryProblem(t *testing.T) {
	_, err := dag.New("order").
		Step("reserve", nil).
		Step("ship", noop, dag.After("pack")).
		Step("ship", noop).
		Build()
	want := strings.Join([]string{
		`dag: workflow "order": step "reserve": nil handler`,
		`dag: workflow "order": step "ship" declared twice`,
		`dag: workflow "order": step "ship" depends on unknown step "pack"`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("Build() error\n got: %v\nwant: %s", err, want)
	}
	for _, target := range []error{dag.ErrStepWithoutHandler, dag.ErrDuplicateStep, dag.ErrUnknownDependency} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(err, %v) = false", target)
		}
	}
}

func TestBuildResolvesDefaults(t *testing.T) {
	w, err := orderWorkflow().Build()
	if err != nil {
		t.Fatal(err)
	}
	type plan struct {
		Deps, Needs []string
		Retry       dag.RetryPolicy
		Timeout     time.Duration
		Queue, When string
		Compensable bool
	}
	got := map[string]plan{}
	for _, s := range w.Steps() {
		got[s.Name] = plan{s.Deps, s.Needs, s.Retry, s.Timeout, s.Queue, s.When, s.Compensation != nil}
	}
	def := dag.DefaultRetryPolicy()
	want := map[string]plan{
		"reserve": {Retry: def, Timeout: 10 * time.Second, Queue: "default", Compensable: true},
		"notify": {Deps: []string{"reserve"}, Timeout: 30 * time.Second, Queue: "mail",
			Retry: dag.RetryPolicy{MaxAttempts: 10, InitialBackoff: 5 * time.Second, MaxBackoff: 10 * time.Minute, Multiplier: 2, Jitter: 1}},
		"points": {Deps: []string{"reserve"}, Retry: def, Timeout: 30 * time.Second, Queue: "default", When: "input.total >= 100", Compensable: true},
		"ship": {Deps: []string{"reserve", "notify", "points"}, Needs: []string{"reserve"}, Timeout: 2 * time.Minute, Queue: "default",
			Retry: dag.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2, Jitter: 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolved steps mismatch (-want +got):\n%s", diff)
	}
	if got, want := w.Name(), "order"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	if got, want := w.Version(), 1; got != want {
		t.Errorf("Version() = %d, want %d", got, want)
	}
	if w.Step("pack") != nil {
		t.Error(`Step("pack") should be nil`)
	}
}

func TestBuildZeroConfigDefaults(t *testing.T) {
	w, err := dag.New("tiny").Step("only", noop).Build()
	if err != nil {
		t.Fatal(err)
	}
	s := w.Step("only")
	if diff := cmp.Diff(dag.DefaultRetryPolicy(), s.Retry); diff != "" {
		t.Errorf("Retry mismatch (-want +got):\n%s", diff)
	}
	if s.Timeout != dag.DefaultStepTimeout || s.Queue != dag.DefaultQueueName || w.Version() != 1 {
		t.Errorf("Timeout, Queue, Version = %v, %q, %d; want %v, %q, 1", s.Timeout, s.Queue, w.Version(), dag.DefaultStepTimeout, dag.DefaultQueueName)
	}
}

func TestNoJitter(t *testing.T) {
	w, err := dag.New("w").Step("s", noop, dag.Retry(dag.RetryPolicy{Jitter: dag.NoJitter})).Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Step("s").Retry.Jitter; got != 0 {
		t.Errorf("Jitter = %v, want 0", got)
	}
}

func TestDepsDeduplicated(t *testing.T) {
	w, err := dag.New("w").Step("a", noop).Step("b", noop).
		Step("c", noop, dag.After("b", "a", "b"), dag.Needs("a")).Build()
	if err != nil {
		t.Fatal(err)
	}
	s := w.Step("c")
	if diff := cmp.Diff([]string{"b", "a"}, s.Deps); diff != "" {
		t.Errorf("Deps mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a"}, s.Needs); diff != "" {
		t.Errorf("Needs mismatch (-want +got):\n%s", diff)
	}
}

func TestBuilderReusable(t *testing.T) {
	b := dag.New("w").Step("a", noop)
	w1, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	w2, err := b.Step("b", noop, dag.After("a")).Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(w1.Steps()) != 1 || len(w2.Steps()) != 2 {
		t.Errorf("steps = %d, %d; want 1, 2", len(w1.Steps()), len(w2.Steps()))
	}
}

package workflows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// goOrder is the Go declaration of order.yaml.
func goOrder(reg *steps.Registry) (*dag.Workflow, error) {
	h := func(name string) steps.Handler {
		v, _ := reg.Lookup(name)
		return v
	}
	return dag.New("order",
		dag.Version(1),
		dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2, Jitter: 1}),
		dag.DefaultTimeout(30*time.Second),
		dag.DefaultQueue("default"),
		dag.ExampleInput(orderflow.Example),
		dag.InputSchema(orderflow.InputSchema),
	).
		Step("reserve", h("order.reserve"), dag.Compensate(h("order.release")), dag.Timeout(10*time.Second)).
		Step("notify", h("order.notify"), dag.After("reserve"), dag.Queue("mail"),
			dag.Retry(dag.RetryPolicy{MaxAttempts: 10, InitialBackoff: 5 * time.Second, MaxBackoff: 10 * time.Minute})).
		Step("points", h("order.points"), dag.After("reserve"), dag.When("input.total >= 100"), dag.Compensate(h("order.revoke_points"))).
		Step("ship", h("order.ship"), dag.Needs("reserve"), dag.After("notify", "points"),
			dag.Retry(dag.RetryPolicy{MaxAttempts: 3}), dag.Timeout(2*time.Minute)).
		Build()
}

// plan is everything about a workflow that does not depend on handler
// identity.
type plan struct {
	Name    string
	Version int
	Order   []string
	Roots   []string
	Steps   []stepPlan
	Mermaid string
	Comp    [][]string
	// Example and Schema are the declared example input and schema.
	Example, Schema string
}

type stepPlan struct {
	Name, Queue, When string
	Deps, Needs       []string
	Retry             dag.RetryPolicy
	Timeout           time.Duration
	Compensable       bool
}

func planOf(w *dag.Workflow) plan {
	p := plan{Name: w.Name(), Version: w.Version(), Order: w.Order(), Roots: w.Roots(), Mermaid: w.Mermaid(),
		Example: string(w.ExampleInput()), Schema: string(w.InputSchema())}
	all := map[string]bool{}
	for _, s := range w.Steps() {
		p.Steps = append(p.Steps, stepPlan{s.Name, s.Queue, s.When, s.Deps, s.Needs, s.Retry, s.Timeout, s.Compensation != nil})
		all[s.Name] = true
	}
	p.Comp = w.CompensationOrder(all)
	return p
}

// handlerNames are the handlers order.yaml refers to.
var handlerNames = []string{"order.reserve", "order.release", "order.notify", "order.points", "order.revoke_points", "order.ship"}

// echo returns the step's name as its output, so tests can tell handlers
// apart.
func echo(name string) steps.Handler {
	return steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		return json.Marshal(name)
	})
}

func load(t *testing.T) (*dag.Workflow, *steps.Registry) {
	t.Helper()
	reg := steps.NewRegistry()
	for _, n := range handlerNames {
		reg.MustRegister(n, echo(n))
	}
	ws, err := dag.LoadFS(workflows.FS, reg)
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	for _, w := range ws {
		if w.Name() == "order" {
			return w, reg
		}
	}
	t.Fatal("workflows.FS has no order workflow")
	return nil, nil
}

func TestOrderYAMLMatchesGo(t *testing.T) {
	fromYAML, reg := load(t)
	fromGo, err := goOrder(reg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(planOf(fromGo), planOf(fromYAML)); diff != "" {
		t.Errorf("order.yaml and the Go declaration differ (-go +yaml):\n%s", diff)
	}
	// The example is the one the dashboard's form starts from: it must
	// pass the schema and reach points' threshold.
	if err := fromYAML.CheckInput(fromYAML.ExampleInput()); err != nil || fromYAML.InputSchema() == nil {
		t.Errorf("order.yaml's example %s against its schema %s: %v", fromYAML.ExampleInput(), fromYAML.InputSchema(), err)
	}
	if ok, err := fromYAML.Step("points").EvalWhen(context.Background(), fromYAML.ExampleInput(), nil); err != nil || !ok {
		t.Errorf("points when on the example = %v, %v; want true", ok, err)
	}
	for _, s := range fromYAML.Steps() {
		if s.Handler == nil {
			t.Errorf("step %q: no handler", s.Name)
		}
	}
}

func TestOrderHandlers(t *testing.T) {
	w, _ := load(t)
	want := map[string][2]string{
		"reserve": {"order.reserve", "order.release"},
		"notify":  {"order.notify", ""},
		"points":  {"order.points", "order.revoke_points"},
		"ship":    {"order.ship", ""},
	}
	name := func(h steps.Handler) string {
		if h == nil {
			return ""
		}
		out, err := steps.Call(context.Background(), h, steps.Context{})
		if err != nil {
			t.Fatal(err)
		}
		var s string
		_ = json.Unmarshal(out, &s)
		return s
	}
	got := map[string][2]string{}
	for _, s := range w.Steps() {
		got[s.Name] = [2]string{name(s.Handler), name(s.Compensation)}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handlers mismatch (-want +got):\n%s", diff)
	}
	ok, err := w.Step("points").EvalWhen(context.Background(), json.RawMessage(`{"total":150}`), nil)
	if err != nil || !ok {
		t.Errorf("points when = %v, %v; want true", ok, err)
	}
}

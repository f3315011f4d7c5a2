package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

func TestOnEventFilterMatches(t *testing.T) {
	w, err := dag.New("order", dag.OnEvent("order.placed", dag.Filter("event.total >= 100")), dag.OnEvent("order.retried")).
		Step("a", noop).Build()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, s := range w.Subscriptions() {
		got = append(got, s.Event+"|"+s.Filter)
	}
	if diff := cmp.Diff([]string{"order.placed|event.total >= 100", "order.retried|"}, got); diff != "" {
		t.Fatalf("subscriptions (-want +got):\n%s", diff)
	}
	sub := w.Subscribed("order.placed")
	cases := []struct {
		payload string
		want    bool
		err     bool
	}{
		{`{"total": 150}`, true, false},
		{`{"total": 100}`, true, false},
		{`{"total": 99.5}`, false, false},
		{`{"total": "x"}`, false, true},
		{`{}`, false, true}, // nil >= 100: an evaluation error, as for When
		{`null`, false, true},
	}
	for _, c := range cases {
		ok, err := sub.Match(context.Background(), json.RawMessage(c.payload))
		if ok != c.want || (err != nil) != c.err {
			t.Errorf("Match(%s) = %v, %v; want %v, error %v", c.payload, ok, err, c.want, c.err)
		}
		if err != nil && (!errors.Is(err, dag.ErrEvalFilter) || !strings.Contains(err.Error(), `workflow "order"`)) {
			t.Errorf("Match(%s) error %q: want ErrEvalFilter naming the workflow", c.payload, err)
		}
	}
	if ok, err := w.Subscribed("order.retried").Match(context.Background(), nil); !ok || err != nil {
		t.Errorf("unfiltered Match = %v, %v; want true", ok, err)
	}
	if w.Subscribed("nope") != nil {
		t.Error("Subscribed(unknown) is not nil")
	}
}

func TestOnEventBuildErrors(t *testing.T) {
	cases := []struct {
		opt  []dag.WorkflowOption
		want string
	}{
		{[]dag.WorkflowOption{dag.OnEvent("order.placed", dag.Filter("event.total >="))}, `dag: workflow "order": on event "order.placed": filter "event.total >=" does not compile`},
		{[]dag.WorkflowOption{dag.OnEvent("order.placed", dag.Filter("input.total > 1"))}, `filter "input.total > 1" does not compile: unknown name input`},
		{[]dag.WorkflowOption{dag.OnEvent("order.placed", dag.Filter(`"a"`))}, `does not compile`},
		{[]dag.WorkflowOption{dag.OnEvent("order placed")}, `on event "order placed": invalid event name`},
		{[]dag.WorkflowOption{dag.OnEvent("")}, `on event "": invalid event name`},
		{[]dag.WorkflowOption{dag.OnEvent("a.b"), dag.OnEvent("a.b")}, `on event "a.b": subscribed twice`},
	}
	for _, c := range cases {
		_, err := dag.New("order", c.opt...).Step("a", noop).Build()
		if err == nil || !errors.Is(err, dag.ErrBadFilter) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build error %v; want ErrBadFilter containing %q", err, c.want)
		}
	}
}

func TestOnEventDefinitionRoundTrip(t *testing.T) {
	plain, err := dag.New("order").Step("a", noop).Build()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(plain.Definition())
	if strings.Contains(string(b), `"on"`) {
		t.Fatalf("a workflow without subscriptions has an on field: %s (its hash would change)", b)
	}
	w, err := dag.New("order", dag.OnEvent("order.placed", dag.Filter("event.total >= 100"))).Step("a", noop).Build()
	if err != nil {
		t.Fatal(err)
	}
	d := w.Definition()
	if d.Hash() == plain.Definition().Hash() {
		t.Error("a subscription does not change the plan's hash")
	}
	b, _ = json.Marshal(d)
	back, err := dag.ParseDefinition(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, back); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	rebuilt, err := dag.FromDefinition(back, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := rebuilt.Subscribed("order.placed").Match(context.Background(), json.RawMessage(`{"total": 5}`)); ok || err != nil {
		t.Errorf("rebuilt filter Match = %v, %v; want false", ok, err)
	}
	bad := d
	bad.On = []dag.SubscriptionDefinition{{Event: "x", When: "event.("}}
	if _, err := dag.FromDefinition(bad, nil); !errors.Is(err, dag.ErrBadFilter) {
		t.Errorf("FromDefinition with a bad filter: %v, want ErrBadFilter", err)
	}
}

func TestOnEventYAML(t *testing.T) {
	reg := steps.NewRegistry()
	reg.MustRegister("h", noop)
	w, err := dag.LoadYAML([]byte(`name: order
on:
  - event: order.placed
    when: "event.total >= 100"
  - event: order.cancelled
steps:
  - name: a
    handler: h
`), "order.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]dag.SubscriptionDefinition{{Event: "order.placed", When: "event.total >= 100"}, {Event: "order.cancelled"}}, w.Definition().On); diff != "" {
		t.Fatalf("on (-want +got):\n%s", diff)
	}
	for _, c := range []struct{ src, want string }{
		{"name: order\non:\n  - event: order.placed\n    when: 'event.total >='\nsteps:\n  - {name: a, handler: h}\n", `order.yaml:3:3: on: workflow "order": on event "order.placed": filter`},
		{"name: order\non:\n  - when: 'true'\nsteps:\n  - {name: a, handler: h}\n", `every subscription needs an event`},
		{"name: order\non:\n  - event: a\n    filter: x\nsteps:\n  - {name: a, handler: h}\n", `filter`},
		{"name: order\non: order.placed\nsteps:\n  - {name: a, handler: h}\n", `on`},
	} {
		_, err := dag.LoadYAML([]byte(c.src), "order.yaml", reg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadYAML(%q) error %v; want one containing %q", c.src, err, c.want)
		}
	}
}

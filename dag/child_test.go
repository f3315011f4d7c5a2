package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
)

func TestChildSteps(t *testing.T) {
	w, err := dag.New("order").
		Step("price", noop).
		Step("pay", nil, dag.After("price"), dag.Child("payment",
			dag.Input(`{"order": input.order_id, "total": steps.price.output.total}`), dag.WaitTimeout(time.Hour))).
		Step("ship", nil, dag.After("pay"), dag.Child("shipping")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	pay := w.Step("pay")
	if pay.Wait == nil || pay.Wait.Kind != dag.WaitChild || pay.Wait.Workflow != "payment" || !pay.HasHandler() {
		t.Fatalf("pay = %+v", pay)
	}
	if diff := cmp.Diff([]string{"price"}, pay.Reads()); diff != "" {
		t.Errorf("pay reads (-want +got):\n%s", diff)
	}
	ctx := context.Background()
	in, err := pay.Wait.ChildInput(ctx, json.RawMessage(`{"order_id":"A-1"}`), map[string]json.RawMessage{"price": json.RawMessage(`{"total":12.5}`)})
	if err != nil || !jsonEqual(t, in, `{"order":"A-1","total":12.5}`) {
		t.Errorf("child input = %s, %v", in, err)
	}
	// Without Input, the child gets the parent run's input.
	if in, err := w.Step("ship").Wait.ChildInput(ctx, json.RawMessage(`{"order_id":"A-1"}`), nil); err != nil || string(in) != `{"order_id":"A-1"}` {
		t.Errorf("default child input = %s, %v", in, err)
	}

	d := w.Definition()
	back, err := dag.FromDefinition(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, back.Definition()); diff != "" {
		t.Errorf("definition round trip (-want +got):\n%s", diff)
	}
	if s := back.Step("pay"); s.Wait == nil || s.Wait.Workflow != "payment" || s.Wait.Timeout != time.Hour || !s.HasHandler() {
		t.Errorf("rebuilt pay = %+v", s)
	}
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	return cmp.Equal(a, b)
}

func TestChildStepErrors(t *testing.T) {
	for name, opt := range map[string]dag.StepOption{
		"bad workflow": dag.Child("pay ment"),
		"bad input":    dag.Child("payment", dag.Input("input.")),
		"not upstream": dag.Child("payment", dag.Input("steps.other.output")),
		"correlate":    dag.Child("payment", dag.Correlate("input.id")),
	} {
		_, err := dag.New("order").Step("a", noop).Step("other", noop).Step("w", nil, dag.After("a"), opt).Build()
		var de *dag.DefinitionError
		if !errors.As(err, &de) || de.Step != "w" {
			t.Errorf("%s: %v, want a DefinitionError about step w", name, err)
		}
	}
	if _, err := dag.New("order").Step("w", noop, dag.Child("payment")).Build(); !errors.Is(err, dag.ErrInvalidOption) {
		t.Errorf("child with a handler: %v, want ErrInvalidOption", err)
	}
}

func TestChildStepsYAML(t *testing.T) {
	src := `
name: order
steps:
  - name: pay
    child: {workflow: payment, input: "{'order': input.order_id}", timeout: 2h}
`
	w, err := dag.LoadYAML([]byte(src), "order.yaml", registry(t))
	if err != nil {
		t.Fatal(err)
	}
	got := w.Step("pay").Wait
	if got == nil || got.Kind != dag.WaitChild || got.Workflow != "payment" || got.Input != "{'order': input.order_id}" || got.Timeout != 2*time.Hour {
		t.Errorf("pay's wait = %+v", got)
	}
	_, err = dag.LoadYAML([]byte("name: o\nsteps:\n  - name: a\n    child: {input: input}\n"), "o.yaml", registry(t))
	if !errors.Is(err, dag.ErrMissingField) {
		t.Errorf("child without workflow: %v, want ErrMissingField", err)
	}
}

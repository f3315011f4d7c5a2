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

func TestWaitSteps(t *testing.T) {
	w, err := dag.New("order").
		Step("reserve", noop).
		Step("paid", nil, dag.After("reserve"), dag.WaitFor("payment.captured",
			dag.Correlate("steps.reserve.output.order_id"), dag.WaitTimeout(48*time.Hour))).
		Step("approve", nil, dag.After("paid"), dag.WaitForSignal()).
		Step("cool", nil, dag.After("approve"), dag.Sleep(time.Hour)).
		Step("until", nil, dag.After("cool"), dag.SleepUntil("input.at")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	paid := w.Step("paid")
	if paid.Wait == nil || paid.Wait.Kind != dag.WaitEvent || !paid.HasHandler() {
		t.Fatalf("paid = %+v", paid)
	}
	if diff := cmp.Diff([]string{"reserve"}, paid.Reads()); diff != "" {
		t.Errorf("paid reads (-want +got):\n%s", diff)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		out  string
		want string
	}{{`{"order_id":"A-1"}`, "A-1"}, {`{"order_id":1001}`, "1001"}, {`{"order_id":true}`, "true"}} {
		got, err := paid.Wait.CorrelationValue(ctx, nil, map[string]json.RawMessage{"reserve": json.RawMessage(tc.out)})
		if err != nil || got != tc.want {
			t.Errorf("correlation of %s = %q, %v; want %q", tc.out, got, err, tc.want)
		}
	}
	if _, err := paid.Wait.CorrelationValue(ctx, nil, nil); !errors.Is(err, dag.ErrEvalCondition) {
		t.Errorf("correlation without a value: %v, want ErrEvalCondition", err)
	}
	ready := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if got, err := w.Step("cool").Wait.WakeAt(ctx, ready, nil, nil); err != nil || !got.Equal(ready.Add(time.Hour)) {
		t.Errorf("sleep wakes at %v, %v", got, err)
	}
	if got, err := w.Step("until").Wait.WakeAt(ctx, ready, json.RawMessage(`{"at":"2026-02-03T04:05:06Z"}`), nil); err != nil ||
		!got.Equal(time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)) {
		t.Errorf("sleep until wakes at %v, %v", got, err)
	}

	// The definition keeps the waits, and a plan rebuilt from it (on a
	// node without the workflow) has them too.
	d := w.Definition()
	back, err := dag.FromDefinition(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, back.Definition()); diff != "" {
		t.Errorf("definition round trip (-want +got):\n%s", diff)
	}
	if s := back.Step("paid"); s.Wait == nil || s.Wait.Timeout != 48*time.Hour || !s.HasHandler() {
		t.Errorf("rebuilt paid = %+v", s)
	}
}

func TestWaitStepErrors(t *testing.T) {
	for name, opt := range map[string]dag.StepOption{
		"no correlate":    dag.WaitFor("payment.captured"),
		"bad event":       dag.WaitFor("pay ment", dag.Correlate("input.id")),
		"bad correlate":   dag.WaitFor("payment.captured", dag.Correlate("input.")),
		"not upstream":    dag.WaitFor("payment.captured", dag.Correlate("steps.other.output")),
		"negative sleep":  dag.Sleep(-time.Second),
		"negative wait":   dag.WaitForSignal(dag.WaitTimeout(-time.Second)),
		"bad sleep until": dag.SleepUntil("input.at +"),
	} {
		_, err := dag.New("order").Step("a", noop).Step("other", noop).Step("w", nil, dag.After("a"), opt).Build()
		var de *dag.DefinitionError
		if !errors.As(err, &de) || de.Step != "w" {
			t.Errorf("%s: %v, want a DefinitionError about step w", name, err)
		}
	}
	_, err := dag.New("order").Step("w", noop, dag.Sleep(time.Second)).Build()
	if !errors.Is(err, dag.ErrInvalidOption) {
		t.Errorf("sleep with a handler: %v, want ErrInvalidOption", err)
	}
}

func TestWaitStepsYAML(t *testing.T) {
	src := `
name: order
steps:
  - name: reserve
    handler: order.reserve
  - name: paid
    after: [reserve]
    wait_for: {event: payment.captured, correlate: input.order_id, timeout: 48h}
  - name: approve
    after: [paid]
    wait_for: {signal: true, timeout: 1h}
  - name: cool
    after: [approve]
    sleep: 1h
  - name: later
    after: [cool]
    sleep_until: input.at
`
	w, err := dag.LoadYAML([]byte(src), "order.yaml", registry(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]dag.WaitKind{"paid": dag.WaitEvent, "approve": dag.WaitSignal, "cool": dag.WaitSleep, "later": dag.WaitSleep}
	for name, kind := range want {
		if s := w.Step(name); s.Wait == nil || s.Wait.Kind != kind {
			t.Errorf("step %s: wait %+v, want %s", name, s.Wait, kind)
		}
	}
	if got := w.Step("paid").Wait; got.Correlate != "input.order_id" || got.Timeout != 48*time.Hour {
		t.Errorf("paid's wait = %+v", got)
	}
	if _, err := dag.LoadYAML([]byte("name: o\nsteps:\n  - name: a\n    wait_for: {signal: maybe}\n"), "o.yaml", registry(t)); err == nil {
		t.Error("signal: maybe loaded")
	}
}

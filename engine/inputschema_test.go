package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// Trigger checks the input against the workflow's input schema on every
// node, the one without the handlers too (it has the schema from the
// stored definition): a bad input is refused before any run is created,
// a good one runs.
func TestTriggerChecksTheInputSchema(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			st, rdb, prefix := b.open(t)
			ok := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
			w, err := dag.New("order",
				dag.ExampleInput(map[string]any{"order_id": "order-1001", "total": 120}),
				dag.InputSchema(`{"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}`)).
				Step("points", ok, dag.When("input.total >= 100")).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			worker := isoNode{store: st, redis: rdb, prefix: prefix, id: "worker", workflows: []*dag.Workflow{w}}.start(t)
			api := isoNode{store: st, redis: rdb, prefix: prefix, id: "api", noWorkers: true}.start(t)
			ctx := context.Background()
			for _, node := range []struct {
				name string
				e    *engine.Engine
			}{{"worker", worker}, {"api", api}} {
				for _, tc := range []struct {
					input any
					want  string
				}{
					{json.RawMessage(`{}`), `engine: workflow "order": invalid input: missing property 'total'`},
					{map[string]any{"total": "lots"}, `engine: workflow "order": invalid input: at "/total": got string, want number`},
					{nil, `engine: workflow "order": invalid input: got null, want object`},
				} {
					_, err := node.e.Trigger(ctx, "order", tc.input)
					var ie *dag.InputError
					if !errors.Is(err, engine.ErrInvalidInput) || !errors.As(err, &ie) || err.Error() != tc.want {
						t.Errorf("%s: Trigger(%v) = %v; want %q wrapping ErrInvalidInput and a *dag.InputError", node.name, tc.input, err, tc.want)
					}
				}
			}
			page, err := st.RunList(ctx, persistence.RunListParams{})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Runs) != 0 {
				t.Fatalf("refused inputs created %d runs", len(page.Runs))
			}
			var ids []string
			for _, e := range []*engine.Engine{worker, api} {
				id, err := e.Trigger(ctx, "order", json.RawMessage(w.ExampleInput()))
				if err != nil {
					t.Fatalf("Trigger(example input): %v", err)
				}
				ids = append(ids, id)
			}
			waitFinished(t, worker, ids, 30*time.Second)
		})
	}
}

// A schedule whose input the workflow's schema refuses is refused when
// it is created or edited, naming the schedule and the problem, instead
// of failing at every tick; the stored schedule is left as it was.
func TestScheduleChecksTheInputSchema(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			st, rdb, prefix := b.open(t)
			ok := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
			w, err := dag.New("order",
				dag.InputSchema(`{"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}`)).
				Step("points", ok).Build()
			if err != nil {
				t.Fatal(err)
			}
			e := isoNode{store: st, redis: rdb, prefix: prefix, id: "worker", workflows: []*dag.Workflow{w}}.start(t)
			ctx := context.Background()
			bad := json.RawMessage(`{"total": "lots"}`)
			_, err = e.CreateSchedule(ctx, engine.ScheduleDefinition{Name: "nightly", Spec: "0 2 * * *", Workflow: "order", Input: bad})
			want := `engine: schedule "nightly": workflow "order": invalid input: at "/total": got string, want number`
			if !errors.Is(err, engine.ErrInvalidSchedule) || !errors.Is(err, engine.ErrInvalidInput) || err == nil || err.Error() != want {
				t.Fatalf("CreateSchedule(bad input) = %v; want %q wrapping ErrInvalidSchedule and ErrInvalidInput", err, want)
			}
			if _, err := st.ScheduleGet(ctx, "nightly"); !errors.Is(err, persistence.ErrScheduleNotFound) {
				t.Fatalf("a refused schedule was stored: %v", err)
			}
			good := json.RawMessage(`{"total": 5}`)
			if _, err := e.CreateSchedule(ctx, engine.ScheduleDefinition{Name: "nightly", Spec: "0 2 * * *", Workflow: "order", Input: good}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.EditSchedule(ctx, "nightly", engine.ScheduleChange{Input: &bad}); !errors.Is(err, engine.ErrInvalidInput) {
				t.Fatalf("EditSchedule(bad input) = %v; want ErrInvalidInput", err)
			}
			info, err := e.GetSchedule(ctx, "nightly")
			if err != nil || string(info.Input) != string(good) {
				t.Fatalf("after a refused edit the schedule's input is %s (%v); want %s kept", info.Input, err, good)
			}
		})
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

// POST /v1/workflows/{name}/runs refuses an input that does not match the
// workflow's input schema with 400 invalid_input, naming where and why,
// and creates no run; the workflow's definition carries the example and
// the schema.
func TestTriggerRefusesInputAgainstTheSchema(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ok := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
		wf, err := dag.New("order",
			dag.ExampleInput(map[string]any{"order_id": "order-1001", "total": 120}),
			dag.InputSchema(`{"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}`)).
			Step("points", ok, dag.When("input.total >= 100")).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		env := newAPIEnv(t, b, envOptions{workflows: []*dag.Workflow{wf}})
		p := env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":{"total":"lots"}}`).problem(t, http.StatusBadRequest, api.CodeInvalidInput)
		if want := `engine: workflow "order": invalid input: at "/total": got string, want number`; p.Detail != want {
			t.Errorf("detail %q, want %q", p.Detail, want)
		}
		p = env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":{}}`).problem(t, http.StatusBadRequest, api.CodeInvalidInput)
		if !strings.Contains(p.Detail, "missing property 'total'") {
			t.Errorf("detail %q, want the missing property", p.Detail)
		}
		if n := countRuns(t, env); n != 0 {
			t.Fatalf("refused inputs created %d runs", n)
		}
		var d struct {
			Definition struct {
				ExampleInput json.RawMessage `json:"example_input"`
				InputSchema  json.RawMessage `json:"input_schema"`
			} `json:"definition"`
		}
		env.raw(t, "GET", "/v1/workflows/order", "").decode(t, http.StatusOK, &d)
		if got := string(d.Definition.ExampleInput); got != `{"order_id":"order-1001","total":120}` {
			t.Errorf("definition's example_input %s", got)
		}
		if !strings.Contains(string(d.Definition.InputSchema), `"required":["total"]`) {
			t.Errorf("definition's input_schema %s", d.Definition.InputSchema)
		}
		id := triggerOrder(t, env, string(d.Definition.ExampleInput), "")
		env.waitStatus(t, id, "succeeded")
	})
}

package dag_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/dag"
)

const totalSchema = `{"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}, "order_id": {"type": "string"}}}`

func TestExampleInputAndSchema(t *testing.T) {
	type order struct {
		OrderID string  `json:"order_id"`
		Total   float64 `json:"total"`
	}
	w, err := dag.New("order", dag.ExampleInput(order{OrderID: "order-1001", Total: 120}), dag.InputSchema(totalSchema)).
		Step("a", noop).Build()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(w.ExampleInput()), `{"order_id":"order-1001","total":120}`; got != want {
		t.Errorf("ExampleInput() = %s, want %s", got, want)
	}
	if got := string(w.InputSchema()); !strings.Contains(got, `"required":["total"]`) {
		t.Errorf("InputSchema() = %s, want the compact schema", got)
	}
	d := w.Definition()
	if string(d.ExampleInput) != string(w.ExampleInput()) || string(d.InputSchema) != string(w.InputSchema()) {
		t.Errorf("definition carries example %s and schema %s", d.ExampleInput, d.InputSchema)
	}
	// The stored definition keeps both, and the plan built from it checks
	// inputs as the registered workflow does (a node without the handlers
	// triggers from it).
	b, _ := json.Marshal(d)
	pd, err := dag.ParseDefinition(b)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := dag.FromDefinition(pd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rebuilt.Definition().Hash() != d.Hash() {
		t.Errorf("rebuilt hash %s, want %s", rebuilt.Definition().Hash(), d.Hash())
	}
	for _, wf := range []*dag.Workflow{w, rebuilt} {
		if err := wf.CheckInput(json.RawMessage(`{"order_id":"o-1","total":99.5}`)); err != nil {
			t.Errorf("valid input refused: %v", err)
		}
		err := wf.CheckInput(json.RawMessage(`{"order_id":"o-1","total":"lots"}`))
		var ie *dag.InputError
		if !errors.As(err, &ie) {
			t.Fatalf("CheckInput(total string) = %v, want a *dag.InputError", err)
		}
		want := []dag.InputProblem{{Pointer: "/total", Reason: "got string, want number"}}
		if ie.Workflow != "order" || !reflect.DeepEqual(ie.Problems, want) {
			t.Errorf("InputError = %+v, want workflow order and problems %+v", ie, want)
		}
		if got, want := err.Error(), `dag: workflow "order": invalid input: at "/total": got string, want number`; got != want {
			t.Errorf("message %q, want %q", got, want)
		}
		err = wf.CheckInput(json.RawMessage(`{}`))
		if got, want := err.Error(), `dag: workflow "order": invalid input: missing property 'total'`; got != want {
			t.Errorf("message %q, want %q", got, want)
		}
		if err := wf.CheckInput(nil); err == nil || !strings.Contains(err.Error(), "got null, want object") {
			t.Errorf("CheckInput(no input) = %v, want a refusal", err)
		}
	}
}

func TestNoExampleNoSchema(t *testing.T) {
	w, err := dag.New("wf").Step("a", noop).Build()
	if err != nil {
		t.Fatal(err)
	}
	if w.ExampleInput() != nil || w.InputSchema() != nil {
		t.Errorf("example %s, schema %s; want none", w.ExampleInput(), w.InputSchema())
	}
	if err := w.CheckInput(json.RawMessage(`"anything"`)); err != nil {
		t.Errorf("a workflow without a schema refused an input: %v", err)
	}
	b, _ := json.Marshal(w.Definition())
	if strings.Contains(string(b), "example") || strings.Contains(string(b), "schema") {
		t.Errorf("definition without example nor schema: %s (the fields must be omitted, to keep the hash)", b)
	}
}

func TestInputSchemaBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []dag.WorkflowOption
		sentinel error
		want     string
	}{
		{"schema not JSON", []dag.WorkflowOption{dag.InputSchema(`{"type":`)}, dag.ErrBadSchema,
			`dag: workflow "wf": input schema is not JSON: unexpected EOF`},
		{"schema does not compile", []dag.WorkflowOption{dag.InputSchema([]byte(`{"type": "integr"}`))}, dag.ErrBadSchema,
			`dag: workflow "wf": input schema does not compile:`},
		{"schema refers out", []dag.WorkflowOption{dag.InputSchema(`{"$ref": "file:///etc/passwd"}`)}, dag.ErrBadSchema,
			`refers to "file:///etc/passwd": an input schema must be self-contained`},
		{"example not JSON", []dag.WorkflowOption{dag.ExampleInput(json.RawMessage(`{"a"`))}, dag.ErrBadExample,
			`dag: workflow "wf": example input is not JSON`},
		{"example violates schema", []dag.WorkflowOption{dag.ExampleInput(map[string]any{"total": "120"}), dag.InputSchema(totalSchema)},
			dag.ErrBadExample, `dag: workflow "wf": example input does not match the input schema: at "/total": got string, want number`},
		{"schema too large", []dag.WorkflowOption{dag.InputSchema(`{"description": "` + strings.Repeat("x", dag.MaxInputSchemaBytes) + `"}`)},
			dag.ErrBadSchema, `input schema is larger than 65536 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dag.New("wf", tc.opts...).Step("a", noop).Build()
			var de *dag.DefinitionError
			if !errors.Is(err, tc.sentinel) || !errors.As(err, &de) || de.Workflow != "wf" {
				t.Fatalf("Build() = %v, want a *DefinitionError of workflow wf wrapping %v", err, tc.sentinel)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestYAMLExampleInputAndSchema(t *testing.T) {
	src := `name: order
example_input: {order_id: order-1001, total: 120}
input_schema:
  type: object
  required: [total]
  properties:
    total: {type: number}
steps:
  - name: a
    handler: order.reserve
`
	w, err := dag.LoadYAML([]byte(src), "order.yaml", registry(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(w.ExampleInput()), `{"order_id":"order-1001","total":120}`; got != want {
		t.Errorf("example %s, want %s", got, want)
	}
	if err := w.CheckInput(json.RawMessage(`{"total":"x"}`)); err == nil {
		t.Error("the YAML schema is not checked")
	}
	bad := strings.Replace(src, "total: 120", "total: lots", 1)
	_, err = dag.LoadYAML([]byte(bad), "order.yaml", registry(t))
	var ye *dag.YAMLError
	if !errors.As(err, &ye) || ye.Field != "example_input" || ye.Line != 2 || !errors.Is(err, dag.ErrBadExample) {
		t.Fatalf("LoadYAML(bad example) = %v, want a YAMLError at example_input, line 2", err)
	}
	bad = strings.Replace(src, "type: object", "type: 7", 1)
	_, err = dag.LoadYAML([]byte(bad), "order.yaml", registry(t))
	if !errors.As(err, &ye) || ye.Field != "input_schema" || ye.Line != 4 || !errors.Is(err, dag.ErrBadSchema) {
		t.Fatalf("LoadYAML(bad schema) = %v, want a YAMLError at input_schema, line 4", err)
	}
}

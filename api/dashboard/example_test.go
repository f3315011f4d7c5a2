package dashboard_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// pointsWorkflow is the demo's shape: a step whose condition reads
// input.total, which fails a run whose input has none. It declares an
// example input and a schema requiring a numeric total.
func pointsWorkflow(t testing.TB) *dag.Workflow {
	t.Helper()
	ok := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
	w, err := dag.New("order",
		dag.ExampleInput(map[string]any{"order_id": "order-1001", "total": 120}),
		dag.InputSchema(`{"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}`)).
		Step("reserve", ok).
		Step("points", ok, dag.After("reserve"), dag.When("input.total >= 100")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var textareaRE = regexp.MustCompile(`(?s)<textarea id="t-input"[^>]*>(.*?)</textarea>`)

// formInput returns what the trigger form's textarea holds.
func formInput(t *testing.T, page answer) string {
	t.Helper()
	m := textareaRE.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no trigger form on the page:\n%.2000s", page.body)
	}
	return html.UnescapeString(m[1])
}

// TestTriggerFormPrefilledWithTheExample: the trigger form starts from
// the workflow's example input, pretty, with its schema folded below;
// submitted as it is, it starts a run that succeeds. An input the schema
// refuses is said so on the form, kept, and starts nothing. A workflow
// without an example keeps {}.
func TestTriggerFormPrefilledWithTheExample(t *testing.T) {
	e := newEnv(t, envOptions{wfs: []*dag.Workflow{pointsWorkflow(t), shopWorkflow(t)}})
	b := e.browser(t)
	page := b.get("/workflows/order")
	want := "{\n  \"order_id\": \"order-1001\",\n  \"total\": 120\n}"
	if got := formInput(t, page); got != want {
		t.Fatalf("the form holds %q, want the pretty example %q", got, want)
	}
	if !strings.Contains(page.body, `<details id="t-schema"><summary>Input schema</summary>`) ||
		!strings.Contains(page.body, "&#34;required&#34;: [\n") {
		t.Errorf("the schema is not shown folded:\n%.3000s", page.body)
	}
	tok := csrf(t, page)
	a := b.do("POST", "/workflows/order/trigger", url.Values{"csrf": {tok}, "input": {formInput(t, page)}}, nil)
	if a.status != http.StatusSeeOther || !strings.HasPrefix(a.header.Get("Location"), "/runs/") {
		t.Fatalf("trigger with the example: %d to %q\n%.2000s", a.status, a.header.Get("Location"), a.body)
	}
	id := strings.TrimPrefix(strings.SplitN(a.header.Get("Location"), "?", 2)[0], "/runs/")
	if ri := e.waitRun(t, id); ri.Run.Status != persistence.RunSucceeded {
		t.Fatalf("the example's run %s, want succeeded", ri.Run.Status)
	}

	a = b.do("POST", "/workflows/order/trigger", url.Values{"csrf": {tok}, "input": {`{"total": "lots"}`}}, nil)
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `invalid input: at &#34;/total&#34;: got string, want number`) {
		t.Errorf("trigger with a total that is no number: %d, want 422 saying why:\n%.3000s", a.status, a.body)
	}
	if got := formInput(t, a); got != `{"total": "lots"}` {
		t.Errorf("the refused form holds %q, want what was typed", got)
	}
	page2, err := e.Engine.Runs(context.Background(), engine.RunFilter{Workflow: "order"})
	if err != nil || len(page2.Runs) != 1 {
		t.Errorf("runs of order: %d, %v; want only the example's", len(page2.Runs), err)
	}

	shop := b.get("/workflows/shop")
	if got := formInput(t, shop); got != "{}" {
		t.Errorf("a workflow without an example: the form holds %q, want {}", got)
	}
	if strings.Contains(shop.body, "t-schema") {
		t.Error("a workflow without a schema shows one")
	}
}

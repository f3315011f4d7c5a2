package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

func TestDefinitionRoundTrip(t *testing.T) {
	w, err := orderWorkflow().Build()
	if err != nil {
		t.Fatal(err)
	}
	d := w.Definition()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dag.ParseDefinition(b)
	if err != nil {
		t.Fatalf("ParseDefinition(%s): %v", b, err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, d)
	}
	rebuilt, err := dag.FromDefinition(got, w)
	if err != nil {
		t.Fatal(err)
	}
	if h, want := rebuilt.Definition().Hash(), d.Hash(); h != want {
		t.Fatalf("rebuilt hash %s, want %s", h, want)
	}
	for _, s := range w.Steps() {
		r := rebuilt.Step(s.Name)
		if !reflect.DeepEqual(r.Deps, s.Deps) || !reflect.DeepEqual(r.Needs, s.Needs) || r.Retry != s.Retry ||
			r.Timeout != s.Timeout || r.Queue != s.Queue || r.When != s.When {
			t.Errorf("step %s rebuilt as %+v, want %+v", s.Name, r, s)
		}
		if !r.HasHandler() || r.HasCompensationHandler() != (s.Compensation != nil) {
			t.Errorf("step %s: handlers not taken from the registered workflow", s.Name)
		}
	}
	// The condition works on the rebuilt plan.
	run, err := rebuilt.Step("points").EvalWhen(context.Background(), json.RawMessage(`{"total":5}`), nil)
	if err != nil || run {
		t.Fatalf("EvalWhen on rebuilt plan = %v, %v; want false, nil", run, err)
	}
}

func TestDefinitionJSONForm(t *testing.T) {
	w, err := dag.New("wf").Step("a", noop, dag.Retry(dag.RetryPolicy{Jitter: dag.NoJitter})).Step("b", noop, dag.Needs("a")).Build()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(w.Definition())
	want := `{"name":"wf","declared_version":1,"steps":[` +
		`{"name":"a","queue":"default","retry":{"max_attempts":5,"initial_backoff":"1s","max_backoff":"1m0s","multiplier":2,"jitter":0},"timeout":"5m0s","compensation":false},` +
		`{"name":"b","deps":["a"],"needs":["a"],"queue":"default","retry":{"max_attempts":5,"initial_backoff":"1s","max_backoff":"1m0s","multiplier":2,"jitter":1},"timeout":"5m0s","compensation":false}]}`
	if string(b) != want {
		t.Fatalf("JSON form\n got %s\nwant %s", b, want)
	}
	// A resolved jitter of 0 stays "none" through a rebuild.
	re, err := dag.FromDefinition(w.Definition(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if j := re.Step("a").Retry.Jitter; j != 0 {
		t.Fatalf("rebuilt jitter %v, want 0", j)
	}
}

func TestDefinitionHash(t *testing.T) {
	build := func(b *dag.Builder) string {
		t.Helper()
		w, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return w.Definition().Hash()
	}
	base := build(orderWorkflow())
	if len(base) != 16 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("hash %q, want 16 lowercase hex digits", base)
	}
	if again := build(orderWorkflow()); again != base {
		t.Fatalf("hash of the same plan changed: %s then %s", base, again)
	}
	// Handlers are code, not plan: other handlers, same hash.
	other := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
	if h := build(dag.New("order").Step("a", noop)); h != build(dag.New("order").Step("a", other)) {
		t.Fatalf("handlers changed the hash")
	}
	changes := map[string]*dag.Builder{
		"step added":       orderWorkflow().Step("audit", noop, dag.After("ship")),
		"queue":            dag.New("order").Step("a", noop, dag.Queue("q2")),
		"retry":            dag.New("order").Step("a", noop, dag.Retry(dag.RetryPolicy{MaxAttempts: 2})),
		"timeout":          dag.New("order").Step("a", noop, dag.Timeout(time.Minute)),
		"compensation":     dag.New("order").Step("a", noop, dag.Compensate(noop)),
		"declared version": dag.New("order", dag.Version(2)).Step("a", noop),
	}
	plain := build(dag.New("order").Step("a", noop))
	for name, b := range changes {
		h := build(b)
		if h == plain || h == base {
			t.Errorf("%s: hash %s unchanged", name, h)
		}
	}
	after := build(dag.New("order").Step("a", noop).Step("b", noop, dag.After("a")))
	needs := build(dag.New("order").Step("a", noop).Step("b", noop, dag.Needs("a")))
	if after == needs {
		t.Errorf("After and Needs hash alike")
	}
}

func TestFromDefinitionWithoutHandlers(t *testing.T) {
	w, err := orderWorkflow().Build()
	if err != nil {
		t.Fatal(err)
	}
	// A node that has only some steps (v1 of a workflow that grew).
	partial, err := dag.New("order").Step("reserve", noop).Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := dag.FromDefinition(w.Definition(), partial)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Step("reserve").HasHandler() {
		t.Error("reserve: handler not taken")
	}
	if r := got.Step("reserve"); r.Compensation == nil || r.HasCompensationHandler() {
		t.Error("reserve: a compensation the node lacks must stay in the plan, marked as not here")
	}
	ship := got.Step("ship")
	if ship.HasHandler() {
		t.Error("ship: a handler the node lacks is reported as here")
	}
	if _, err := ship.Handler.Handle(context.Background(), steps.Context{}); err == nil {
		t.Error("ship: the stand-in handler succeeded")
	}
	if _, err := dag.FromDefinition(w.Definition(), mustBuild(t, dag.New("other").Step("a", noop))); err == nil ||
		!strings.Contains(err.Error(), `"order"`) || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("other workflow's handlers: err %v", err)
	}
}

func mustBuild(t *testing.T, b *dag.Builder) *dag.Workflow {
	t.Helper()
	w, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestParseDefinitionRejects(t *testing.T) {
	cases := map[string]struct{ json, want string }{
		"not JSON":      {`{"name":`, "definition"},
		"bad duration":  {`{"name":"wf","steps":[{"name":"a","queue":"default","retry":{"max_attempts":1,"initial_backoff":"soon","max_backoff":"1s","multiplier":1},"timeout":"1s"}]}`, `"soon"`},
		"cycle":         {`{"name":"wf","steps":[{"name":"a","deps":["b"],"queue":"default","retry":{"max_attempts":1,"initial_backoff":"1s","max_backoff":"1s","multiplier":1},"timeout":"1s"},{"name":"b","deps":["a"],"queue":"default","retry":{"max_attempts":1,"initial_backoff":"1s","max_backoff":"1s","multiplier":1},"timeout":"1s"}]}`, "cycle"},
		"bad name":      {`{"name":"w f","steps":[{"name":"a","queue":"default","retry":{"max_attempts":1,"initial_backoff":"1s","max_backoff":"1s","multiplier":1},"timeout":"1s"}]}`, `"w f"`},
		"no steps":      {`{"name":"wf","steps":[]}`, "no steps"},
		"bad condition": {`{"name":"wf","steps":[{"name":"a","when":"input.(","queue":"default","retry":{"max_attempts":1,"initial_backoff":"1s","max_backoff":"1s","multiplier":1},"timeout":"1s"}]}`, "when"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := dag.ParseDefinition([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one mentioning %s", err, c.want)
			}
		})
	}
	var de *dag.DefinitionError
	_, err := dag.ParseDefinition([]byte(`{"name":"wf","steps":[]}`))
	if !errors.As(err, &de) || !errors.Is(err, dag.ErrEmptyWorkflow) {
		t.Fatalf("no steps: %v, want a *DefinitionError wrapping ErrEmptyWorkflow", err)
	}
}

func TestDefinitionGraph(t *testing.T) {
	w, err := orderWorkflow().Build()
	if err != nil {
		t.Fatal(err)
	}
	g := w.Definition().Graph()
	var ids []string
	for _, n := range g.Nodes {
		ids = append(ids, n.ID)
	}
	if strings.Join(ids, ",") != "reserve,notify,points,ship" {
		t.Fatalf("nodes %v", ids)
	}
	var edges []string
	for _, e := range g.Edges {
		edges = append(edges, e.From+">"+e.To+":"+e.Kind)
	}
	want := "reserve>notify:after,reserve>points:after,reserve>ship:needs,notify>ship:after,points>ship:after"
	if got := strings.Join(edges, ","); got != want {
		t.Fatalf("edges\n got %s\nwant %s", got, want)
	}
	if g.Nodes[2].When != "input.total >= 100" || !g.Nodes[0].Compensation || g.Nodes[1].Queue != "mail" {
		t.Fatalf("node details lost: %+v", g.Nodes)
	}
	if got, want := w.Definition().Mermaid(), w.Mermaid(); got != want {
		t.Fatalf("Mermaid of the definition\n%s\nwant\n%s", got, want)
	}
}

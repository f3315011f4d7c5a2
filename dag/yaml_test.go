package dag_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

func registry(t testing.TB) *steps.Registry {
	t.Helper()
	reg := steps.NewRegistry()
	for _, n := range []string{"order.reserve", "order.release", "order.notify", "order.points", "order.ship"} {
		reg.MustRegister(n, noop)
	}
	return reg
}

const orderYAML = `name: order
version: 2
defaults:
  retry: {max_attempts: 4, initial_backoff: 2s, max_backoff: 30s, multiplier: 3, jitter: 0.5}
  timeout: 20s
  queue: orders
steps:
  - name: reserve
    handler: order.reserve
    compensate: order.release
  - name: notify
    handler: order.notify
    after: reserve
    retry: {jitter: 0}
  - name: points
    handler: order.points
    after: [reserve]
    when: input.total >= 100
    queue: loyalty
  - name: ship
    handler: order.ship
    needs: [reserve]
    after: [notify, points]
    timeout: 1m
`

func TestLoadYAML(t *testing.T) {
	w, err := dag.LoadYAML([]byte(orderYAML), "order.yaml", registry(t))
	if err != nil {
		t.Fatal(err)
	}
	want, err := dag.New("order", dag.Version(2),
		dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 4, InitialBackoff: 2 * time.Second, MaxBackoff: 30 * time.Second, Multiplier: 3, Jitter: 0.5}),
		dag.DefaultTimeout(20*time.Second), dag.DefaultQueue("orders")).
		Step("reserve", noop, dag.Compensate(noop)).
		Step("notify", noop, dag.After("reserve"), dag.Retry(dag.RetryPolicy{Jitter: dag.NoJitter})).
		Step("points", noop, dag.After("reserve"), dag.When("input.total >= 100"), dag.Queue("loyalty")).
		Step("ship", noop, dag.Needs("reserve"), dag.After("notify", "points"), dag.Timeout(time.Minute)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	opt := cmp.Comparer(func(a, b *dag.Step) bool {
		return a.Name == b.Name && cmp.Equal(a.Deps, b.Deps) && cmp.Equal(a.Needs, b.Needs) &&
			a.Retry == b.Retry && a.Timeout == b.Timeout && a.Queue == b.Queue && a.When == b.When &&
			(a.Compensation == nil) == (b.Compensation == nil) && a.Handler != nil && b.Handler != nil
	})
	if diff := cmp.Diff(want.Steps(), w.Steps(), opt); diff != "" {
		t.Errorf("steps mismatch (-want +got):\n%s", diff)
	}
	if w.Name() != "order" || w.Version() != 2 {
		t.Errorf("Name, Version = %q, %d; want order, 2", w.Name(), w.Version())
	}
	if got := w.Step("notify").Retry.Jitter; got != 0 {
		t.Errorf("explicit jitter: 0 gave Jitter %v, want 0", got)
	}
}

func TestLoadYAMLErrors(t *testing.T) {
	const head = "name: order\nsteps:\n"
	tests := []struct {
		name    string
		yaml    string
		wantIs  error
		wantMsg string
	}{
		{
			name: "unknown top-level field", wantIs: dag.ErrUnknownField,
			yaml:    "name: order\ntimeout: 3s\nsteps:\n  - {name: a, handler: order.ship}\n",
			wantMsg: "dag: order.yaml:2:1: timeout: unknown field (want one of [name version on defaults steps example_input input_schema])",
		},
		{
			name: "unknown step field", wantIs: dag.ErrUnknownField,
			yaml:    head + "  - name: a\n    handler: order.ship\n    depends_on: [b]\n",
			wantMsg: "dag: order.yaml:5:5: steps[0].depends_on: unknown field (want one of [name kind handler after needs when retry timeout compensate queue wait_for sleep sleep_until concurrency rate_limit child url method headers headers_from_env body max_response_bytes max_retry_after])",
		},
		{
			name: "unknown retry field", wantIs: dag.ErrUnknownField,
			yaml:    head + "  - name: a\n    handler: order.ship\n    retry: {attempts: 3}\n",
			wantMsg: "dag: order.yaml:5:13: steps[0].retry.attempts: unknown field (want one of [max_attempts initial_backoff max_backoff multiplier jitter])",
		},
		{
			name: "unknown handler", wantIs: dag.ErrUnknownHandler,
			yaml:    head + "  - name: a\n    handler: order.pack\n",
			wantMsg: `dag: order.yaml:4:14: steps[0].handler: unknown handler "order.pack" (not in the registry)`,
		},
		{
			name: "unknown compensation handler", wantIs: dag.ErrUnknownHandler,
			yaml:    head + "  - name: a\n    handler: order.ship\n    compensate: order.unship\n",
			wantMsg: `dag: order.yaml:5:17: steps[0].compensate: unknown handler "order.unship" (not in the registry)`,
		},
		{
			name: "bad duration", yaml: head + "  - name: a\n    handler: order.ship\n    timeout: 10\n",
			wantMsg: `dag: order.yaml:5:14: steps[0].timeout: want a duration like "30s" or "1m30s", got "10"`,
		},
		{
			name: "bad integer", yaml: head + "  - name: a\n    handler: order.ship\n    retry:\n      max_attempts: many\n",
			wantMsg: `dag: order.yaml:6:21: steps[0].retry.max_attempts: want an integer, got "many"`,
		},
		{
			name: "missing handler", wantIs: dag.ErrMissingField, yaml: head + "  - name: a\n",
			wantMsg: `dag: order.yaml:3:5: steps[0].handler: missing field: every step needs a handler (or kind: http, wait_for, sleep, sleep_until or child)`,
		},
		{
			name: "missing name", wantIs: dag.ErrMissingField, yaml: "steps:\n  - {name: a, handler: order.ship}\n",
			wantMsg: `dag: order.yaml:1:1: name: missing field: the workflow needs a name`,
		},
		{
			name: "steps not a list", yaml: "name: order\nsteps: {a: 1}\n",
			wantMsg: `dag: order.yaml:2:8: steps: want a list of steps, got a mapping`,
		},
		{
			name: "repeated field", yaml: head + "  - name: a\n    name: b\n    handler: order.ship\n",
			wantMsg: `dag: order.yaml:4:5: steps[0].name: repeated field`,
		},
		{
			name: "syntax error", yaml: "name: order\nsteps: [\n",
			wantMsg: `dag: order.yaml:2: did not find expected node content`,
		},
		{name: "empty", yaml: "", wantMsg: `dag: order.yaml: empty document`},
		{name: "not a mapping", yaml: "- a\n", wantMsg: `dag: order.yaml:1:1: want a mapping with name and steps, got a list`},
		{
			name: "two documents", yaml: head + "  - {name: a, handler: order.ship}\n---\nname: other\n",
			wantMsg: `dag: order.yaml:4:1: more than one YAML document (one workflow per file)`,
		},
		// Build errors, located at the step's field.
		{
			name: "unknown dependency", wantIs: dag.ErrUnknownDependency,
			yaml:    head + "  - name: ship\n    handler: order.ship\n    after: [pack]\n",
			wantMsg: `dag: order.yaml:5:12: steps[0].after: workflow "order": step "ship" depends on unknown step "pack"`,
		},
		{
			name: "cycle", wantIs: dag.ErrCycle,
			yaml:    head + "  - {name: a, handler: order.ship, needs: b}\n  - {name: b, handler: order.ship, after: a}\n",
			wantMsg: `dag: order.yaml:3:43: steps[0].needs: workflow "order": dependency cycle: a -> b -> a`,
		},
		{
			name: "duplicate step", wantIs: dag.ErrDuplicateStep,
			yaml:    head + "  - {name: a, handler: order.ship}\n  - {name: a, handler: order.ship}\n",
			wantMsg: `dag: order.yaml:4:12: steps[1].name: workflow "order": step "a" declared twice`,
		},
		{
			name: "bad condition", wantIs: dag.ErrBadCondition,
			yaml:    head + "  - name: a\n    handler: order.ship\n    when: input.total >=\n",
			wantMsg: `dag: order.yaml:5:11: steps[0].when: workflow "order": step "a": when "input.total >=" does not compile: unexpected token EOF (1:14)`,
		},
		{
			name: "invalid step name", wantIs: dag.ErrInvalidName,
			yaml:    head + "  - name: a/b\n    handler: order.ship\n",
			wantMsg: `dag: order.yaml:3:11: steps[0].name: workflow "order": invalid step name "a/b" (want a letter followed by up to 63 letters, digits, '_' or '-')`,
		},
		{
			name: "invalid queue", wantIs: dag.ErrInvalidName,
			yaml:    head + "  - name: a\n    handler: order.ship\n    queue: \"q:1\"\n",
			wantMsg: `dag: order.yaml:5:12: steps[0].queue: workflow "order": step "a": invalid queue name "q:1" (want a letter followed by up to 63 letters, digits, '_' or '-')`,
		},
		{
			name: "invalid workflow name", wantIs: dag.ErrInvalidName,
			yaml:    "name: \"or der\"\nsteps:\n  - {name: a, handler: order.ship}\n",
			wantMsg: `dag: order.yaml:1:7: name: workflow "or der": invalid workflow name "or der" (want a letter followed by up to 63 letters, digits, '_' or '-')`,
		},
		{
			name: "empty steps", wantIs: dag.ErrEmptyWorkflow, yaml: "name: order\nsteps: []\n",
			wantMsg: `dag: order.yaml:1:1: steps: workflow "order": no steps`,
		},
		{
			name: "bad jitter", wantIs: dag.ErrInvalidOption,
			yaml:    head + "  - name: a\n    handler: order.ship\n    retry: {jitter: 2}\n",
			wantMsg: `dag: order.yaml:5:12: steps[0].retry: workflow "order": step "a": retry policy: jitter 2, want between 0 and 1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := dag.LoadYAML([]byte(tt.yaml), "order.yaml", registry(t))
			if err == nil {
				t.Fatalf("LoadYAML() = %v, nil; want error %q", w, tt.wantMsg)
			}
			if got := err.Error(); got != tt.wantMsg {
				t.Errorf("LoadYAML() error\n got: %s\nwant: %s", got, tt.wantMsg)
			}
			var ye *dag.YAMLError
			if !errors.As(err, &ye) || ye.File != "order.yaml" {
				t.Errorf("errors.As(*YAMLError) = %v for %T", ye, err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(err, %v) = false", tt.wantIs)
			}
		})
	}
}

func TestLoadYAMLReportsEveryProblem(t *testing.T) {
	src := "name: order\nextra: 1\nsteps:\n  - {name: a, handler: nope}\n  - {name: b, handler: order.ship, colour: red}\n"
	_, err := dag.LoadYAML([]byte(src), "o.yaml", registry(t))
	var ye *dag.YAMLError
	if err == nil || !errors.As(err, &ye) {
		t.Fatalf("LoadYAML() error = %v, want YAMLErrors", err)
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != 3 {
		t.Errorf("got %d problems, want 3:\n%v", got, err)
	}
}

func TestLoadYAMLNilRegistry(t *testing.T) {
	_, err := dag.LoadYAML([]byte(orderYAML), "order.yaml", nil)
	if !errors.Is(err, dag.ErrUnknownHandler) {
		t.Errorf("LoadYAML(nil registry) error = %v, want ErrUnknownHandler", err)
	}
}

// Anchors and aliases work for every value: mappings, scalars, lists
// and whole list items (the schedules loader shares the walker; see
// cron's TestParseSchedulesAliases).
func TestLoadYAMLAliases(t *testing.T) {
	src := `name: order
defaults:
  retry: &fast {max_attempts: 2, initial_backoff: 10ms, max_backoff: 1s}
steps:
  - name: a
    handler: &ship order.ship
    retry: *fast
    queue: &q stock
  - {name: b, handler: *ship, after: &deps [a], queue: *q}
  - {name: c, handler: *ship, needs: *deps, timeout: &t 3s}
  - &last {name: d, handler: *ship, after: [b, c], timeout: *t}
`
	w, err := dag.LoadYAML([]byte(src), "order.yaml", registry(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Step("a").Retry.MaxAttempts; got != 2 {
		t.Errorf("MaxAttempts = %d, want 2", got)
	}
	type step struct {
		Queue   string
		Deps    []string
		Timeout time.Duration
	}
	got := map[string]step{}
	for _, s := range w.Steps() {
		got[s.Name] = step{s.Queue, s.Deps, s.Timeout}
	}
	want := map[string]step{
		"a": {"stock", nil, dag.DefaultStepTimeout},
		"b": {"stock", []string{"a"}, dag.DefaultStepTimeout},
		"c": {dag.DefaultQueueName, []string{"a"}, 3 * time.Second},
		"d": {dag.DefaultQueueName, []string{"b", "c"}, 3 * time.Second},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("steps mismatch (-want +got):\n%s", diff)
	}

	// An aliased item is the same step again.
	_, err = dag.LoadYAML([]byte(src+"  - *last\n"), "order.yaml", registry(t))
	if !errors.Is(err, dag.ErrDuplicateStep) {
		t.Errorf("aliased step item: %v, want ErrDuplicateStep", err)
	}
}

func TestLoadFSAndDir(t *testing.T) {
	reg := registry(t)
	fsys := fstest.MapFS{
		"b.yml":       {Data: []byte("name: second\nsteps:\n  - {name: a, handler: order.ship}\n")},
		"a.yaml":      {Data: []byte(orderYAML)},
		"notes.txt":   {Data: []byte("not a workflow")},
		"sub/c.yaml":  {Data: []byte("broken: [")},
		"z.yaml.orig": {Data: []byte("broken: [")},
	}
	ws, err := dag.LoadFS(fsys, reg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name())
	}
	if diff := cmp.Diff([]string{"order", "second"}, names); diff != "" {
		t.Errorf("LoadFS names mismatch (-want +got):\n%s", diff)
	}

	dir := t.TempDir()
	for name, f := range fsys {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err = dag.LoadDir(dir, reg)
	if err != nil || len(ws) != 2 {
		t.Fatalf("LoadDir() = %d workflows, %v; want 2", len(ws), err)
	}
	w, err := dag.LoadFile(filepath.Join(dir, "a.yaml"), reg)
	if err != nil || w.Name() != "order" {
		t.Fatalf("LoadFile() = %v, %v", w, err)
	}

	// Errors name the file under the directory; every file is reported.
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("name: second\nsteps:\n  - {name: a, handler: order.ship}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("name: x\nsteps: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = dag.LoadDir(dir, reg)
	if !errors.Is(err, dag.ErrWorkflowDefinedTwice) {
		t.Errorf("LoadDir() error = %v, want ErrWorkflowDefinedTwice", err)
	}
	want := "dag: " + filepath.Join(dir, "c.yaml") + `: name: duplicate workflow: workflow "second" is also defined in ` + filepath.Join(dir, "b.yml") + "\n" +
		"dag: " + filepath.Join(dir, "d.yaml") + ":2:8: steps: want a list of steps, got \"1\""
	if err == nil || err.Error() != want {
		t.Errorf("LoadDir() error\n got: %v\nwant: %s", err, want)
	}
	if _, err := dag.LoadFile(filepath.Join(dir, "missing.yaml"), reg); err == nil {
		t.Error("LoadFile(missing) succeeded")
	}
}

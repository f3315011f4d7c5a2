package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/dagflow/dagflow/dag"
)

// FuzzLoadYAML checks that no input makes the loader panic, that every
// failure is a located *YAMLError, and that whatever loads is a sound
// plan. The seeds below and testdata/fuzz/FuzzLoadYAML run in plain
// go test; `go test -fuzz FuzzLoadYAML ./dag` explores further.
func FuzzLoadYAML(f *testing.F) {
	seeds := []string{
		orderYAML,
		"",
		"name: order\nsteps:\n  - {name: a, handler: order.ship}\n",
		"name: order\nsteps:\n  - {name: a, handler: order.ship, needs: b}\n  - {name: b, handler: order.ship, after: a}\n",
		"name: x\nsteps: [*a]\n",
		"a: &a [*a]\n",
		"name: &n order\nsteps:\n  - {name: *n, handler: order.ship, when: 'steps[input.k].output == 1'}\n",
		"name: order\nsteps:\n  - {name: a, handler: order.ship, retry: {max_attempts: 99999999999999999999}}\n",
		"name: order\nsteps:\n  - {name: a, handler: order.ship, retry: {multiplier: .nan, jitter: -.inf}}\n",
		"name: order\nsteps:\n  - {name: a, handler: order.ship, timeout: -1s}\n---\n",
		"? [a]\n: b\n",
		"name: order\nsteps:\n  - name: a\n    handler: order.ship\n    when: \"input.total >= 100 && steps.a.output.x\"\n",
		"%YAML 1.2\n---\n!!map {}\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	reg := registry(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := dag.LoadYAML(data, "fuzz.yaml", reg)
		if err != nil {
			var ye *dag.YAMLError
			if !errors.As(err, &ye) {
				t.Fatalf("error is not a *YAMLError: %T %v", err, err)
			}
			if w != nil {
				t.Fatal("workflow returned with an error")
			}
			return
		}
		order := w.Order()
		if len(order) != len(w.Steps()) {
			t.Fatalf("Order() has %d steps, workflow %d", len(order), len(w.Steps()))
		}
		pos := map[string]int{}
		for i, n := range order {
			pos[n] = i
		}
		all := map[string]bool{}
		for _, s := range w.Steps() {
			all[s.Name] = true
			for _, d := range s.Deps {
				if pos[d] >= pos[s.Name] {
					t.Fatalf("Order() puts %q before its dependency %q", s.Name, d)
				}
			}
			_, _ = s.EvalWhen(context.Background(), json.RawMessage(`{"total":1,"k":"a"}`), nil)
		}
		for _, s := range w.Steps() {
			w.ShouldSkip(s.Name, nil)
		}
		w.CompensationOrder(all)
		_ = w.Mermaid()
		_ = w.DOT()
	})
}

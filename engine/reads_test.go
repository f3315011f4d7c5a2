package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// fanIn is p0..p(n-1), each returning size bytes, joined by j; k follows
// j and its condition reads p0. seen records the outputs each step got.
func fanIn(t *testing.T, n, size int, seen *sync.Map) *dag.Workflow {
	t.Helper()
	big := json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
	b := dag.New("fanin")
	var ps []string
	for i := range n {
		p := fmt.Sprintf("p%d", i)
		ps = append(ps, p)
		b.Step(p, steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return big, nil }))
	}
	record := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
		var names []string
		for k := range sc.Outputs {
			names = append(names, k)
		}
		slices.Sort(names)
		seen.Store(sc.Step, names)
		return json.RawMessage(`{"ok":true}`), nil
	})
	b.Step("j", record, dag.After(ps...))
	b.Step("k", record, dag.After("j"), dag.When(`steps.p0.output != nil`))
	wf, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// TestStepReadsItsUpstream runs a 40-way fan-in of 64 KiB outputs: the
// join receives the 40 outputs, and the step after it every upstream
// output (the join's and the 40 before it), as steps.Context promises.
func TestStepReadsItsUpstream(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var seen sync.Map
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{fanIn(t, 40, 64<<10, &seen)}
		env := enginetest.New(t, o)
		info := env.Wait(t, env.Trigger(t, "fanin", nil))
		env.AssertRun(t, info, persistence.RunSucceeded)
		j, _ := seen.Load("j")
		if got := j.([]string); len(got) != 40 {
			t.Errorf("j received %d outputs, want the 40 of its dependencies", len(got))
		}
		k, _ := seen.Load("k")
		if got := k.([]string); len(got) != 41 || !slices.Contains(got, "j") || !slices.Contains(got, "p39") {
			t.Errorf("k received %d outputs %v, want the 41 upstream of it", len(got), got)
		}
	})
}

// TestMaxStepInput fails a join whose dependencies' outputs are over
// Config.MaxStepInput, on its first attempt, naming the sizes; its
// handler never runs.
func TestMaxStepInput(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var seen sync.Map
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{fanIn(t, 40, 64<<10, &seen)}
		o.Configure = func(c *engine.Config) { c.MaxStepInput = 1 << 20 }
		env := enginetest.New(t, o)
		info := env.Wait(t, env.Trigger(t, "fanin", map[string]int{"n": 1}))
		env.AssertStep(t, info, "j", persistence.StepDead)
		if _, ran := seen.Load("j"); ran {
			t.Error("j's handler ran")
		}
		var atts []persistence.Attempt
		for _, a := range info.Attempts {
			if a.Step == "j" {
				atts = append(atts, a)
			}
		}
		if len(atts) != 1 || atts[0].Outcome != persistence.OutcomeFailed {
			t.Fatalf("attempts of j = %+v; want one, failed", atts)
		}
		want := `engine: step "j" would receive 2.5 MiB (input 7 B and 40 outputs of 2.5 MiB), over Config.MaxStepInput of 1.0 MiB`
		if atts[0].Error != want {
			t.Errorf("j's error = %q\nwant %q", atts[0].Error, want)
		}
	})
}

func TestMaxStepInputValidated(t *testing.T) {
	_, err := engine.New(engine.Config{Store: sqliteStore(t), Redis: newMiniredisClient(t), MaxStepInput: -1})
	if err == nil || !strings.Contains(err.Error(), "engine: Config.MaxStepInput -1 is negative") {
		t.Fatalf("New = %v, want an error naming MaxStepInput", err)
	}
}

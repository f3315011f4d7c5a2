package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

func keysOf(r *recorder, step string, comp bool) []string {
	var out []string
	for _, e := range r.find(step, comp) {
		out = append(out, e.Key)
	}
	return out
}

// A compensated run's completed steps were undone: retrying its failed
// steps or a dead letter of it, or skipping a step, would go on from
// undone work, so each is refused (saying to rerun from a step) and the
// run is left as it was. A rerun from a step is the way to resume it: it
// redoes the undone steps under new idempotency keys (a service that
// honoured the undo must not answer with the first execution), retries
// the dead one under its own, and records who asked.
func TestCompensatedRunResumesOnlyByARerun(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		var fixed atomic.Bool
		fail := func(sc steps.Context) error {
			if sc.Step == "ship" && !sc.Compensation && !fixed.Load() {
				return steps.Permanent(errors.New("carrier refused the parcel"))
			}
			return nil
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{orderWorkflow(t, r, "order", 0, fail, true, nil)}
		env := enginetest.New(t, o)
		id := env.Trigger(t, "order", nil)
		before := env.Wait(t, id)
		env.AssertRun(t, before, persistence.RunCompensated)

		fixed.Store(true)
		ctx := context.Background()
		_, errRun := env.Engine.RetryRun(ctx, id, engine.Actor("alice"))
		for what, err := range map[string]error{
			"RetryRun":  errRun,
			"RetryDead": env.Engine.RetryDead(ctx, id, "ship", engine.Actor("alice")),
			"SkipStep":  env.Engine.SkipStep(ctx, id, "ship", nil, engine.Actor("alice")),
		} {
			var rr *engine.RetryRefusedError
			if !errors.As(err, &rr) || !errors.Is(err, engine.ErrRetryRefused) || rr.RunID != id {
				t.Errorf("%s of a compensated run = %v, want a RetryRefusedError", what, err)
				continue
			}
			if !strings.Contains(err.Error(), "undone") || !strings.Contains(err.Error(), "rerun") {
				t.Errorf("%s's refusal %q does not say the work was undone and to rerun from a step", what, err)
			}
		}
		after := mustGet(t, env.Engine, id)
		env.AssertRun(t, after, persistence.RunCompensated)
		for _, s := range before.Steps {
			if a := stepOf(t, after, s.Step); a.Status != s.Status || a.Attempt != s.Attempt || a.Reruns != s.Reruns {
				t.Errorf("refused actions changed %s: %+v, was %+v", s.Step, a, s)
			}
		}
		if len(after.Actions) != 0 {
			t.Errorf("refused actions recorded: %+v", after.Actions)
		}
		if n := len(r.find("ship", false)); n != 1 {
			t.Errorf("ship ran %d times after the refusals, want 1", n)
		}

		again, err := env.Engine.RetryFrom(ctx, id, "ship", engine.Actor("alice"))
		if err != nil {
			t.Fatalf("RetryFrom of a compensated run: %v", err)
		}
		if diff := cmp.Diff([]string{"reserve", "notify", "points", "ship"}, again); diff != "" {
			t.Errorf("steps run again (-want +got):\n%s", diff)
		}
		info := env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunSucceeded)
		for _, s := range []string{"reserve", "notify", "points"} {
			want := []string{id + "/" + s, id + "/" + s + "/rerun-1"}
			if diff := cmp.Diff(want, keysOf(r, s, false)); diff != "" {
				t.Errorf("%s's executions' keys (-want +got):\n%s", s, diff)
			}
			if n := successes(info, s); n != 2 {
				t.Errorf("%s has %d successes in the history, want 2 (the undone one and the redone one): %+v", s, n, info.Attempts)
			}
		}
		if diff := cmp.Diff([]string{id + "/ship", id + "/ship"}, keysOf(r, "ship", false)); diff != "" {
			t.Errorf("the dead step's retry keeps its key (-want +got):\n%s", diff)
		}
		if len(info.Actions) != 1 {
			t.Fatalf("actions = %+v, want the rerun", info.Actions)
		}
		if a := info.Actions[0]; a.Actor != "alice" || a.Action != persistence.ActionRerun || a.Step != "ship" || a.At.IsZero() {
			t.Errorf("action = %+v, want alice's rerun from ship", a)
		}
	})
}

// A rerun from a step runs it and what is downstream of it again, keeps
// the rest, and is recorded as the default actor's without Actor.
func TestRetryFromStep(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}
		env := enginetest.New(t, o)
		id := env.Trigger(t, "order", nil)
		env.AssertRun(t, env.Wait(t, id), persistence.RunSucceeded)
		ctx := context.Background()
		again, err := env.Engine.RetryFrom(ctx, id, "notify")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"notify", "ship"}, again); diff != "" {
			t.Errorf("steps run again (-want +got):\n%s", diff)
		}
		info := env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunSucceeded)
		for step, n := range map[string]int{"reserve": 1, "points": 1, "notify": 2, "ship": 2} {
			if got := len(r.find(step, false)); got != n {
				t.Errorf("%s ran %d times, want %d", step, got, n)
			}
		}
		if len(info.Actions) != 1 || info.Actions[0].Actor != engine.DefaultActor || info.Actions[0].Action != persistence.ActionRerun ||
			info.Actions[0].Step != "notify" {
			t.Errorf("actions = %+v, want the rerun from notify by %q", info.Actions, engine.DefaultActor)
		}
		if _, err := env.Engine.RetryFrom(ctx, id, "nope"); !errors.Is(err, persistence.ErrStepNotFound) {
			t.Errorf("RetryFrom an unknown step = %v, want ErrStepNotFound", err)
		}
	})
}

// A skipped dead step's output is what its dependents read; its handler
// does not run again.
func TestSkipStep(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var rateRuns atomic.Int32
		wf, err := dag.New("quote").
			Step("load", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
				return json.RawMessage(`{"amount":10}`), nil
			})).
			Step("rate", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
				rateRuns.Add(1)
				return nil, steps.Permanent(errors.New("rates service retired"))
			}), dag.After("load")).
			Step("price", steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
				return sc.Outputs["rate"], nil
			}), dag.After("rate")).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		id := env.Trigger(t, "quote", nil)
		env.AssertRun(t, env.Wait(t, id), persistence.RunFailed)
		ctx := context.Background()
		if err := env.Engine.SkipStep(ctx, id, "rate", json.RawMessage(`{"rate":"by hand"}`), engine.Actor("ops")); err != nil {
			t.Fatal(err)
		}
		info := env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunSucceeded)
		price, _ := info.Step("price")
		if !strings.Contains(string(price.Output), "by hand") {
			t.Errorf("price's output = %s, want the skipped step's output", price.Output)
		}
		if n := rateRuns.Load(); n != 1 {
			t.Errorf("the skipped step ran %d times, want 1 (before it was skipped)", n)
		}
		if len(info.Actions) != 1 || info.Actions[0].Action != persistence.ActionSkip || info.Actions[0].Actor != "ops" {
			t.Errorf("actions = %+v, want ops' skip", info.Actions)
		}
		var rr *engine.RetryRefusedError
		if err := env.Engine.SkipStep(ctx, id, "rate", nil); !errors.As(err, &rr) || !strings.Contains(err.Error(), "no step is dead") {
			t.Errorf("second skip = %v, want a refusal saying no step is dead", err)
		}
		if err := env.Engine.SkipStep(ctx, id, "rate", json.RawMessage(`{`)); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("skip with invalid JSON = %v, want ErrInvalid", err)
		}
	})
}

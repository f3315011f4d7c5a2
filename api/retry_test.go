package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

// The retry modes and the skip over HTTP, each recorded in the run's
// history with the API key's name.
func TestRetryModesAndSkip(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{keys: true})
		ctx := context.Background()
		opKey := newKey(t, env, "night-ops", api.ScopeOperate)
		op := env.client(t, opKey)
		read := env.client(t, newKey(t, env, "viewer", api.ScopeRead))
		env.adminClient = op

		// Skip: the dead charge gets an output and ship runs after it.
		failed := env.Trigger(t, "order", map[string]string{"fail": "charge"})
		env.waitStatus(t, failed, "failed")
		if _, err := read.SkipStep(ctx, failed, "charge", json.RawMessage(`{}`)); err == nil {
			t.Fatal("a read key skipped a step")
		}
		env.raw(t, "POST", "/v1/runs/"+failed+"/steps/charge/skip", `{"output":{"x":`).problem(t, 401, api.CodeUnauthorized)
		d, err := op.SkipStep(ctx, failed, "charge", json.RawMessage(`{"charged":"by hand"}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Actions) != 1 || d.Actions[0].Actor != "night-ops" || d.Actions[0].Action != "skip" || d.Actions[0].Step != "charge" {
			t.Fatalf("actions after the skip = %+v", d.Actions)
		}
		env.waitStatus(t, failed, "succeeded")
		_, err = op.SkipStep(ctx, failed, "charge", nil)
		problemOf(t, err, 409, api.CodeRetryRefused)
		_, err = op.SkipStep(ctx, failed, "nope", nil)
		problemOf(t, err, 404, api.CodeStepNotFound)

		// Rerun from a step of the succeeded run (charge works now).
		env.healed.Store(true)
		res, err := op.RetryRun(ctx, failed, client.RetryRequest{Mode: client.RetryFromStep, Step: "charge"})
		if err != nil || strings.Join(res.Steps, ",") != "charge,ship" {
			t.Fatalf("rerun from charge = %+v, %v", res, err)
		}
		env.waitStatus(t, failed, "succeeded")
		got, err := read.GetRun(ctx, failed)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Actions) != 2 || got.Actions[1].Action != "rerun" || got.Actions[1].Seq != 2 || got.Actions[1].Actor != "night-ops" ||
			strings.Join(got.Actions[1].Steps, ",") != "charge,ship" {
			t.Fatalf("history = %+v", got.Actions)
		}
		// Bad bodies name what was wrong.
		for body, code := range map[string]string{
			`{"mode":"all"}`:                    api.CodeInvalidParameter,
			`{"mode":"from_step"}`:              api.CodeInvalidParameter,
			`{"mode":"failed","step":"charge"}`: api.CodeInvalidParameter,
			`{"mode":"from_step","step":"a b"}`: api.CodeInvalidName,
			`{"mode":"failed","extra":1}`:       api.CodeInvalidJSON,
		} {
			env.raw(t, "POST", "/v1/runs/"+failed+"/retry", body, "Authorization: Bearer "+opKey).problem(t, 400, code)
		}
		_, err = op.RetryRun(ctx, failed, client.RetryRequest{Mode: client.RetryFromStep, Step: "nope"})
		problemOf(t, err, 404, api.CodeStepNotFound)
		_, err = op.RetryRun(ctx, failed, client.RetryRequest{})
		problemOf(t, err, 409, api.CodeRetryRefused)
	})
}

// A compensated run's completed steps were undone: a retry of its failed
// steps, of its dead letter, or a skip is a 409 retry_refused that says
// to rerun from a step, and leaves the run compensated; the rerun from a
// step resumes it.
func TestCompensatedRunRefusesRetryOverHTTP(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var healed atomic.Bool
		h := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			if sc.Step == "charge" && !sc.Compensation && !healed.Load() {
				return nil, steps.Permanent(errors.New("card declined"))
			}
			return nil, nil
		})
		wf, err := dag.New("saga").Step("reserve", h, dag.Compensate(h)).Step("charge", h, dag.After("reserve")).Build()
		if err != nil {
			t.Fatal(err)
		}
		env := newAPIEnv(t, b, envOptions{keys: true, workflows: []*dag.Workflow{wf}})
		ctx := context.Background()
		op := env.client(t, newKey(t, env, "night-ops", api.ScopeOperate))
		env.adminClient = op
		id := env.Trigger(t, "saga", nil)
		env.waitStatus(t, id, "compensated")
		healed.Store(true)

		_, errRun := op.RetryRun(ctx, id, client.RetryRequest{})
		_, errDead := op.RetryDeadLetter(ctx, id, "charge")
		_, errSkip := op.SkipStep(ctx, id, "charge", nil)
		for what, err := range map[string]error{"retry of the failed steps": errRun, "retry of the dead letter": errDead, "skip": errSkip} {
			p := problemOf(t, err, 409, api.CodeRetryRefused)
			if p.RunID != id || !strings.Contains(p.Detail, "undone") || !strings.Contains(p.Detail, "rerun it from a step") {
				t.Errorf("%s: problem %+v, want the run and why, saying to rerun from a step", what, p)
			}
		}
		d, err := op.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Run.Status != "compensated" || len(d.Actions) != 0 {
			t.Fatalf("run after the refusals: %s, actions %+v; want compensated, none", d.Run.Status, d.Actions)
		}
		res, err := op.RetryRun(ctx, id, client.RetryRequest{Mode: client.RetryFromStep, Step: "charge"})
		if err != nil || strings.Join(res.Steps, ",") != "reserve,charge" {
			t.Fatalf("rerun from charge = %+v, %v; want reserve (undone) and charge again", res, err)
		}
		env.waitStatus(t, id, "succeeded")
	})
}

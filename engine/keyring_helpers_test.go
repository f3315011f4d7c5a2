package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/dagflow/dagflow/codec/aesgcm"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// keyring is enginetest.Keyring.
var keyring = enginetest.Keyring

// sealedWorkflow is "sealed": step "a" fails for good with an error
// naming the order, unless the input's "ok" is true.
func sealedWorkflow(t testing.TB) *dag.Workflow {
	t.Helper()
	wf, err := dag.New("sealed").Step("a", steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
		var in struct {
			OK bool `json:"ok"`
		}
		_ = json.Unmarshal(sc.Input, &in)
		if !in.OK {
			return nil, steps.Permanent(errors.New("refused order SECRET-1"))
		}
		return json.RawMessage(`{"done":"SECRET-OUT"}`), nil
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// sealedUnder writes, with an engine whose codec is c, a run that
// succeeded, one whose step is dead (a run error, a step error, an
// attempt error) and an event, and stops that engine. It returns the
// stopped engine's Env (its store, Redis and prefix), the dead run's and
// the good run's ids.
func sealedUnder(t *testing.T, o enginetest.Options, c *aesgcm.Codec) (env *enginetest.Env, dead, good string) {
	t.Helper()
	o.Workflows = []*dag.Workflow{sealedWorkflow(t)}
	o.Configure = func(cfg *engine.Config) { cfg.Codec = c }
	env = enginetest.New(t, o)
	dead = env.Trigger(t, "sealed", map[string]any{"order": "SECRET-1"})
	good = env.Trigger(t, "sealed", map[string]any{"order": "SECRET-2", "ok": true})
	env.AssertRun(t, env.Wait(t, dead), persistence.RunFailed)
	env.AssertRun(t, env.Wait(t, good), persistence.RunSucceeded)
	if _, err := env.Engine.Publish(context.Background(), "order.noted", map[string]any{"order": "SECRET-3"}, engine.EventID("ev-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.CreateSchedule(context.Background(), engine.ScheduleDefinition{Name: "sealed-nightly",
		Spec: "0 2 * * *", Workflow: "sealed", Input: json.RawMessage(`{"order":"SECRET-4"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := env.Engine.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return env, dead, good
}

// forgetProbe deletes the store's codec probe: the store is then one
// whose payloads were encrypted by a release that wrote none.
func forgetProbe(t *testing.T, st persistence.Store) {
	t.Helper()
	if _, err := st.(persistence.TxStore).DB().ExecContext(context.Background(), `DELETE FROM codec_probe`); err != nil {
		t.Fatal(err)
	}
}

// keyedNode returns options for another node of env's cluster (its store,
// Redis and prefix) with the codec c and the sealed workflow.
func keyedNode(t testing.TB, env *enginetest.Env, c *aesgcm.Codec, configure func(*engine.Config)) enginetest.Options {
	return enginetest.Options{Store: env.Store, Redis: env.Redis, Prefix: env.Prefix, Workflows: []*dag.Workflow{sealedWorkflow(t)},
		Configure: func(cfg *engine.Config) {
			if c != nil {
				cfg.Codec = c
			}
			if configure != nil {
				configure(cfg)
			}
		}}
}

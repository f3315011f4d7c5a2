package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// dagflow_runs_started_total counts what docs/observability.md says it
// counts: the runs this process created, by Trigger and by the events it
// published (a repeated idempotency key creates none, so counts none),
// and not the runs another process created, such as a `dagflow trigger`
// command, even when this node runs and finishes them. So started can be
// below finished, by exactly the runs created elsewhere.
func TestMetricsRunsStartedCountsCreationsHere(t *testing.T) {
	ok := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return []byte(`{}`), nil })
	wf, err := dag.New("bill", dag.OnEvent("order.placed")).Step("a", ok).Build()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	env := enginetest.New(t, enginetest.Options{
		Workflows: []*dag.Workflow{wf},
		Configure: func(c *engine.Config) { c.Registerer = reg },
	})
	ctx := context.Background()
	first := env.Trigger(t, "bill", nil, engine.IdempotencyKey("k1"))
	if again := env.Trigger(t, "bill", nil, engine.IdempotencyKey("k1")); again != first {
		t.Fatalf("a repeated key gave run %s, want %s", again, first)
	}
	pub, err := env.Engine.Publish(ctx, "order.placed", map[string]int{"total": 1})
	if err != nil || len(pub.Runs) != 1 {
		t.Fatalf("publish: %+v, %v; want one run", pub, err)
	}
	// Another process without workers, as `dagflow trigger` is: its own
	// registry counts its run, this node's does not.
	cliReg := prometheus.NewRegistry()
	cli, err := engine.New(engine.Config{Store: env.Store, Redis: env.Redis, Prefix: env.Prefix,
		ScheduleInterval: -1, ReconcileInterval: -1, MaxClockSkew: -1, Registerer: cliReg, NoWorkers: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Register(wf); err != nil {
		t.Fatal(err)
	}
	other, err := cli.Trigger(ctx, "bill", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first, pub.Runs[0].RunID, other} {
		env.AssertRun(t, env.Wait(t, id), persistence.RunSucceeded)
	}
	// A run's end is counted just after its commit, which Wait sees:
	// wait for the count, then check both.
	finished := "dagflow_runs_finished_total{status=succeeded,workflow=bill}"
	waitFor(t, 10*time.Second, "three finished runs counted", func() bool { return scrape(t, reg)[finished] >= 3 })
	got := scrape(t, reg)
	for k, want := range map[string]float64{
		"dagflow_runs_started_total{workflow=bill}": 2,
		finished: 3,
	} {
		if got[k] != want {
			t.Errorf("this node's %s = %v, want %v", k, got[k], want)
		}
	}
	if v := scrape(t, cliReg)["dagflow_runs_started_total{workflow=bill}"]; v != 1 {
		t.Errorf("the other process's dagflow_runs_started_total{workflow=bill} = %v, want 1", v)
	}
}

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/steps"
)

// TestEventsPublishAndList: `events publish` starts the runs of the
// workflows subscribed in the stored definitions (no handler here),
// once per id, and refuses a reused id with another payload; `events`
// lists the events with their runs.
func TestEventsPublishAndList(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	w, err := dag.New("ship", dag.OnEvent("order.placed", dag.Filter("event.total >= 100"))).
		Step("a", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })).Build()
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: env.store, Redis: env.rdb, Prefix: env.prefix, NoWorkers: true, ReconcileInterval: -1, ScheduleInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(w); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, ctx, append(args, env.flags...)...)
	}
	code, out, errb := cli("events", "publish", "order.placed", "--id", "e-1", "--payload", `{"total":150}`)
	if code != 0 || !strings.Contains(out, "event e-1 published, 1 runs") || !strings.Contains(out, "ship\t") {
		t.Fatalf("events publish: exit %d, %q %q", code, out, errb)
	}
	runID := strings.TrimSpace(strings.SplitN(strings.Split(out, "\n")[1], "\t", 2)[1])
	code, out, errb = cli("events", "publish", "order.placed", "--id", "e-1", "--payload", `{"total":150}`)
	if code != 0 || !strings.Contains(out, "already published") || !strings.Contains(out, runID) {
		t.Errorf("repeat: exit %d, %q %q; want the same run %s", code, out, errb, runID)
	}
	if code, _, errb := cli("events", "publish", "order.placed", "--id", "e-1", "--payload", `{"total":1}`); code != 1 || !strings.Contains(errb, "different name or payload") {
		t.Errorf("conflicting repeat: exit %d, %q", code, errb)
	}
	if code, _, errb := cli("events", "publish", "order.placed", "--payload", `{`); code == 0 || !strings.Contains(errb, "not valid JSON") {
		t.Errorf("bad payload: exit %d, %q", code, errb)
	}
	if code, _, errb := cli("events", "publish", "order placed"); code != 1 || !strings.Contains(errb, `"order placed"`) {
		t.Errorf("bad name: exit %d, %q", code, errb)
	}
	code, out, errb = cli("events", "publish", "order.placed", "--payload", `{"total":5}`)
	if code != 0 || !strings.Contains(out, "published, 0 runs") {
		t.Errorf("filtered out: exit %d, %q %q", code, out, errb)
	}
	code, out, errb = cli("events", "list", "--name", "order.placed")
	if code != 0 || !strings.Contains(out, "e-1") || !strings.Contains(out, "ship="+runID) || strings.Count(out, "order.placed") != 2 {
		t.Errorf("events list: exit %d, %q %q", code, out, errb)
	}
	if code, _, errb := cli("events", "--after", "yesterday"); code == 0 || !strings.Contains(errb, "--after") {
		t.Errorf("bad --after: exit %d, %q", code, errb)
	}
}

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// TestRunsSignal: `runs signal RUN STEP --payload JSON` completes a step
// waiting for a signal (the run finishes on the worker), a repeat with
// the same payload succeeds, and one with another payload is refused.
func TestRunsSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	w, err := dag.New("approval").Step("approve", nil, dag.WaitForSignal()).Build()
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: env.store, Redis: env.rdb, Prefix: env.prefix, ReconcileInterval: 100 * time.Millisecond, ScheduleInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(w); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	run, err := e.Trigger(ctx, "approval", nil)
	if err != nil {
		t.Fatal(err)
	}
	status := func() (persistence.RunStatus, persistence.StepStatus) {
		info, err := e.Get(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		return info.Run.Status, info.Steps[0].Status
	}
	for _, st := status(); st != persistence.StepParked; _, st = status() {
		if ctx.Err() != nil {
			t.Fatalf("approve never parked: %s", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, ctx, append(args, env.flags...)...)
	}
	if code, out, errb := cli("runs", "signal", run, "approve", "--payload", `{"by":"ann"}`); code != 0 || !strings.Contains(out, "signalled") {
		t.Fatalf("runs signal: exit %d, %q %q", code, out, errb)
	}
	if code, _, errb := cli("runs", "signal", run, "approve", "--payload", `{"by":"ann"}`); code != 0 {
		t.Errorf("repeated signal: exit %d, %q", code, errb)
	}
	if code, _, errb := cli("runs", "signal", run, "approve", "--payload", `{"by":"bob"}`); code != 1 || !strings.Contains(errb, "not waiting") {
		t.Errorf("signal with another payload: exit %d, %q", code, errb)
	}
	for rs, _ := status(); rs != persistence.RunSucceeded; rs, _ = status() {
		if ctx.Err() != nil {
			t.Fatalf("run not succeeded: %s", rs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

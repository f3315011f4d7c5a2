package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// deadOrder makes the order run id's reserve step succeed and its
// notify step dead-letter, the run ending failed or, with compensated,
// compensated with reserve undone, as the engine would.
func deadOrder(t *testing.T, ctx context.Context, st persistence.Store, id string, compensated bool) {
	t.Helper()
	now := time.Now()
	claim := func(step, fence string, comp bool) {
		t.Helper()
		if _, err := st.StepClaim(ctx, persistence.StepClaimParams{RunID: id, Step: step, Fence: fence, Worker: "w", Compensation: comp,
			LeaseUntil: now.Add(time.Minute), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	claim("reserve", "f1", false)
	if _, err := st.StepComplete(ctx, persistence.StepCompleteParams{RunID: id, Step: "reserve", Fence: "f1", Now: now}); err != nil {
		t.Fatal(err)
	}
	claim("notify", "f2", false)
	dead := persistence.RunFailed
	if compensated {
		dead = persistence.RunCompensating
	}
	if _, err := st.StepFail(ctx, persistence.StepFailParams{RunID: id, Step: "notify", Fence: "f2", Error: "mail server gone",
		DeadRunStatus: dead, Now: now}); err != nil {
		t.Fatal(err)
	}
	if !compensated {
		return
	}
	if _, err := st.StepTransition(ctx, persistence.StepTransitionParams{RunID: id, Steps: []string{"reserve"},
		From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: now}); err != nil {
		t.Fatal(err)
	}
	claim("reserve", "u1", true)
	if _, err := st.StepComplete(ctx, persistence.StepCompleteParams{RunID: id, Step: "reserve", Fence: "u1", Compensation: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunTransition(ctx, persistence.RunTransitionParams{RunID: id, From: []persistence.RunStatus{persistence.RunCompensating},
		To: persistence.RunCompensated, Error: "notify dead", Now: now}); err != nil {
		t.Fatal(err)
	}
}

// TestDLQRetry: dlq retry of a dead step of a failed run requeues it and
// records the action as the CLI's; of a compensated run, whose completed
// steps were undone, it exits 1 saying to rerun from a step, and changes
// nothing.
func TestDLQRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	addr := testenv.RequireRedis(t)
	dsn := testenv.MySQLDatabase(t)
	prefix := testenv.KeyPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	testenv.DeleteKeys(t, rdb, prefix)
	base := []string{"--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", prefix}

	failed := triggerOrder(t, ctx, store, rdb, prefix)
	deadOrder(t, ctx, store, failed, false)
	if code, out, errb := runCLI(t, ctx, append([]string{"dlq", "retry", failed, "notify"}, base...)...); code != 0 || !strings.Contains(out, "requeued") {
		t.Fatalf("dlq retry of a failed run exited %d: %s %s", code, out, errb)
	}
	acts, err := store.RunActionList(ctx, failed)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[0].Actor != "cli" || acts[0].Action != persistence.ActionRetry || acts[0].Step != "notify" {
		t.Errorf("actions after dlq retry = %+v, want the retry of notify by cli", acts)
	}

	comp := triggerOrder(t, ctx, store, rdb, prefix)
	deadOrder(t, ctx, store, comp, true)
	code, out, errb := runCLI(t, ctx, append([]string{"dlq", "retry", comp, "notify"}, base...)...)
	if code != 1 || !strings.Contains(errb, "retry refused") || !strings.Contains(errb, "undone") || !strings.Contains(errb, "rerun it from a step") {
		t.Errorf("dlq retry of a compensated run exited %d, stdout %q, stderr %q; want 1 and the refusal saying to rerun from a step", code, out, errb)
	}
	run, err := store.RunGet(ctx, comp)
	if err != nil {
		t.Fatal(err)
	}
	if acts, _ := store.RunActionList(ctx, comp); run.Status != persistence.RunCompensated || len(acts) != 0 {
		t.Errorf("compensated run after the refused retry: %s, actions %+v; want compensated, none", run.Status, acts)
	}
}

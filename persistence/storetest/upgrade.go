package storetest

import (
	"database/sql"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// RunUpgradeRunningAttempts checks the migration that leaves one history
// format. open returns a store whose database is migrated up to the
// version before that migration, its *sql.DB, and a function that applies
// the remaining migrations. Steps claimed by an earlier version, with
// their attempt in a 'running' row instead of on the step row, end up in
// the current format: the attempt's start and worker on the step row, the
// row gone, the history unchanged; and they complete as any other step.
// A 'running' row of a step no longer running (an attempt cut short)
// stays.
func RunUpgradeRunningAttempts(t *testing.T, open func(t *testing.T) (persistence.Store, *sql.DB, func() error)) {
	st, db, migrate := open(t)
	c := ctx(t)
	id := createRun(t, st, "wf", "", "a", "b").Run.ID
	claim(t, st, id, "a", "fa", at(time.Second))
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(c, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// a as an earlier version claimed it; b with the row of an attempt
	// that a cancel cut short (b itself is queued again).
	exec(`UPDATE step_runs SET claimed_at = NULL, worker = '' WHERE run_id = ? AND step = ?`, id, "a")
	exec(`INSERT INTO step_attempts (run_id, step, kind, attempt, worker, fence, outcome, started_at)
		VALUES (?, ?, ?, 1, 'old', ?, ?, '2026-03-04 05:06:08.123456')`, id, "a", string(persistence.AttemptForward), "fa", string(persistence.OutcomeRunning))
	exec(`INSERT INTO step_attempts (run_id, step, kind, attempt, worker, fence, outcome, started_at)
		VALUES (?, ?, ?, 1, 'cut', ?, ?, '2026-03-04 05:06:08.123456')`, id, "b", string(persistence.AttemptForward), "gone", string(persistence.OutcomeRunning))
	before := map[string][]string{"a": attemptRows(t, st, id, "a"), "b": attemptRows(t, st, id, "b")}

	if err := migrate(); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	var rowsOfA int
	if err := db.QueryRowContext(c, `SELECT COUNT(*) FROM step_attempts WHERE run_id = ? AND step = ?`, id, "a").Scan(&rowsOfA); err != nil {
		t.Fatal(err)
	}
	if rowsOfA != 0 {
		t.Errorf("a still has %d attempt rows after the upgrade, want 0 (its attempt on its step row)", rowsOfA)
	}
	wantA := []string{"1 old running in progress 1s..-"}
	if diff := cmp.Diff(wantA, attemptRows(t, st, id, "a")); diff != "" {
		t.Errorf("a's history after the upgrade (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before["b"], attemptRows(t, st, id, "b")); diff != "" {
		t.Errorf("b's history changed by the upgrade (-before +after):\n%s", diff)
	}
	complete(t, st, id, "a", "fa", "", at(2*time.Second))
	if diff := cmp.Diff([]string{"1 old succeeded recorded 1s..2s"}, attemptRows(t, st, id, "a")); diff != "" {
		t.Errorf("a completed after the upgrade (-want +got):\n%s", diff)
	}
}

// RunUpgradeIsolation checks the migration that adds reconciling by
// workflow, the store id and the node registry. open returns a store
// whose database is migrated up to the version before that migration,
// with data in it, and a function that applies the rest. After it, the
// runs and steps written before are listed by workflow, the dead-letter
// list still finds the dead steps, the store has an id, and nodes
// register.
func RunUpgradeIsolation(t *testing.T, open func(t *testing.T) (persistence.Store, func() error)) {
	st, migrate := open(t)
	c := ctx(t)
	queued := createRun(t, st, "a", "", "x").Run.ID
	expired := createRun(t, st, "b", "", "x").Run.ID
	claim(t, st, expired, "x", "f", at(time.Second))
	dead := createRun(t, st, "b", "", "x", "y").Run.ID
	claim(t, st, dead, "x", "f", at(time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: dead, Step: "x", Fence: "f", Error: "x", Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	pending, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "a", Now: t0, StartAt: at(time.Minute), Steps: specs("x")})
	if err != nil {
		t.Fatal(err)
	}

	if err := migrate(); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	late := persistence.ListDueParams{Before: at(time.Hour)}
	byWF := func(wf ...string) persistence.ListDueParams { p := late; p.Workflows = wf; return p }
	if q, err := st.StepListQueued(c, byWF("a")); err != nil || len(q) != 1 || q[0].RunID != queued {
		t.Errorf("StepListQueued(a) after the upgrade = %v, %v; want a's queued step", names(q), err)
	}
	if q, err := st.StepListQueued(c, late); err != nil || len(q) != 2 {
		t.Errorf("StepListQueued after the upgrade = %v, %v; want 2 (a's x, b's y)", names(q), err)
	}
	if e, err := st.StepListLeaseExpired(c, byWF("b")); err != nil || len(e) != 1 || e[0].RunID != expired {
		t.Errorf("StepListLeaseExpired(b) after the upgrade = %v, %v; want b's running step", names(e), err)
	}
	if e, err := st.StepListLeaseExpired(c, byWF("a")); err != nil || len(e) != 0 {
		t.Errorf("StepListLeaseExpired(a) after the upgrade = %v, %v; want none", names(e), err)
	}
	if d, err := st.RunListDue(c, byWF("a")); err != nil || len(d) != 1 || d[0].ID != pending.Run.ID {
		t.Errorf("RunListDue(a) after the upgrade = %+v, %v; want the delayed run", d, err)
	}
	page, err := st.StepListDead(c, persistence.StepListDeadParams{})
	if err != nil || len(page.Steps) != 1 || page.Steps[0].RunID != dead {
		t.Errorf("StepListDead after the upgrade = %v, %v; want the dead step", names(page.Steps), err)
	}
	if id, err := st.StoreID(c); err != nil || id == "" {
		t.Errorf("StoreID after the upgrade = %q, %v", id, err)
	}
	if err := st.NodeHeartbeat(c, persistence.Node{ID: "n", HeartbeatAt: t0}); err != nil {
		t.Errorf("NodeHeartbeat after the upgrade: %v", err)
	}
}

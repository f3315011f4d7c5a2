package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// TestRunsPurge: `runs purge --dry-run` counts and deletes nothing;
// `runs purge` deletes the runs that finished before the date, with their
// steps and history, and prints what it deleted; a run with a dead step
// and a run that finished after the date stay.
func TestRunsPurge(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB")
	}
	dsn := testenv.MySQLDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old := time.Date(2020, 3, 1, 12, 0, 0, 0, time.UTC)
	mk := func(id string, at time.Time, dead bool) {
		t.Helper()
		if _, err := st.RunCreate(ctx, persistence.RunCreateParams{ID: id, Workflow: "wf", Now: at,
			Steps: []persistence.StepSpec{{Name: "a"}, {Name: "b", Deps: []string{"a"}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.StepClaim(ctx, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "f", Worker: "w", LeaseUntil: at.Add(time.Minute), Now: at}); err != nil {
			t.Fatal(err)
		}
		p := persistence.StepFailParams{RunID: id, Step: "a", Fence: "f", Error: "boom", Now: at.Add(time.Second)}
		if dead {
			p.DeadRunStatus = persistence.RunFailed
		} else {
			retry := at.Add(time.Hour)
			p.RetryAt = &retry
		}
		if _, err := st.StepFail(ctx, p); err != nil {
			t.Fatal(err)
		}
		if !dead {
			if _, err := st.RunTransition(ctx, persistence.RunTransitionParams{RunID: id, To: persistence.RunCancelled,
				CancelPendingSteps: true, Now: at.Add(2 * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("old-1", old, false)
	mk("old-2", old.Add(time.Hour), false)
	mk("old-dead", old, true)
	mk("recent", time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC), false)

	code, out, errb := runCLI(t, ctx, "runs", "purge", "--before", "2020-04-01", "--dry-run", "--mysql-dsn", dsn)
	if code != 0 {
		t.Fatalf("runs purge --dry-run exited %d: %s", code, errb)
	}
	for _, want := range []string{"would delete 2 runs that finished before 2020-04-01T00:00:00Z: 4 steps, 2 attempts", "kept 1 runs with a dead step"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs purge --dry-run does not say %q:\n%s", want, out)
		}
	}
	for _, id := range []string{"old-1", "old-2", "old-dead", "recent"} {
		if _, err := st.RunGet(ctx, id); err != nil {
			t.Errorf("after the dry run, run %s: %v", id, err)
		}
	}

	code, out, errb = runCLI(t, ctx, "runs", "purge", "--before", "2020-04-01", "--mysql-dsn", dsn)
	if code != 0 {
		t.Fatalf("runs purge exited %d: %s", code, errb)
	}
	if want := "deleted 2 runs that finished before 2020-04-01T00:00:00Z: 4 steps, 2 attempts, 0 event links, 0 events, 0 schedule ticks"; !strings.Contains(out, want) {
		t.Errorf("runs purge does not say %q:\n%s", want, out)
	}
	for _, id := range []string{"old-1", "old-2"} {
		if _, err := st.RunGet(ctx, id); !errors.Is(err, persistence.ErrRunNotFound) {
			t.Errorf("purged run %s: %v, want ErrRunNotFound", id, err)
		}
		if atts, _ := st.AttemptList(ctx, id); len(atts) != 0 {
			t.Errorf("history of purged run %s remains: %v", id, atts)
		}
	}
	for _, id := range []string{"old-dead", "recent"} {
		if _, err := st.RunGet(ctx, id); err != nil {
			t.Errorf("run %s: %v; want kept", id, err)
		}
	}
}

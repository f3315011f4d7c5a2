package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// TestAttemptOrderNotByID: AttemptList does not read order into the
// attempt rows' AUTO_INCREMENT ids, which TiDB hands out in ranges cached
// per server (a later row may get a smaller id): two attempts alike in
// step, kind and number are listed by start, whichever id each got.
func TestAttemptOrderNotByID(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	run, err := s.RunCreate(ctx, persistence.RunCreateParams{ID: "r", Workflow: "wf", Now: now, Steps: []persistence.StepSpec{{Name: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The later attempt first, with the smaller id: as two TiDB servers
	// with their own id ranges may write them.
	for _, a := range []struct {
		id      int64
		worker  string
		started time.Time
	}{{100, "later", now.Add(2 * time.Second)}, {200, "earlier", now.Add(time.Second)}} {
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO step_attempts (id, run_id, step, kind, attempt, worker, fence, outcome, started_at, finished_at)
			VALUES (?, ?, 'a', 'step', 1, ?, ?, 'lost', ?, ?)`, a.id, run.Run.ID, a.worker, "f-"+a.worker, a.started, a.started.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.AttemptList(ctx, run.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var workers []string
	for _, a := range got {
		workers = append(workers, a.Worker)
	}
	if len(workers) != 2 || workers[0] != "earlier" || workers[1] != "later" {
		t.Errorf("attempts listed by worker %v, want [earlier later] (by start)", workers)
	}
}

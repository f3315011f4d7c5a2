package seed_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dagflow/dagflow/internal/bench/seed"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openStore opens a MySQL store on a database private to the test, with
// the schema migrated.
func openStore(t *testing.T) *mysql.Store {
	t.Helper()
	dsn := testenv.MySQLDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
	if err != nil {
		t.Fatalf("mysql.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFinishedRuns(t *testing.T) {
	// Both writers leave the same rows.
	for _, load := range []bool{true, false} {
		t.Run(map[bool]string{true: "load data", false: "inserts"}[load], func(t *testing.T) {
			seed.UseLoadData(load)
			defer seed.UseLoadData(true)
			testFinishedRuns(t)
		})
	}
}

func testFinishedRuns(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	end := time.Now()
	const n = 25
	var progress []int
	// A batch of 10 with 3 batches at once: batches commit out of order.
	err := seed.FinishedRuns(ctx, s.DB(), seed.Params{Runs: n, Batch: 10, Concurrency: 3, End: end,
		Progress: func(done int) { progress = append(progress, done) }})
	if err != nil {
		t.Fatalf("FinishedRuns: %v", err)
	}
	if len(progress) != 3 || progress[2] != n {
		t.Errorf("progress = %v, want three calls ending at %d", progress, n)
	}
	page, err := s.RunList(ctx, persistence.RunListParams{Workflow: "order", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != n {
		t.Fatalf("RunList found %d runs, want %d", len(page.Runs), n)
	}
	for i, r := range page.Runs {
		if r.Status != persistence.RunSucceeded || r.FinishedAt == nil || r.StartedAt == nil || r.CreatedAt.After(end) {
			t.Errorf("run %d = %+v, want succeeded and finished before %v", i, r, end)
		}
		if i > 0 && !r.CreatedAt.Before(page.Runs[i-1].CreatedAt) {
			t.Errorf("runs %d and %d are not newest first", i-1, i)
		}
	}
	run := page.Runs[0]
	sts, err := s.StepList(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantDeps := map[string]int{"reserve": 0, "notify": 1, "points": 1, "ship": 2}
	if len(sts) != 4 {
		t.Fatalf("StepList = %d steps, want 4", len(sts))
	}
	for i, st := range sts {
		if st.Step != seed.DefaultSteps[i].Name || st.Status != persistence.StepSucceeded ||
			len(st.Deps) != wantDeps[st.Step] || st.Attempt != 1 || string(st.Output) != `{"ok":true}` ||
			st.QueuedAt == nil || st.FinishedAt == nil {
			t.Errorf("step %d = %+v", i, st)
		}
	}
	atts, err := s.AttemptList(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 4 {
		t.Fatalf("AttemptList = %d attempts, want 4", len(atts))
	}
	for _, a := range atts {
		if a.Outcome != persistence.OutcomeSucceeded || a.Kind != persistence.AttemptForward || a.Duration() <= 0 {
			t.Errorf("attempt %+v", a)
		}
	}
	// The seeded history is invisible to the reconciler's queries.
	q, err := s.StepListQueued(ctx, persistence.ListDueParams{Before: time.Now()})
	if err != nil || len(q) != 0 {
		t.Errorf("StepListQueued = %d steps, %v", len(q), err)
	}
	// A second seeding adds runs without id collisions.
	if err := seed.FinishedRuns(ctx, s.DB(), seed.Params{Runs: 5, End: end}); err != nil {
		t.Fatalf("second FinishedRuns: %v", err)
	}
	if err := seed.FinishedRuns(ctx, s.DB(), seed.Params{Runs: 1, Steps: []seed.Step{{Name: "a", Deps: []string{"b"}}}}); err == nil {
		t.Error("a step depending on a later step was accepted")
	}
	if err := seed.FinishedRuns(ctx, s.DB(), seed.Params{Runs: 3, First: 4}); err == nil {
		t.Error("First beyond Runs was accepted")
	}
}

// TestFinishedRunsTopUp: a history written in two calls, the second from
// where the first stopped, is the history written in one.
func TestFinishedRunsTopUp(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	end := time.Now()
	var last int
	progress := func(done int) { last = max(last, done) }
	if err := seed.FinishedRuns(ctx, s.DB(), seed.Params{Runs: 30, Batch: 7, End: end, Progress: progress}); err != nil {
		t.Fatal(err)
	}
	// The second call tops the history up from 30 runs to 50, as the
	// bench does when its kept database holds 30.
	if err := seed.FinishedRuns(ctx, s.DB(), seed.Params{Runs: 50, First: 30, Batch: 7, End: end, Progress: progress}); err != nil {
		t.Fatal(err)
	}
	if last != 50 {
		t.Errorf("progress ended at %d, want 50", last)
	}
	page, err := s.RunList(ctx, persistence.RunListParams{Workflow: "order", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 50 {
		t.Fatalf("RunList found %d runs, want 50", len(page.Runs))
	}
	seen := map[string]bool{}
	for _, r := range page.Runs {
		if seen[r.ID] {
			t.Errorf("run id %s written twice", r.ID)
		}
		seen[r.ID] = true
		sts, err := s.StepList(ctx, r.ID)
		if err != nil || len(sts) != 4 {
			t.Errorf("run %s: %d steps, %v", r.ID, len(sts), err)
		}
	}
}

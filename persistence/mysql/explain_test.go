package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/persistence"
)

// TestQueriesUseIndexes EXPLAINs the reconciler's and the listing queries,
// as the store builds them, over a database with history in it, and
// requires each to read through an index (never a full table scan, never
// a full index scan that must sort).
func TestQueriesUseIndexes(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	fill(t, s, now)
	history(t, s.DB(), now, 20000)
	for _, table := range []string{"workflow_runs", "step_runs", "step_attempts"} {
		if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range s.IndexedQueries(now) {
		rows := explain(t, s.DB(), q.SQL, q.Args)
		for _, r := range rows {
			t.Logf("%-32s table=%s type=%s key=%s rows=%s extra=%s", q.Name, r["table"], r["type"], r["key"], r["rows"], r["Extra"])
			switch {
			case strings.HasPrefix(r["table"], "<"):
				// A derived table or a union's result (RunList with
				// several statuses): the few rows its parts read, and
				// those parts are checked on their own rows.
			case r["key"] == "":
				t.Errorf("%s: no index used on %s (type %s, extra %q)\n%s", q.Name, r["table"], r["type"], r["Extra"], q.SQL)
			case r["type"] == "ALL":
				t.Errorf("%s: full table scan of %s\n%s", q.Name, r["table"], q.SQL)
			case r["type"] == "index" && strings.Contains(r["Extra"], "filesort"):
				t.Errorf("%s: full index scan plus sort on %s\n%s", q.Name, r["table"], q.SQL)
			}
		}
	}
}

func explain(t *testing.T, db *sql.DB, query string, args []any) []map[string]string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for i, c := range cols {
			m[c] = vals[i].String
		}
		out = append(out, m)
	}
	return out
}

// fill creates a history: finished runs with finished steps, plus a few
// runs in every live state.
func fill(t *testing.T, s persistence.Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	const runs = 200
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			created := now.Add(-time.Duration(runs-i) * time.Minute)
			id, _ := uuid.NewV7()
			wf := fmt.Sprintf("w%d", i%5)
			res, err := s.RunCreate(ctx, persistence.RunCreateParams{ID: id.String(), Workflow: wf, Now: created,
				Steps: []persistence.StepSpec{{Name: "a"}, {Name: "b", Deps: []string{"a"}}, {Name: "c", Deps: []string{"b"}}}})
			if err != nil {
				t.Error(err)
				return
			}
			rid := res.Run.ID
			if i%10 == 0 {
				return // stays queued
			}
			if _, err := s.StepClaim(ctx, persistence.StepClaimParams{RunID: rid, Step: "a", Fence: "f", Worker: "w", LeaseUntil: created.Add(time.Minute), Now: created}); err != nil {
				t.Error(err)
				return
			}
			switch i % 10 {
			case 1:
				return // running, lease expired
			case 2:
				at := created.Add(time.Hour)
				_, err = s.StepFail(ctx, persistence.StepFailParams{RunID: rid, Step: "a", Fence: "f", RetryAt: &at, Error: "x", Now: created})
			case 3:
				_, err = s.StepFail(ctx, persistence.StepFailParams{RunID: rid, Step: "a", Fence: "f", Error: "x", Now: created,
					DeadRunStatus: persistence.RunFailed})
			default:
				_, err = s.StepComplete(ctx, persistence.StepCompleteParams{RunID: rid, Step: "a", Fence: "f", Now: created})
				if err == nil {
					_, err = s.RunTransition(ctx, persistence.RunTransitionParams{RunID: rid, To: persistence.RunSucceeded, Now: created, CancelPendingSteps: true})
				}
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// A few delayed runs.
	for i := range 5 {
		id, _ := uuid.NewV7()
		if _, err := s.RunCreate(ctx, persistence.RunCreateParams{ID: id.String(), Workflow: "later", Now: now, StartAt: now.Add(time.Duration(i+1) * time.Hour),
			Steps: []persistence.StepSpec{{Name: "a"}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// history bulk-inserts n finished runs (two succeeded steps each) created
// before now: the rows that pile up over months and that no reconciler
// or listing query may scan.
func history(t *testing.T, db *sql.DB, now time.Time, n int) {
	t.Helper()
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		var runs, steps strings.Builder
		var rargs, sargs []any
		for i := lo; i < min(lo+batch, n); i++ {
			if i > lo {
				runs.WriteString(", ")
				steps.WriteString(", ")
			}
			id := fmt.Sprintf("h%07d", i)
			created := now.Add(-time.Duration(n-i) * time.Hour)
			done := created.Add(time.Minute)
			runs.WriteString("(?, ?, 1, 'succeeded', ?, ?, ?, ?, ?)")
			rargs = append(rargs, id, fmt.Sprintf("w%d", i%5), created, created, created, done, done)
			steps.WriteString("(?, 'a', 0, ?, 'default', 'succeeded', '', 'b', 1, 0, ?, ?, ?, ?), (?, 'b', 1, ?, 'default', 'succeeded', 'a', '', 1, 0, ?, ?, ?, ?)")
			wf := fmt.Sprintf("w%d", i%5)
			sargs = append(sargs, id, wf, created, created, done, done, id, wf, created, created, done, done)
		}
		if _, err := db.Exec("INSERT INTO workflow_runs (id, workflow, version, status, start_at, created_at, started_at, finished_at, updated_at) VALUES "+runs.String(), rargs...); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("INSERT INTO step_runs (run_id, step, seq, workflow, queue, status, deps, dependents, attempt, pending_deps, queued_at, started_at, finished_at, updated_at) VALUES "+steps.String(), sargs...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchWritesUseKeyOnSmallTables: on a table the planner takes for
// small (a new database, or statistics from when it was), a claim batch's
// read and write and the grouped writes of a completion batch still read
// their rows through the primary key; a scan would read, and lock, every
// row of the table.
func TestBatchWritesUseKeyOnSmallTables(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	history(t, s.DB(), now, 200)
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE step_runs"); err != nil {
		t.Fatal(err)
	}
	// Statements naming a single step are planned apart: MariaDB scans
	// the whole primary key for an UPDATE whose WHERE is an IN of one
	// row value. These name one step (the last is the remainder of a
	// group one row longer than a CASE takes).
	single := map[string]bool{"StepClaimMany/select-one": false, "StepClaimMany/update-one": false,
		"StepCompleteMany/case-and-one1": false}
	n := 0
	for _, q := range s.IndexedQueries(now) {
		if !strings.HasPrefix(q.Name, "StepCompleteMany/") && !strings.HasPrefix(q.Name, "StepClaimMany/") {
			continue
		}
		n++
		if _, ok := single[q.Name]; ok {
			single[q.Name] = true
		}
		for _, r := range explain(t, s.DB(), q.SQL, q.Args) {
			// const: a SELECT of one key.
			if (r["type"] != "range" && r["type"] != "const") || r["key"] != "PRIMARY" {
				t.Errorf("%s: type=%s key=%s rows=%s over %d rows, want a range of the primary key", q.Name, r["type"], r["key"], r["rows"], 400)
			}
		}
	}
	if n == 0 {
		t.Fatal("no StepClaimMany or StepCompleteMany queries to explain")
	}
	for name, seen := range single {
		if !seen {
			t.Errorf("IndexedQueries has no %s to explain", name)
		}
	}
}

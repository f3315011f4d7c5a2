package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/runlisttest"
	"github.com/dagflow/dagflow/persistence/sqlstore"
)

// TestRunListPagesAreSeeks checks, by EXPLAIN QUERY PLAN, that every page
// of every RunList filter shape (sqlstore.RunListShapes), the first, one
// from the middle and the last, searches the filter's index once per
// status, bounded by the page's cursor (a range on created_at after the
// filter's equalities), and never scans workflow_runs; and that the pages
// hold the right runs. It seeds 20,000 runs; with DAGFLOW_TEST_BIG=1 (and
// without -short) 1,000,000, and it logs page times.
func TestRunListPagesAreSeeks(t *testing.T) {
	n := 20000
	if os.Getenv("DAGFLOW_TEST_BIG") == "1" && !testing.Short() {
		n = 1_000_000
	}
	s := openStore(t)
	ctx := context.Background()
	end := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	began := time.Now()
	// Run i (ids sort as i) is created at end - (n-i) seconds rounded
	// down to a multiple of 3 s (runs share creation times in threes);
	// workflow w<i%5>; 5% each failed, cancelled, running, compensated,
	// spread over time, the rest succeeded; one in 50 by the schedule
	// "nightly". The same runs as the MySQL test's.
	if _, err := s.DB().ExecContext(ctx, `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ? - 1)
		INSERT INTO workflow_runs (id, workflow, version, status, schedule, start_at, created_at, started_at, finished_at, updated_at)
		SELECT printf('r%08d', i), 'w' || (i % 5), 1,
			CASE (i / 5) % 20 WHEN 0 THEN 'failed' WHEN 1 THEN 'cancelled' WHEN 2 THEN 'running' WHEN 3 THEN 'compensated' ELSE 'succeeded' END,
			CASE WHEN i % 50 = 7 THEN 'nightly' ELSE '' END, at, at, at, at, at
		FROM (SELECT i, strftime('%Y-%m-%d %H:%M:%f', ?, '-' || ((? - i + 2) / 3 * 3) || ' seconds') || '000' AS at FROM c)`,
		n, end.Format(sqlstore.TimeLayout), n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d runs in %v", n, time.Since(began).Round(time.Millisecond))
	var oldest string
	if err := s.DB().QueryRowContext(ctx, "SELECT MIN(created_at) FROM workflow_runs").Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	first, err := time.Parse(sqlstore.TimeLayout, oldest)
	if err != nil {
		t.Fatal(err)
	}

	const limit = 50
	span := end.Sub(first)
	for _, shape := range sqlstore.RunListShapes(first.Add(span/10), end.Add(-span/10)) {
		p := shape.Params
		p.Limit = limit
		matching := runlisttest.Matching(t, s.DB(), s.Dialect(), p)
		if len(matching) < 3*limit {
			t.Fatalf("%s: only %d runs match; the data must give every shape several pages", shape.Name, len(matching))
		}
		branches := max(len(p.Status), 1)
		index := runlisttest.ExpectedIndex(p)
		for _, page := range []struct {
			name string
			at   int // index in matching of the page's first run
		}{{"first", 0}, {"middle", len(matching) / 2}, {"last", len(matching) - limit}} {
			p := p
			if page.at > 0 {
				prev := matching[page.at-1]
				p.Cursor = sqlstore.RunListCursor(prev.At, prev.ID)
			}
			name := shape.Name + "/" + page.name
			q, err := s.RunListQuery(p)
			if err != nil {
				t.Fatal(err)
			}
			searches, byKey := 0, false
			for _, line := range queryPlan(t, s.DB(), q) {
				t.Logf("%-32s %s", name, line)
				bounded := page.at > 0 || !p.CreatedAfter.IsZero()
				switch {
				case !strings.Contains(line, " workflow_runs "):
				case strings.HasPrefix(line, "SEARCH workflow_runs USING INDEX sqlite_autoindex_workflow_runs_1 (id=?)"):
					byKey = true
				case !strings.Contains(line, "INDEX "+index+" ") && !strings.HasSuffix(line, "INDEX "+index):
					t.Errorf("%s: %q does not read %s", name, line, index)
				case strings.HasPrefix(line, "SCAN ") && (bounded || index != "idx_runs_created"):
					// Only the first page of all runs reads an index
					// from its end without a bound.
					t.Errorf("%s: %q scans", name, line)
				case bounded && !strings.Contains(line, "created_at<"):
					t.Errorf("%s: %q: the cursor or window does not bound the search", name, line)
				default:
					searches++
				}
			}
			if searches != branches || byKey != (branches > 1) {
				t.Errorf("%s: %d searches of %s (want one per status, %d), reads rows by key %v (want %v)\n%s",
					name, searches, index, branches, byKey, branches > 1, q.SQL)
			}
			got, err := s.RunList(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			var ids, want []string
			for _, r := range got.Runs {
				ids = append(ids, r.ID)
			}
			for _, m := range matching[page.at:min(page.at+limit, len(matching))] {
				want = append(want, m.ID)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("%s: RunList returned %d runs %v..., want %d from %v", name, len(ids), ids[:min(3, len(ids))], len(want), want[:min(3, len(want))])
			}
			if (got.NextCursor == "") != (page.name == "last") {
				t.Errorf("%s: NextCursor %q", name, got.NextCursor)
			}
			if shape.Name == "workflow+status" || testing.Verbose() {
				t.Logf("%-32s %d runs match; page time %v (median of 5)", name, len(matching), runlisttest.PageTime(t, s, p))
			}
		}
	}
}

// queryPlan returns the detail lines of EXPLAIN QUERY PLAN of q.
func queryPlan(t *testing.T, db *sql.DB, q sqlstore.Query) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q.SQL, q.Args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", q.SQL, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQueriesUseIndexes checks, by EXPLAIN QUERY PLAN, that the
// reconciler's queries, the dead-letter list, the node registry's, the
// batch statements, RunList by idempotency key and the reads of the
// definitions and the API keys search an index (never SCAN a table or an
// index; APIKeyList, which lists every key, reads its index whole), and
// that the reconciler's per-workflow queries (named "...@workflow"), the
// unfiltered dead-letter list, the stale-node read and the definitions',
// keys' and by-key reads each search their index in the order asked for
// (no temporary B-tree). RunList's pages are
// checked by TestRunListPagesAreSeeks.
func TestQueriesUseIndexes(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	qs := append(s.IndexedQueries(now), s.NodeQueries(now.Add(-time.Minute), now.Add(-time.Hour))...)
	qs = append(qs, s.ReleaseLeasesQueries([]string{"dead-node", "other-node"}, now)...)
	qs = append(append(qs, s.DefinitionQueries()...), s.APIKeyQueries()...)
	qs = append(qs, s.EventQueries(now)...)
	qs = append(qs, s.ParkedQueries(now)...)
	qs = append(qs, s.ChangeQueries(now.Add(-time.Minute))...)
	qs = append(qs, s.RetentionQueries(now)...)
	qs = append(qs, s.ActionQueries("run-00042")...)
	qs = append(qs, s.ResolveQueries("h00012")...)
	qs = append(qs, s.ScheduleQueries(now.Add(-time.Minute))...)
	for _, q := range qs {
		if strings.HasPrefix(q.Name, "RunList/") {
			continue
		}
		want := rangeOf(q.Name)
		if want == "" {
			want = indexOf(q.Name)
		}
		found := false
		for _, line := range queryPlan(t, s.DB(), q) {
			t.Logf("%-40s %s", q.Name, line)
			switch {
			case q.Name == "APIKeyList" && line == "SCAN api_keys USING INDEX "+want:
				// Every key, in the index's order.
				found = true
			case q.Name == "EventList/first" && line == "SCAN events USING INDEX "+want:
				// The newest events: the index read from its end,
				// limit+1 entries.
				found = true
			case strings.HasPrefix(line, "SCAN "):
				t.Errorf("%s: %q scans\n%s", q.Name, line, q.SQL)
			case want != "" && strings.Contains(line, "TEMP B-TREE"):
				t.Errorf("%s: %q sorts; want %s read in order\n%s", q.Name, line, want, q.SQL)
			case want != "" && strings.HasPrefix(line, "SEARCH ") &&
				(strings.Contains(line, "INDEX "+want+" ") || strings.HasSuffix(line, "INDEX "+want)):
				found = true
			}
		}
		if want != "" && !found {
			t.Errorf("%s: does not search %s\n%s", q.Name, want, q.SQL)
		}
	}
}

// rangeOf returns the index a query must search in the order it asks
// for, or "" (see the MySQL test of the same name).
func rangeOf(name string) string {
	switch {
	case strings.HasPrefix(name, "RunListDue@"):
		return "idx_runs_wf_start_due"
	case strings.HasPrefix(name, "StepList") && strings.Contains(name, "@"):
		return "idx_steps_wf_due"
	case strings.HasPrefix(name, "StepReleaseLeases/"):
		return "idx_steps_wf_due"
	case name == "StepListDead", name == "StepListDead/cursor":
		return "idx_steps_dead"
	case name == "NodeDeleteStale":
		return "idx_nodes_heartbeat"
	case name == "EventList/first", name == "EventList/cursor":
		return "idx_events_published"
	case strings.HasPrefix(name, "EventList@name"):
		return "idx_events_name_published"
	case name == "EventListPending":
		return "idx_events_pending"
	case name == "StepListParkedDue":
		return "idx_step_waits_due"
	case name == "StepPark/match":
		return "idx_events_correlation"
	case name == "StepListChanged":
		return "idx_steps_updated"
	case name == "RunDeleteFinished", name == "RunDeleteFinished/cursor":
		// Retention's batch: finished runs oldest first, after the
		// previous batch's last.
		return "idx_runs_finished_id"
	case name == "ScheduleListChanged", name == "ScheduleListChanged/page":
		return "idx_schedules_changed"
	case name == "RunResolve":
		// The runs whose id starts with a prefix: one range of the
		// primary key, in key order.
		return "sqlite_autoindex_workflow_runs_1"
	}
	return ""
}

// indexOf returns the index a query of the definitions, the API keys or
// RunList by idempotency key must search in the order it asks for, or ""
// (see the MySQL test of the same name).
func indexOf(name string) string {
	switch {
	case name == "RunDeleteFinished/event-links", name == "RunDeleteFinished/delete-event-links":
		return "idx_event_runs_run"
	case name == "RunDeleteFinished/attempts":
		return "idx_attempts_run"
	case name == "EventCreate/waiters":
		// Equality on (event_name, correlation): a ref of the index.
		return "idx_step_waits_match"
	case strings.HasPrefix(name, "RunListByKey"):
		return "idx_runs_idempotency_created"
	case name == "DefinitionList", name == "DefinitionUpsert/current":
		return "uq_definitions_current"
	case name == "DefinitionList@workflow", name == "DefinitionUpsert/latest":
		return "idx_definitions_registered"
	case name == "DefinitionGet":
		return "sqlite_autoindex_workflow_definitions_1"
	case name == "APIKeyRevoke/id", name == "APIKeyCreate/id-taken":
		return "sqlite_autoindex_api_keys_1"
	case name == "APIKeyByHash", name == "APIKeyCreate/hash-taken":
		return "uq_api_keys_hash"
	case name == "APIKeyRevoke/name", name == "APIKeyCreate/name-taken":
		return "uq_api_keys_active_name"
	case name == "APIKeyRevoke/last-revoked":
		return "idx_api_keys_name"
	case name == "APIKeyList":
		return "idx_api_keys_created"
	case name == "EventGet":
		return "sqlite_autoindex_events_1"
	case strings.HasPrefix(name, "EventRuns"):
		return "sqlite_autoindex_event_runs_1"
	case strings.HasPrefix(name, "RunAction"):
		return "sqlite_autoindex_run_actions_1"
	}
	return ""
}

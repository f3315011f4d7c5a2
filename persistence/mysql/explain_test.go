package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/internal/runlisttest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlstore"
)

// TestQueriesUseIndexes EXPLAINs the reconciler's and the listing queries,
// as the store builds them, over a database with history in it, and
// requires each to read through an index (never a full table scan, never
// a full index scan that must sort). TestRunListPagesAreSeeks checks
// RunList's pages further.
func TestQueriesUseIndexes(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	fill(t, s, now)
	history(t, s.DB(), now, 20000)
	nodes(t, s, now)
	definitions(t, s, now)
	apiKeys(t, s, now)
	events(t, s.DB(), now)
	for _, q := range []string{"bulk", "mail", "reports"} {
		if _, err := s.QueueSetPaused(ctx, persistence.QueueSetPausedParams{Queue: q, Paused: true, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().ExecContext(ctx, "UPDATE workflow_runs SET paused_at = ? WHERE id IN (SELECT run_id FROM step_runs WHERE status = 'queued') LIMIT 3", now); err != nil {
		t.Fatal(err)
	}
	runActions(t, s.DB(), now)
	schedules(t, s.DB(), now, 5000)
	for _, table := range []string{"workflow_runs", "step_runs", "step_attempts", "dagflow_nodes", "workflow_definitions", "api_keys", "events", "event_runs", "run_actions", "step_waits", "queue_pauses", "schedules"} {
		if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
			t.Fatal(err)
		}
	}
	qs := append(s.IndexedQueries(now), s.NodeQueries(now.Add(-time.Minute), now.Add(-50*time.Minute))...)
	qs = append(qs, s.ReleaseLeasesQueries([]string{"dead-node", "other-node"}, now)...)
	qs = append(append(qs, s.DefinitionQueries()...), s.APIKeyQueries()...)
	qs = append(qs, s.EventQueries(now)...)
	qs = append(qs, s.ParkedQueries(now)...)
	qs = append(qs, s.ChangeQueries(now.Add(-time.Minute))...)
	qs = append(qs, s.RetentionQueries(now)...)
	qs = append(qs, s.ActionQueries("run-00042")...)
	qs = append(qs, s.ResolveQueries("h00012")...)
	qs = append(qs, s.PauseQueries()...)
	qs = append(qs, s.ScheduleQueries(now.Add(-time.Minute))...)
	for _, q := range qs {
		rows := explain(t, s.DB(), q.SQL, q.Args)
		for _, r := range rows {
			t.Logf("%-32s table=%s type=%s key=%s rows=%s extra=%s", q.Name, r["table"], r["type"], r["key"], r["rows"], r["Extra"])
			if r["table"] == "pr" {
				// The reconciler lists' test that a step's run is not
				// paused: one primary-key lookup per step read.
				// TiDB's plan for it is an index join whose inner side
				// is a range of PRIMARY "decided by" the step's run_id.
				tidbLookup := r["type"] == "range" && strings.Contains(r["Extra"], "decided by [eq(")
				if r["key"] != "PRIMARY" || (r["type"] != "eq_ref" && r["type"] != "unique_subquery" && !tidbLookup) {
					t.Errorf("%s: reads the run of a step by %s (%s), want one row of PRIMARY\n%s", q.Name, r["key"], r["type"], q.SQL)
				}
				continue
			}
			if want := rangeOf(q.Name); want != "" && (r["key"] != want || r["type"] != "range" || strings.Contains(r["Extra"], "filesort")) {
				t.Errorf("%s: reads %s (%s, %q), want a range of %s in order\n%s", q.Name, r["key"], r["type"], r["Extra"], want, q.SQL)
			}
			if want := indexOf(q.Name); want != "" && (r["key"] != want || strings.Contains(r["Extra"], "filesort")) {
				t.Errorf("%s: reads %s (%s, %q), want %s in order\n%s", q.Name, r["key"], r["type"], r["Extra"], want, q.SQL)
			}
			switch {
			case (q.Name == "StepListChanged/latest" || q.Name == "RunAction/last" || q.Name == "StepListParkedDue/next") && strings.Contains(r["Extra"], "Select tables optimized away"):
				// MAX over the leading column of idx_steps_updated or
				// idx_step_waits_due, or MAX(seq) of one run_id (the last
				// entry of a primary key prefix): one index entry read at
				// plan time.
			case q.Name == "QueueListPaused":
				// Every row is the answer: one per paused queue, a
				// handful (TiDB reads such a table whole).
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

// rangeOf returns the index whose one range a query must read, in the
// order the query asks for: the reconciler's per-workflow queries (named
// "...@workflow"), the unfiltered dead-letter list and the node registry's
// reads. "" leaves the query to the general checks: the reconciler's
// step queries over every workflow at once (named without "@", used only
// beyond sqlstore.MaxDueWorkflows workflows) read a status's due entries
// and sort them (documented at sqlstore's dueStepQueries).
func rangeOf(name string) string {
	switch {
	case strings.HasPrefix(name, "RunListDue@"):
		return "idx_runs_wf_start_due"
	case strings.HasPrefix(name, "StepList") && strings.Contains(name, "@"):
		return "idx_steps_wf_due"
	case name == "StepListDead", name == "StepListDead/cursor":
		return "idx_steps_dead"
	case name == "NodeDeleteStale":
		return "idx_nodes_heartbeat"
	case name == "EventList/cursor":
		return "idx_events_published"
	case strings.HasPrefix(name, "EventList@name/"):
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
		return "PRIMARY"
	}
	return ""
}

// TestDefinitionListReadsCurrentVersions: the list of every workflow's
// current version reads about one index entry per workflow, however many
// versions each has: the server's handler reads while it runs, over 20
// workflows of 40 versions.
func TestDefinitionListReadsCurrentVersions(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	definitions(t, s, time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE workflow_definitions"); err != nil {
		t.Fatal(err)
	}
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var q sqlstore.Query
	for _, dq := range s.DefinitionQueries() {
		if dq.Name == "DefinitionList" {
			q = dq
		}
	}
	n := 0
	reads := handlerReads(t, conn, func() {
		rs, err := conn.QueryContext(ctx, q.SQL, q.Args...)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			n++
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		rs.Close()
	})
	if n != 20 {
		t.Errorf("DefinitionList's query returned %d rows, want 20 (one per workflow)", n)
	}
	t.Logf("DefinitionList read %d index entries for 20 workflows of 40 versions", reads)
	if reads > 2*20+2 {
		t.Errorf("DefinitionList read %d index entries for 20 workflows of 40 versions, want about 20\n%s", reads, q.SQL)
	}
}

// indexOf returns the index a query of the definitions, the API keys or
// RunList by idempotency key must read (a key, a ref or a range, in the
// order asked for), or "". APIKeyList reads all of its index: every key.
func indexOf(name string) string {
	switch {
	case name == "RunDeleteFinished/dead", name == "RunDeleteFinished/delete-steps", name == "RunDeleteFinished/delete-events",
		name == "RunDeleteFinished/delete-ticks", name == "RunDeleteFinished/delete-runs", name == "RunDeleteFinished/delete-attempts",
		name == "RunDeleteFinished/delete-actions", name == "RunDeleteFinished/delete-waits":
		// Retention's reads and deletes by key: the batch's runs (the
		// steps' key starts with run_id), events, schedule ticks.
		return "PRIMARY"
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
	case name == "DefinitionGet", name == "APIKeyRevoke/id", name == "APIKeyCreate/id-taken":
		return "PRIMARY"
	case name == "APIKeyByHash", name == "APIKeyCreate/hash-taken":
		return "uq_api_keys_hash"
	case name == "APIKeyRevoke/name", name == "APIKeyCreate/name-taken":
		return "uq_api_keys_active_name"
	case name == "APIKeyRevoke/last-revoked":
		return "idx_api_keys_name"
	case name == "APIKeyList":
		return "idx_api_keys_created"
	case name == "EventList/first":
		// The newest events: the index read from its end, limit+1
		// entries.
		return "idx_events_published"
	case name == "EventList@name":
		return "idx_events_name_published"
	case name == "EventGet", strings.HasPrefix(name, "EventRuns"), name == "RunActionList":
		return "PRIMARY"
	case name == "StepReleaseLeases/running":
		// The running steps' entries (status =), in flight only; the
		// compensating read adds a lookup of each one's attempt and is
		// left to the general checks.
		return "idx_steps_wf_due"
	}
	return ""
}

// definitions registers 40 versions of each of 20 workflows, one every
// hour, w1's last at a1b2c3d4e5f60718 (what sqlstore's
// DefinitionQueries look up): the versions that pile up with deploys,
// which no listing may read whole.
func definitions(t *testing.T, s persistence.Store, now time.Time) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range 40 {
				version := fmt.Sprintf("%016x", w*1000+v)
				if w == 1 && v == 39 {
					version = "a1b2c3d4e5f60718"
				}
				if _, err := s.DefinitionUpsert(context.Background(), persistence.Definition{Workflow: fmt.Sprintf("w%d", w), Version: version,
					Declared: v + 1, Spec: []byte(`{"steps":[{"name":"a"}]}`), RegisteredAt: now.Add(time.Duration(v-40) * time.Hour)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// events stores 3000 events of 10 names over a day, each with a run, the
// newest 30 not dispatched yet (the outbox): enough that a listing or the
// outbox read that scanned them would show.
// runActions fills run_actions with the operator history of 3000 runs.
func runActions(t *testing.T, db *sql.DB, now time.Time) {
	t.Helper()
	for b := range 30 {
		var vals []string
		var args []any
		for i := range 100 {
			for seq := 1; seq <= 3; seq++ {
				vals = append(vals, "(?, ?, ?, ?, ?, ?, ?)")
				args = append(args, fmt.Sprintf("run-%05d", b*100+i), seq, now, "ops", "retry", "", []byte(`{"steps":["a"]}`))
			}
		}
		if _, err := db.ExecContext(context.Background(), "INSERT INTO run_actions (run_id, seq, at, actor, action, step, detail) VALUES "+
			strings.Join(vals, ", "), args...); err != nil {
			t.Fatal(err)
		}
	}
}

func events(t *testing.T, db *sql.DB, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for b := range 30 {
		var ev, runs []string
		var evArgs, runArgs []any
		for i := range 100 {
			n := b*100 + i
			id := fmt.Sprintf("ev%05d", n)
			var disp any = now
			if n >= 2970 {
				disp = nil
			}
			ev = append(ev, "(?, ?, ?, ?, ?, ?)")
			evArgs = append(evArgs, id, fmt.Sprintf("order.e%d", n%10), []byte(`{"total":1}`), now.Add(time.Duration(n-3000)*30*time.Second), disp,
				fmt.Sprintf("A-%d", n))
			runs = append(runs, "(?, ?, ?)")
			runArgs = append(runArgs, id, "w1", fmt.Sprintf("run-%05d", n))
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO events (id, name, payload, published_at, dispatched_at, correlation) VALUES "+strings.Join(ev, ", "), evArgs...); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO event_runs (event_id, workflow, run_id) VALUES "+strings.Join(runs, ", "), runArgs...); err != nil {
			t.Fatal(err)
		}
		// As many parked steps: waits for payment.captured of a
		// correlation each, and sleeps, due over two days around now.
		var waits []string
		var waitArgs []any
		for i := range 100 {
			n := b*100 + i
			kind, event, corr := "event", "payment.captured", fmt.Sprintf("A-%d", n)
			if n%3 == 0 {
				kind, event, corr = "sleep", "", ""
			}
			waits = append(waits, "(?, ?, ?, ?, ?, ?, ?, ?)")
			waitArgs = append(waitArgs, fmt.Sprintf("run-%05d", n), "pay", "w1", kind, event, corr,
				now.Add(time.Duration(n-1500)*time.Minute), now)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO step_waits (run_id, step, workflow, kind, event_name, correlation, due_at, created_at) VALUES "+
			strings.Join(waits, ", "), waitArgs...); err != nil {
			t.Fatal(err)
		}
	}
}

// apiKeys creates 200 keys, and the ones sqlstore's APIKeyQueries look
// up: "ci" with id k1 and a hash of zeros, valid, and three revoked keys
// named "ci" before it.
func apiKeys(t *testing.T, s persistence.Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for i := range 203 {
		id, _ := uuid.NewV7()
		k := persistence.APIKey{ID: id.String(), Name: fmt.Sprintf("key-%d", i), Scope: persistence.ScopeRead,
			Hash: []byte(fmt.Sprintf("%032d", i)), CreatedAt: now.Add(time.Duration(i-300) * time.Minute)}
		if i >= 200 {
			k.Name = "ci"
		}
		if _, err := s.APIKeyCreate(ctx, k); err != nil {
			t.Fatal(err)
		}
		if i >= 200 {
			if _, err := s.APIKeyRevoke(ctx, persistence.APIKeyRevokeParams{ID: k.ID, Now: k.CreatedAt}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.APIKeyCreate(ctx, persistence.APIKey{ID: "k1", Name: "ci", Scope: persistence.ScopeAdmin, Hash: make([]byte, 32), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// nodes registers 300 nodes, the oldest heartbeat an hour before now.
func nodes(t *testing.T, s persistence.Store, now time.Time) {
	t.Helper()
	for i := range 300 {
		beat := now.Add(-time.Duration(i) * 12 * time.Second)
		if err := s.NodeHeartbeat(context.Background(), persistence.Node{ID: fmt.Sprintf("node-%03d", i), StartedAt: beat, HeartbeatAt: beat}); err != nil {
			t.Fatal(err)
		}
	}
}

// explain returns the EXPLAIN rows of query, one per table access with
// MySQL's columns (table, type, key, rows, Extra); a TiDB plan is read
// into the same terms by tidbAccesses.
func explain(t *testing.T, db *sql.DB, query string, args []any) []map[string]string {
	t.Helper()
	rows := explainRows(t, db, query, args)
	if len(rows) > 0 {
		if _, ok := rows[0]["estRows"]; ok {
			return tidbAccesses(rows)
		}
	}
	return rows
}

func explainRows(t *testing.T, db *sql.DB, query string, args []any) []map[string]string {
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
			res, err := s.RunCreate(ctx, persistence.RunCreateParams{ID: id.String(), Workflow: wf, Now: created, IdempotencyKey: fmt.Sprintf("order-%d", i/5),
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

// TestRunListPagesAreSeeks checks that every page of every RunList filter
// shape (sqlstore.RunListShapes), the first, one from the middle and the
// last, reads one index range per status that starts at the page's first
// run: by EXPLAIN (the filter's index, a range reaching created_at after
// the filter's equalities, a small row estimate for the last page) and by
// the handler reads the server counts while it runs the page (about
// limit+1 per status, not the runs before the page). It seeds 20,000
// runs; with DAGFLOW_TEST_BIG=1 (and without -short) 1,000,000, and it
// logs page times.
func TestRunListPagesAreSeeks(t *testing.T) {
	n := 20000
	if os.Getenv("DAGFLOW_TEST_BIG") == "1" && !testing.Short() {
		n = 1_000_000
	}
	checkRunListSeeks(t, openStore(t).Store, n)
}

// checkRunListSeeks seeds n runs in s's empty database and checks the
// pages of every filter shape.
func checkRunListSeeks(t *testing.T, s *sqlstore.Store, n int) {
	ctx := context.Background()
	end := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	began := time.Now()
	first := seedRuns(t, s.DB(), end, n)
	t.Logf("seeded %d runs in %v", n, time.Since(began).Round(time.Millisecond))
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE workflow_runs"); err != nil {
		t.Fatal(err)
	}
	// Handler counters are per session: one connection runs the pages.
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	const limit = 50
	// The window leaves out the oldest and newest tenth of the runs.
	span := end.Sub(first)
	after, before := first.Add(span/10), end.Add(-span/10)
	for _, shape := range sqlstore.RunListShapes(after, before) {
		p := shape.Params
		p.Limit = limit
		matching := runlisttest.Matching(t, s.DB(), s.Dialect(), p)
		if len(matching) < 3*limit {
			t.Fatalf("%s: only %d runs match; the data must give every shape several pages", shape.Name, len(matching))
		}
		branches := max(len(p.Status), 1)
		index := runlisttest.ExpectedIndex(p)
		// The filter's equalities alone: the key length of the first page
		// (a ref of them) without a window.
		noWindow := p
		noWindow.CreatedAfter, noWindow.CreatedBefore = time.Time{}, time.Time{}
		eqLen := 0
		if noWindow.Workflow != "" || noWindow.Schedule != "" || len(noWindow.Status) > 0 {
			q, err := s.RunListQuery(noWindow)
			if err != nil {
				t.Fatal(err)
			}
			rows, _ := tableRows(t, s.DB(), q)
			eqLen = keyLen(t, rows[0])
		}
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
			rows, byKey := tableRows(t, s.DB(), q)
			if byKey != (branches > 1) {
				t.Errorf("%s: reads the page's rows by primary key: %v, want %v (with several statuses)", name, byKey, branches > 1)
			}
			if len(rows) != branches {
				t.Errorf("%s: EXPLAIN reads workflow_runs %d times, want once per status (%d)\n%s", name, len(rows), branches, q.SQL)
			}
			for _, r := range rows {
				t.Logf("%-32s type=%s key=%s key_len=%s rows=%s extra=%s", name, r["type"], r["key"], r["key_len"], r["rows"], r["Extra"])
				if r["key"] != index {
					t.Errorf("%s: reads index %q, want %s", name, r["key"], index)
				}
				switch {
				case strings.Contains(r["Extra"], "filesort"):
					t.Errorf("%s: sorts the rows it reads (%s)", name, r["Extra"])
				case page.at == 0 && p.CreatedAfter.IsZero():
					// From the newest run of the filter: its equalities
					// (a ref, or a range of them), or the whole of
					// idx_runs_created; the handler reads below show
					// that it stops after the page.
					if r["type"] != "ref" && r["type"] != "range" && r["type"] != "index" {
						t.Errorf("%s: access %s, want a ref of the filter's equalities", name, r["type"])
					}
				case r["type"] != "range":
					t.Errorf("%s: access %s, want a range", name, r["type"])
				case keyLen(t, r) <= eqLen:
					t.Errorf("%s: the range covers %d bytes of key, no more than the filter's equalities (%d): the cursor does not bound it", name, keyLen(t, r), eqLen)
				}
				if est, _ := strconv.Atoi(r["rows"]); page.name == "last" && est > 4*(limit+1) {
					t.Errorf("%s: EXPLAIN estimates %d rows, want about %d (what is left after the cursor)", name, est, limit)
				}
			}
			// Run it: what the server reads, and what the store returns.
			reads := handlerReads(t, conn, func() {
				rs, err := conn.QueryContext(ctx, q.SQL, q.Args...)
				if err != nil {
					t.Fatal(err)
				}
				for rs.Next() {
				}
				if err := rs.Err(); err != nil {
					t.Fatal(err)
				}
				rs.Close()
			})
			// Two ranges per status (the cursor's time, then before it)
			// and limit+1 entries; with several statuses, then the page's
			// rows by primary key.
			most := branches*(limit+3) + 2
			if branches > 1 {
				most += limit + 1
			}
			if reads > most {
				t.Errorf("%s: the server read %d index entries for a page of %d (%d statuses), want at most %d", name, reads, limit, branches, most)
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
				t.Errorf("%s: RunList returned %d runs %v..., want %d from %v", name, len(ids), head(ids), len(want), head(want))
			}
			if (got.NextCursor == "") != (page.name == "last") {
				t.Errorf("%s: NextCursor %q", name, got.NextCursor)
			}
			if shape.Name == "workflow+status" || testing.Verbose() {
				t.Logf("%-32s %d runs match; the page read %d index entries in %v (median of 5)", name, len(matching), reads, runlisttest.PageTime(t, s, p))
			}
		}
	}
}

// seedRuns inserts n runs with one INSERT ... SELECT per 100,000 (from a
// cross join of digits, which MySQL and MariaDB both take), and returns
// the creation time of the oldest. Run i (ids sort as i) is created at
// end - (n-i) seconds rounded down to a multiple of 3 s, so that runs
// share creation times in threes and the id breaks the ties; workflow
// w<i%5>; a fifth of each workflow's runs in a status other than
// succeeded (failed, cancelled, running, compensated: 5% each), spread
// over time; one run in 50 started by the schedule "nightly".
func seedRuns(t *testing.T, db *sql.DB, end time.Time, n int) time.Time {
	t.Helper()
	const chunk = 100000
	digits := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " +
		"UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	for lo := 0; lo < n; lo += chunk {
		q := fmt.Sprintf(`INSERT INTO workflow_runs (id, workflow, version, status, schedule, start_at, created_at, started_at, finished_at, updated_at)
			SELECT CONCAT('r', LPAD(i, 8, '0')), CONCAT('w', i %% 5), 1,
				ELT((i DIV 5) %% 20 + 1, 'failed', 'cancelled', 'running', 'compensated', 'succeeded', 'succeeded', 'succeeded', 'succeeded',
					'succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded',
					'succeeded', 'succeeded', 'succeeded', 'succeeded'),
				IF(i %% 50 = 7, 'nightly', ''), c, c, c, c, c
			FROM (SELECT i, ? - INTERVAL ((? - i + 2) DIV 3 * 3) SECOND AS c
				FROM (SELECT ? + d1.d + 10*d2.d + 100*d3.d + 1000*d4.d + 10000*d5.d AS i
					FROM %[1]s d1, %[1]s d2, %[1]s d3, %[1]s d4, %[1]s d5) x
				WHERE i < ?) y`, digits)
		if _, err := db.Exec(q, end, n, lo, n); err != nil {
			t.Fatalf("seeding runs %d..: %v", lo, err)
		}
	}
	var oldest time.Time
	if err := db.QueryRow("SELECT MIN(created_at) FROM workflow_runs").Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	return oldest
}

// tableRows returns the EXPLAIN rows of q that search workflow_runs (not
// the derived tables and the union of a several-status list), and whether
// q then reads rows of workflow_runs by primary key.
func tableRows(t *testing.T, db *sql.DB, q sqlstore.Query) (rows []map[string]string, byKey bool) {
	t.Helper()
	for _, r := range explain(t, db, q.SQL, q.Args) {
		switch {
		case r["table"] != "workflow_runs":
		case r["type"] == "eq_ref" && r["key"] == "PRIMARY":
			byKey = true
		default:
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("EXPLAIN of %s searches no workflow_runs", q.SQL)
	}
	return rows, byKey
}

func keyLen(t *testing.T, r map[string]string) int {
	t.Helper()
	n, err := strconv.Atoi(r["key_len"])
	if err != nil {
		t.Fatalf("key_len %q: %v", r["key_len"], err)
	}
	return n
}

// handlerReads returns the index entries the session read while f ran:
// the growth of its Handler_read_key, _next, _prev, _first and _last
// counters (row reads by index, as opposed to the scans of temporary
// tables, Handler_read_rnd_next).
func handlerReads(t *testing.T, conn *sql.Conn, f func()) int {
	t.Helper()
	count := func() int {
		rows, err := conn.QueryContext(context.Background(), "SHOW SESSION STATUS LIKE 'Handler_read%'")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		total, seen := 0, 0
		for rows.Next() {
			var name string
			var v int
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			switch name {
			case "Handler_read_key", "Handler_read_next", "Handler_read_prev", "Handler_read_first", "Handler_read_last":
				total += v
				seen++
			}
		}
		if seen != 5 {
			// TiDB has none: a count of zero would pass every bound.
			t.Fatalf("the server shows %d of the 5 Handler_read counters: it cannot count reads", seen)
		}
		return total
	}
	before := count()
	idle := count() - before // what reading the counters costs
	before = count()
	f()
	return count() - before - idle
}

func head(ids []string) []string { return ids[:min(3, len(ids))] }

// tidbAccesses reads a TiDB plan (operators in a tree drawn in the id
// column: IndexLookUp, IndexRangeScan, TopN, ...) as MySQL's EXPLAIN rows,
// one per operator that reads a table or an index:
//
//   - IndexRangeScan and TableRangeScan (a range of the clustered primary
//     key) are type "range"; Point_Get is "const" and Batch_Point_Get
//     "range" (keys looked up one by one); IndexFullScan is "index" and
//     TableFullScan "ALL";
//   - key is the index of the access object, PRIMARY without one;
//   - Extra says "Using filesort" when a Sort or a TopN orders the rows
//     the operator reads (it is an ancestor, with no join or union in
//     between): what MySQL's filesort says of a table.
//
// TableRowIDScan, the fetch of the rows an index scan found by their
// handles, is the second half of an index lookup, not an access path,
// and left out.
func tidbAccesses(plan []map[string]string) []map[string]string {
	type node struct{ op string }
	var stack []node // ancestors of the current operator, by depth
	var out []map[string]string
	for _, r := range plan {
		id := r["id"]
		name := strings.TrimLeft(id, "│├└─ ")
		depth := len([]rune(id)) - len([]rune(name))
		op := name
		if i := strings.IndexByte(op, '('); i >= 0 {
			op = op[:i] // (Build), (Probe)
		}
		if i := strings.LastIndexByte(op, '_'); i > 0 && strings.Trim(op[i+1:], "0123456789") == "" {
			op = op[:i]
		}
		for len(stack) > 0 && len(stack) > depth/2 {
			stack = stack[:len(stack)-1]
		}
		ancestors := slices.Clone(stack)
		stack = append(stack, node{op})
		access := r["access object"]
		if !strings.Contains(access, "table:") || op == "TableRowIDScan" {
			continue
		}
		table, _, _ := strings.Cut(strings.TrimPrefix(access[strings.Index(access, "table:"):], "table:"), ",")
		key := "PRIMARY"
		if i := strings.Index(access, "index:"); i >= 0 {
			key, _, _ = strings.Cut(access[i+len("index:"):], "(")
		}
		typ := map[string]string{"IndexRangeScan": "range", "TableRangeScan": "range", "Point_Get": "const",
			"Batch_Point_Get": "range", "IndexFullScan": "index", "TableFullScan": "ALL"}[op]
		if typ == "" {
			typ = op
		}
		extra := r["operator info"]
		for i := len(ancestors) - 1; i >= 0; i-- {
			a := ancestors[i].op
			if a == "Sort" || a == "TopN" {
				extra = "Using filesort; " + extra
				break
			}
			if strings.Contains(a, "Join") || strings.HasPrefix(a, "Union") || a == "Apply" {
				break
			}
		}
		out = append(out, map[string]string{"table": strings.TrimSpace(table), "type": typ, "key": key,
			"rows": r["estRows"], "Extra": extra, "operator": op})
	}
	return out
}

// schedules inserts n schedules (per-tenant ones), changed over the hour
// before now.
func schedules(t *testing.T, db *sql.DB, now time.Time, n int) {
	t.Helper()
	for start := 0; start < n; start += 500 {
		var b strings.Builder
		var args []any
		b.WriteString(`INSERT INTO schedules (name, spec, workflow, overlap_policy, catch_up, created_at, updated_at, owner, changed_at) VALUES `)
		for i := start; i < min(n, start+500); i++ {
			if i > start {
				b.WriteString(", ")
			}
			b.WriteString("(?, '*/5 * * * *', 'report', 'allow', 'none', ?, ?, 'operator', ?)")
			at := now.Add(-time.Hour + time.Duration(i)*time.Hour/time.Duration(n))
			args = append(args, fmt.Sprintf("tenant-%05d", i), at, at, at)
		}
		if _, err := db.Exec(b.String(), args...); err != nil {
			t.Fatal(err)
		}
	}
}

package sqlstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Query is one SQL statement with its arguments, exactly as the store
// runs it.
type Query struct {
	Name string
	SQL  string
	Args []any
}

// The reconciler's and the listing queries. Each is served by an index of
// the migrations (named in the comment); the MySQL tests EXPLAIN them.

// runListDueQueries builds RunListDue's statements. Without workflows,
// one: idx_runs_start_due (start_due, id), where start_due is start_at
// while a run is pending and NULL after (migration 00003). With them, one
// per workflow, each a range of idx_runs_wf_start_due (workflow,
// start_due, id) (MySQL migration 00007, SQLite 00006), so that another
// workflow's pending runs are never read; the caller merges them.
func (s *Store) runListDueQueries(p persistence.ListDueParams) []Query {
	before, limit := s.t(norm(p.Before)), clampLimit(p.Limit, 100, 10000)
	if len(p.Workflows) == 0 {
		return []Query{{Name: "RunListDue", SQL: `SELECT ` + runCols + ` FROM workflow_runs
		WHERE start_due <= ? ORDER BY start_due, id LIMIT ?`, Args: []any{before, limit}}}
	}
	out := make([]Query, 0, len(p.Workflows))
	for _, wf := range p.Workflows {
		out = append(out, Query{Name: "RunListDue@" + wf, SQL: `SELECT ` + runCols + ` FROM workflow_runs` +
			s.d.useIndex("idx_runs_wf_start_due") + ` WHERE workflow = ? AND start_due <= ? ORDER BY start_due, id LIMIT ?`,
			Args: []any{wf, before, limit}})
	}
	return out
}

// The reconciler's step queries read idx_steps_wf_due (status, workflow,
// due_at, run_id, step) (MySQL migration 00007, SQLite 00006). due_at is
// a generated column (migration 00003): queued_at for a queued step,
// next_attempt_at for a retrying one, lease_expires_at for a running one,
// the first set of lease_expires_at, next_attempt_at and queued_at for a
// compensating one. The original column conditions stay in each query,
// so a query means what it says whatever due_at holds; due_at only
// narrows the scan. The callers merge the results by time.
//
// With ListDueParams.Workflows, each status is read once per workflow,
// one index range each (status, workflow, due_at < before), at most limit
// rows: a backlog of another workflow is never read. Without, the lists
// first read which workflows have steps in the statuses (stepWorkflowsQueries:
// the statuses' entries of the index, without reading rows), then read
// those as if named; the cost of that first read grows with the number of
// steps in the statuses, so engines name their workflows. Over
// MaxDueWorkflows workflows, each status is read once over all of them:
// its due entries, sorted by due_at before the limit applies.
func (s *Store) dueStepQueries(p persistence.ListDueParams, name string, st persistence.StepStatus, cond string, times int) []Query {
	before, limit := s.t(norm(p.Before)), clampLimit(p.Limit, 100, 10000)
	args := func(wf ...any) []any {
		a := append([]any{string(st)}, wf...)
		for range times {
			a = append(a, before)
		}
		return append(a, limit)
	}
	if len(p.Workflows) == 0 {
		return []Query{{Name: name, SQL: `SELECT ` + stepCols + ` FROM step_runs
			WHERE status = ? AND ` + cond + notPaused + ` ORDER BY due_at LIMIT ?`, Args: args()}}
	}
	out := make([]Query, 0, len(p.Workflows))
	for _, wf := range p.Workflows {
		out = append(out, Query{Name: name + "@" + wf, SQL: `SELECT ` + stepCols + ` FROM step_runs
			WHERE status = ? AND workflow = ? AND ` + cond + notPaused + ` ORDER BY due_at LIMIT ?`, Args: args(wf)})
	}
	return out
}

// notPaused leaves the steps of paused runs out of the reconciler's
// lists (Store.RunSetPaused): one primary-key lookup of the run per step
// the index range gives, never a read of other runs.
const notPaused = ` AND NOT EXISTS (SELECT 1 FROM workflow_runs pr WHERE pr.id = step_runs.run_id AND pr.paused_at IS NOT NULL)`

func (s *Store) stepListQueuedQueries(p persistence.ListDueParams) []Query {
	return append(
		s.dueStepQueries(p, "StepListQueued/queued", persistence.StepQueued, `due_at < ? AND queued_at < ?`, 2),
		s.dueStepQueries(p, "StepListQueued/compensating", persistence.StepCompensating,
			`due_at < ? AND queued_at < ? AND lease_expires_at IS NULL AND next_attempt_at IS NULL`, 2)...)
}

func (s *Store) stepListRetryDueQueries(p persistence.ListDueParams) []Query {
	return append(
		s.dueStepQueries(p, "StepListRetryDue/retrying", persistence.StepRetrying, `due_at <= ? AND next_attempt_at <= ?`, 2),
		s.dueStepQueries(p, "StepListRetryDue/compensating", persistence.StepCompensating,
			`due_at <= ? AND next_attempt_at <= ? AND lease_expires_at IS NULL`, 2)...)
}

func (s *Store) stepListLeaseExpiredQueries(p persistence.ListDueParams) []Query {
	const cond = `due_at < ? AND lease_expires_at < ?`
	return append(
		s.dueStepQueries(p, "StepListLeaseExpired/running", persistence.StepRunning, cond, 2),
		s.dueStepQueries(p, "StepListLeaseExpired/compensating", persistence.StepCompensating, cond, 2)...)
}

// stepWorkflowsQueries return the workflows that have steps in each of
// statuses: one range of idx_steps_wf_due (status, workflow, ...) per
// status, read from the index alone, in order (one query per status:
// "status IN (...)" makes MariaDB collect the names in a temporary
// table).
func (s *Store) stepWorkflowsQueries(name string, statuses ...persistence.StepStatus) []Query {
	out := make([]Query, len(statuses))
	for i, st := range statuses {
		out[i] = Query{Name: name + "/workflows/" + string(st), SQL: `SELECT DISTINCT workflow FROM step_runs WHERE status = ?`,
			Args: []any{string(st)}}
	}
	return out
}

// dueStepScope returns p ready for the step queries: its workflows
// checked, or without any, the workflows that have steps in statuses (up
// to MaxDueWorkflows; over that none, and the queries read every
// workflow at once). ok is false when no workflow has such steps.
func (s *Store) dueStepScope(ctx context.Context, p persistence.ListDueParams, name string, statuses ...persistence.StepStatus) (persistence.ListDueParams, bool, error) {
	if len(p.Workflows) > 0 {
		p, err := dueWorkflows(p)
		return p, true, err
	}
	var wfs []string
	for _, qq := range s.stepWorkflowsQueries(name, statuses...) {
		var rows []struct {
			Workflow string `db:"workflow"`
		}
		if err := s.selectAll(ctx, s.db, &rows, qq.SQL, qq.Args...); err != nil {
			return p, false, err
		}
		for _, r := range rows {
			wfs = append(wfs, r.Workflow)
		}
	}
	slices.Sort(wfs)
	wfs = slices.Compact(wfs)
	if len(wfs) == 0 || len(wfs) > MaxDueWorkflows {
		return p, len(wfs) > 0, nil
	}
	p.Workflows = wfs
	return p, true, nil
}

// dueWorkflows checks ListDueParams.Workflows and returns p with them
// sorted, without repeats.
func dueWorkflows(p persistence.ListDueParams) (persistence.ListDueParams, error) {
	if len(p.Workflows) == 0 {
		return p, nil
	}
	if len(p.Workflows) > MaxDueWorkflows {
		return p, invalid("workflows", strconv.Itoa(len(p.Workflows)), fmt.Sprintf("names more than %d workflows", MaxDueWorkflows))
	}
	for _, wf := range p.Workflows {
		if err := validName("workflow name", wf); err != nil {
			return p, err
		}
	}
	wfs := slices.Clone(p.Workflows)
	slices.Sort(wfs)
	p.Workflows = slices.Compact(wfs)
	return p, nil
}

// runListWhere turns RunList's filters into conditions, and its
// statuses into a list without repeats.
func (s *Store) runListWhere(p persistence.RunListParams) ([]string, []any, []persistence.RunStatus, error) {
	var where []string
	var args []any
	if p.Workflow != "" {
		if err := validName("workflow name", p.Workflow); err != nil {
			return nil, nil, nil, err
		}
		where = append(where, "workflow = ?")
		args = append(args, p.Workflow)
	}
	if p.Schedule != "" {
		if err := validName("schedule name", p.Schedule); err != nil {
			return nil, nil, nil, err
		}
		where = append(where, "schedule = ?")
		args = append(args, p.Schedule)
	}
	if p.IdempotencyKey != "" {
		if err := validKey(p.IdempotencyKey); err != nil {
			return nil, nil, nil, err
		}
		where = append(where, "idempotency_key = ?")
		args = append(args, p.IdempotencyKey)
	}
	var statuses []persistence.RunStatus
	for _, st := range p.Status {
		if !st.Valid() {
			return nil, nil, nil, invalid("run status", string(st), "unknown")
		}
		if !slices.Contains(statuses, st) { // a repeat would list its runs twice
			statuses = append(statuses, st)
		}
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, "created_at >= ?")
		args = append(args, s.t(norm(p.CreatedAfter)))
	}
	// One upper bound on created_at, the tighter of CreatedBefore and the
	// cursor: given two, SQLite ends its range at the first it finds, and
	// a deep page of a window would read the window's newest runs to
	// reach its cursor.
	var before time.Time
	if !p.CreatedBefore.IsZero() {
		before = norm(p.CreatedBefore)
	}
	if p.Cursor != "" {
		at, id, err := decodeRunCursor(p.Cursor)
		if err != nil {
			return nil, nil, nil, err
		}
		if before.IsZero() || at.Before(before) {
			where = append(where, "created_at <= ? AND (created_at < ? OR (created_at = ? AND id < ?))")
			args = append(args, s.t(at), s.t(at), s.t(at), id)
			before = time.Time{} // implied
		}
	}
	if !before.IsZero() {
		where = append(where, "created_at < ?")
		args = append(args, s.t(before))
	}
	return where, args, statuses, nil
}

// runListQuery builds RunList's statement: newest first by (created_at,
// id), keyset-paged. Every page, the first and the deepest alike, reads
// one range of one index per status asked for, starting at the page's
// first row and ending after limit+1 rows:
//
//   - the index is named (Dialect.UseIndex, runListIndex), so that no
//     planner reads it from its newest end up to a deep page's cursor;
//   - the cursor is "created_at <= ? AND (created_at < ? OR (created_at = ?
//     AND id < ?))", which MariaDB, MySQL and SQLite all read as two
//     ranges of (created_at, id) after the filter's equalities, where a
//     row value "(created_at, id) < (?, ?)" is a range only on SQLite;
//   - several statuses are a UNION ALL of one such seek per status, each
//     limited, merged and cut to the page: "status IN (...)" would read
//     every status's rows from the cursor on and sort them, or scan the
//     created_at index skipping the other statuses' runs.
//
// With a schedule the schedule's index is read and a workflow or status
// filter is checked row by row (there is no index for the pair): at
// worst the page reads that schedule's runs.
func (s *Store) runListQuery(p persistence.RunListParams) (Query, int, error) {
	limit := clampLimit(p.Limit, 50, 1000)
	cols := runCols
	if p.NoPayloads {
		cols = runColsNoPayloads
	}
	where, args, statuses, err := s.runListWhere(p)
	if err != nil {
		return Query{}, 0, err
	}
	if p.IdempotencyKey != "" {
		// A key names at most one run per workflow (it is unique per
		// workflow): one range of idx_runs_idempotency_created
		// (idempotency_key, created_at, id) (MySQL migration 00008,
		// SQLite 00007) holds them, newest first, and the other filters
		// are checked row by row on those few.
		if len(statuses) > 0 {
			where = append(where, "status IN ("+in(len(statuses))+")")
			for _, st := range statuses {
				args = append(args, string(st))
			}
		}
		q := `SELECT ` + cols + ` FROM workflow_runs` + s.d.useIndex("idx_runs_idempotency_created") +
			` WHERE ` + strings.Join(where, " AND ") + ` ORDER BY created_at DESC, id DESC LIMIT ?`
		return Query{Name: "RunList", SQL: q, Args: append(args, limit+1)}, limit, nil
	}
	from := ` FROM workflow_runs` + s.d.useIndex(runListIndex(p.Workflow != "", p.Schedule != "", len(statuses) > 0))
	// seek returns the statement that reads cols of the page's first
	// limit+1 rows of one status (or of any, with none).
	seek := func(cols string, status []persistence.RunStatus) (string, []any) {
		w, a := where, args
		if len(status) == 1 {
			w = append(slices.Clip(w), "status = ?")
			a = append(slices.Clip(a), string(status[0]))
		}
		q := `SELECT ` + cols + from
		if len(w) > 0 {
			q += ` WHERE ` + strings.Join(w, " AND ")
		}
		return q + ` ORDER BY created_at DESC, id DESC LIMIT ?`, append(slices.Clip(a), limit+1)
	}
	if len(statuses) <= 1 {
		q, a := seek(cols, statuses)
		return Query{Name: "RunList", SQL: q, Args: a}, limit, nil
	}
	// Several statuses: the keys of each status's page, merged and cut
	// to the page, then the page's rows by primary key. The branches
	// read keys only (the index holds them): rows with their BLOB columns
	// would make MariaDB materialize each branch in an on-disk temporary
	// table. A branch is a derived table because SQLite takes no
	// parenthesized SELECT in a compound; its own ORDER BY and LIMIT make
	// it a seek. CROSS JOIN keeps SQLite from reading workflow_runs
	// first; MySQL reads the smaller side first anyway.
	var b strings.Builder
	var all []any
	b.WriteString(`SELECT ` + cols + ` FROM (`)
	for i, st := range statuses {
		q, a := seek("created_at AS k_at, id AS k_id", []persistence.RunStatus{st})
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, "SELECT k_at, k_id FROM (%s) AS s%d", q, i)
		all = append(all, a...)
	}
	b.WriteString(` ORDER BY k_at DESC, k_id DESC LIMIT ?) AS k CROSS JOIN workflow_runs WHERE id = k_id ORDER BY k_at DESC, k_id DESC`)
	return Query{Name: "RunList", SQL: b.String(), Args: append(all, limit+1)}, limit, nil
}

// runListIndex returns the index RunList reads for a filter: one whose
// leading columns are the filter's equalities, followed by (created_at,
// id) (InnoDB appends the primary key, id, itself; the migrations name it
// for SQLite). Migrations: 00001 idx_runs_created, idx_runs_wf_created,
// idx_runs_status_created, idx_runs_wf_status_created; 00002
// idx_runs_schedule_created.
func runListIndex(workflow, schedule, status bool) string {
	switch {
	case schedule:
		return "idx_runs_schedule_created"
	case workflow && status:
		return "idx_runs_wf_status_created"
	case workflow:
		return "idx_runs_wf_created"
	case status:
		return "idx_runs_status_created"
	}
	return "idx_runs_created"
}

// RunListShape is a RunList filter of one shape: which of its filters
// are set.
type RunListShape struct {
	Name   string
	Params persistence.RunListParams
}

// RunListShapes returns a RunList filter of every shape that has an index
// of its own, each without and with a creation window [after, before):
// none, a workflow ("w1"), one status (failed), several (failed and
// cancelled), a workflow and one status, a workflow and several
// (succeeded and failed), a schedule ("nightly"). Tests EXPLAIN them.
func RunListShapes(after, before time.Time) []RunListShape {
	failed := []persistence.RunStatus{persistence.RunFailed}
	base := []RunListShape{
		{"all", persistence.RunListParams{}},
		{"workflow", persistence.RunListParams{Workflow: "w1"}},
		{"status", persistence.RunListParams{Status: failed}},
		{"statuses", persistence.RunListParams{Status: []persistence.RunStatus{persistence.RunFailed, persistence.RunCancelled}}},
		{"workflow+status", persistence.RunListParams{Workflow: "w1", Status: failed}},
		{"workflow+statuses", persistence.RunListParams{Workflow: "w1", Status: []persistence.RunStatus{persistence.RunSucceeded, persistence.RunFailed}}},
		{"schedule", persistence.RunListParams{Schedule: "nightly"}},
	}
	out := slices.Clone(base)
	for _, b := range base {
		b.Name += "+window"
		b.Params.CreatedAfter, b.Params.CreatedBefore = after, before
		out = append(out, b)
	}
	return out
}

// RunListQuery returns the statement RunList runs for p, with its
// arguments, so that tests can EXPLAIN any page of any filter (with a
// cursor from RunListCursor, say).
func (s *Store) RunListQuery(p persistence.RunListParams) (Query, error) {
	q, _, err := s.runListQuery(p)
	return q, err
}

// RunListCursor returns the RunList cursor of the page that follows a
// page ending with the run created at createdAt with id: what that page's
// NextCursor is.
func RunListCursor(createdAt time.Time, id string) string {
	return encodeCursor(norm(createdAt), id)
}

// decodeRunCursor returns the creation time and id a RunList cursor
// holds.
func decodeRunCursor(c string) (time.Time, string, error) {
	parts, err := decodeCursor(c, 2)
	if err != nil {
		return time.Time{}, "", err
	}
	at, err := cursorTime(parts[0])
	// An id the store could not have written is refused here: MySQL's
	// ASCII id column would refuse to compare with other characters.
	if err != nil || !isID(parts[1]) {
		return time.Time{}, "", invalid("cursor", c, "not a cursor of this list")
	}
	return at, parts[1], nil
}

// leastTime is the least DATETIME of MySQL, before any time the store
// writes.
var leastTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)

// stepListDeadQuery builds StepListDead's query: newest first by
// (finished_at, run_id, step). dead_at and dead_workflow (migration 00003)
// are finished_at and the workflow of dead steps only, NULL for the
// others, so live steps never touch their indexes: idx_steps_dead
// (dead_at, run_id, step) (MySQL migration 00007, SQLite 00006), and with
// a workflow idx_steps_dead_wf (dead_workflow, dead_at, run_id, step).
func (s *Store) stepListDeadQuery(p persistence.StepListDeadParams) (string, []any, int, error) {
	limit := clampLimit(p.Limit, 50, 1000)
	const at = "dead_at"
	// dead_at >= the least DATETIME rather than IS NOT NULL: the same
	// rows, but a range that TiDB's planner also starts past the NULL
	// entries of the live steps (it reads IS NOT NULL as a full scan of
	// the index, which with fewer dead steps than the limit reads them
	// all). Not Go's zero time: the MySQL driver sends it as the zero
	// date, which TiDB compares with nothing.
	where := []string{"dead_at >= ?"}
	args := []any{s.t(leastTime)}
	if p.Workflow != "" {
		if err := validName("workflow name", p.Workflow); err != nil {
			return "", nil, 0, err
		}
		where = []string{"dead_workflow = ?"}
		args = []any{p.Workflow}
	}
	if p.Cursor != "" {
		parts, err := decodeCursor(p.Cursor, 3)
		if err != nil {
			return "", nil, 0, err
		}
		t, err := cursorTime(parts[0])
		if err != nil {
			return "", nil, 0, err
		}
		where = append(where, at+" <= ? AND ("+at+" < ? OR run_id < ? OR (run_id = ? AND step < ?))")
		args = append(args, s.t(t), s.t(t), parts[1], parts[1], parts[2])
	}
	q := `SELECT ` + stepCols + ` FROM step_runs WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY ` + at + ` DESC, run_id DESC, step DESC LIMIT ?`
	args = append(args, limit+1)
	return q, args, limit, nil
}

// IndexedQueries returns the reconciler's and the listing queries with
// arguments for the time now (the reconciler's for every workflow, and
// per workflow for "w1" and "w3"; RunList by idempotency key named
// RunListByKey...), and the statements of claim and completion
// batches that name steps by key (named StepClaimMany/... and
// StepCompleteMany/...), exactly as the store builds them, so that tests
// can EXPLAIN them.
func (s *Store) IndexedQueries(now time.Time) []Query {
	var qs []Query
	qs = append(qs, s.stepWorkflowsQueries("StepList", persistence.StepQueued, persistence.StepRetrying,
		persistence.StepRunning, persistence.StepCompensating)...)
	for _, due := range []persistence.ListDueParams{
		{Before: now, Limit: 100},
		{Before: now, Limit: 100, Workflows: []string{"w1", "w3"}},
	} {
		qs = append(qs, s.runListDueQueries(due)...)
		qs = append(qs, s.stepListQueuedQueries(due)...)
		qs = append(qs, s.stepListRetryDueQueries(due)...)
		qs = append(qs, s.stepListLeaseExpiredQueries(due)...)
	}
	cursor := encodeCursor(now, "zzzz")
	for _, c := range RunListShapes(now.AddDate(-10, 0, 0), now) {
		for _, cur := range []struct{ suffix, cursor string }{{"", ""}, {"+cursor", cursor}} {
			p := c.Params
			p.Cursor = cur.cursor
			q, _, _ := s.runListQuery(p)
			q.Name = "RunList/" + c.Name + cur.suffix
			qs = append(qs, q)
		}
	}
	// By idempotency key, alone and with every other filter.
	for _, c := range []struct {
		name string
		p    persistence.RunListParams
	}{
		{"RunListByKey", persistence.RunListParams{IdempotencyKey: "order-42"}},
		{"RunListByKey/cursor", persistence.RunListParams{IdempotencyKey: "order-42", Cursor: cursor}},
		{"RunListByKey/workflow+statuses+window", persistence.RunListParams{IdempotencyKey: "order-42", Workflow: "w1",
			Status: []persistence.RunStatus{persistence.RunFailed, persistence.RunCancelled}, CreatedAfter: now.AddDate(-1, 0, 0), CreatedBefore: now}},
		{"RunListByKey/schedule+status+cursor", persistence.RunListParams{IdempotencyKey: "order-42", Schedule: "nightly",
			Status: []persistence.RunStatus{persistence.RunFailed}, Cursor: cursor}},
	} {
		q, _, _ := s.runListQuery(c.p)
		q.Name = c.name
		qs = append(qs, q)
	}
	for _, c := range []struct {
		name string
		p    persistence.StepListDeadParams
	}{
		{"StepListDead", persistence.StepListDeadParams{}},
		{"StepListDead/cursor", persistence.StepListDeadParams{Cursor: encodeCursor(now, "zzzz", "s")}},
		{"StepListDead/workflow", persistence.StepListDeadParams{Workflow: "w"}},
	} {
		q, args, _, _ := s.stepListDeadQuery(c.p)
		qs = append(qs, Query{Name: c.name, SQL: q, Args: args})
	}
	// The statements that name steps by key: a claim batch's read and
	// write, and the grouped writes of a completion batch (writeSteps):
	// many rows written alike, and some whose outputs differ.
	byKey := map[stepKey]*stepRow{}
	var keys []stepKey
	for i := range 300 {
		k := stepKey{fmt.Sprintf("h%07d", i*7), "a"}
		byKey[k] = &stepRow{RunID: k.run, Step: k.step, Status: string(persistence.StepSucceeded), UpdatedAt: dbTime{now},
			FinishedAt: nullTime{T: now, Valid: true}, Output: []byte(fmt.Sprintf(`{"n":%d}`, i%2))}
		keys = append(keys, k)
	}
	qs = append(qs, Query{Name: "StepClaimMany/select", SQL: s.claimSelectSQL(len(keys)), Args: pairArgs(keys)},
		Query{Name: "StepClaimMany/update", SQL: s.claimUpdateSQL(len(keys)), Args: s.claimUpdateArgs("f", "w", now, now, keys)})
	// One step: a claim of a lone dequeued task, and the last part of a
	// group one row longer than a CASE takes.
	qs = append(qs, Query{Name: "StepClaimMany/select-one", SQL: s.claimSelectSQL(1), Args: pairArgs(keys[:1])},
		Query{Name: "StepClaimMany/update-one", SQL: s.claimUpdateSQL(1), Args: s.claimUpdateArgs("f", "w", now, now, keys[:1])})
	done := stepChange{mask: 1<<0 | 1<<9 | 1<<10, output: true} // status, finished_at, updated_at
	for i, st := range s.groupUpdates(byKey, done, keys) {
		qs = append(qs, Query{Name: fmt.Sprintf("StepCompleteMany/update%d", i), SQL: st.query, Args: st.args})
	}
	for i, st := range s.groupUpdates(byKey, done, keys[:maxCaseRows+1]) {
		qs = append(qs, Query{Name: fmt.Sprintf("StepCompleteMany/case-and-one%d", i), SQL: st.query, Args: st.args})
	}
	for _, k := range keys {
		byKey[k].Output = nil
	}
	for i, st := range s.groupUpdates(byKey, done, keys) {
		qs = append(qs, Query{Name: fmt.Sprintf("StepCompleteMany/alike%d", i), SQL: st.query, Args: st.args})
	}
	return qs
}

// Cursors are opaque to callers: base64 of "unixmicro|key|key".
func encodeCursor(t time.Time, keys ...string) string {
	s := strconv.FormatInt(t.UnixMicro(), 10) + "|" + strings.Join(keys, "|")
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func decodeCursor(c string, n int) ([]string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, invalid("cursor", c, "not a cursor of this list")
	}
	parts := strings.Split(string(b), "|")
	if len(parts) != n {
		return nil, invalid("cursor", c, "not a cursor of this list")
	}
	return parts, nil
}

func cursorTime(s string) (time.Time, error) {
	us, err := strconv.ParseInt(s, 10, 64)
	t := time.UnixMicro(us).UTC()
	if err != nil || t.Year() < 1 || t.Year() > 9999 { // beyond DATETIME
		return time.Time{}, invalid("cursor", s, "not a cursor of this list")
	}
	return t, nil
}

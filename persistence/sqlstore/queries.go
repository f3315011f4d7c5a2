package sqlstore

import (
	"encoding/base64"
	"fmt"
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

func (s *Store) runListDueQuery(p persistence.ListDueParams) Query {
	// idx_runs_start_due (start_due, id): start_due is start_at while a
	// run is pending, NULL after (migration 00003).
	return Query{Name: "RunListDue", SQL: `SELECT ` + runCols + ` FROM workflow_runs
		WHERE start_due <= ? ORDER BY start_due, id LIMIT ?`,
		Args: []any{s.t(norm(p.Before)), clampLimit(p.Limit, 100, 10000)}}
}

func (s *Store) runDeleteFinishedQuery(p persistence.RunDeleteFinishedParams) Query {
	// idx_runs_finished (finished_at). Only terminal runs have a
	// finished_at (RunReopen clears it), so no status filter is needed, and
	// none gets in the way of reading the index in order.
	return Query{Name: "RunDeleteFinished", SQL: `SELECT id FROM workflow_runs
		WHERE finished_at < ? ORDER BY finished_at LIMIT ?`,
		Args: []any{s.t(norm(p.Before)), clampLimit(p.Limit, 1000, 10000)}}
}

// The reconciler's step queries read idx_steps_due (status, due_at), one
// index range scan each. due_at is a generated column (migration 00003):
// queued_at for a queued step, next_attempt_at for a retrying one,
// lease_expires_at for a running one, the first set of lease_expires_at,
// next_attempt_at and queued_at for a compensating one, finished_at for a
// dead one. The original column conditions stay in each query, so a query
// means what it says whatever due_at holds; due_at only narrows the scan.
// The callers merge the results by time.
func (s *Store) stepListQueuedQueries(p persistence.ListDueParams) []Query {
	before, limit := s.t(norm(p.Before)), clampLimit(p.Limit, 100, 10000)
	return []Query{
		{Name: "StepListQueued/queued", SQL: `SELECT ` + stepCols + ` FROM step_runs
			WHERE status = ? AND due_at < ? AND queued_at < ? ORDER BY due_at LIMIT ?`,
			Args: []any{string(persistence.StepQueued), before, before, limit}},
		{Name: "StepListQueued/compensating", SQL: `SELECT ` + stepCols + ` FROM step_runs
			WHERE status = ? AND due_at < ? AND queued_at < ? AND lease_expires_at IS NULL AND next_attempt_at IS NULL
			ORDER BY due_at LIMIT ?`,
			Args: []any{string(persistence.StepCompensating), before, before, limit}},
	}
}

func (s *Store) stepListRetryDueQueries(p persistence.ListDueParams) []Query {
	before, limit := s.t(norm(p.Before)), clampLimit(p.Limit, 100, 10000)
	return []Query{
		{Name: "StepListRetryDue/retrying", SQL: `SELECT ` + stepCols + ` FROM step_runs
			WHERE status = ? AND due_at <= ? AND next_attempt_at <= ? ORDER BY due_at LIMIT ?`,
			Args: []any{string(persistence.StepRetrying), before, before, limit}},
		{Name: "StepListRetryDue/compensating", SQL: `SELECT ` + stepCols + ` FROM step_runs
			WHERE status = ? AND due_at <= ? AND next_attempt_at <= ? AND lease_expires_at IS NULL ORDER BY due_at LIMIT ?`,
			Args: []any{string(persistence.StepCompensating), before, before, limit}},
	}
}

func (s *Store) stepListLeaseExpiredQueries(p persistence.ListDueParams) []Query {
	before, limit := s.t(norm(p.Before)), clampLimit(p.Limit, 100, 10000)
	q := func(st persistence.StepStatus) Query {
		return Query{Name: "StepListLeaseExpired/" + string(st), SQL: `SELECT ` + stepCols + ` FROM step_runs
			WHERE status = ? AND due_at < ? AND lease_expires_at < ? ORDER BY due_at LIMIT ?`,
			Args: []any{string(st), before, before, limit}}
	}
	return []Query{q(persistence.StepRunning), q(persistence.StepCompensating)}
}

// runListQuery builds RunList's query: newest first by (created_at, id),
// keyset-paged. Indexes: idx_runs_wf_status_created, idx_runs_wf_created,
// idx_runs_status_created, idx_runs_created (InnoDB appends the primary
// key, id, to each). With several statuses the rows of each are merged by
// a sort.
func (s *Store) runListQuery(p persistence.RunListParams) (string, []any, int, error) {
	limit := clampLimit(p.Limit, 50, 1000)
	var where []string
	var args []any
	if p.Workflow != "" {
		if err := validName("workflow name", p.Workflow); err != nil {
			return "", nil, 0, err
		}
		where = append(where, "workflow = ?")
		args = append(args, p.Workflow)
	}
	if p.Schedule != "" {
		if err := validName("schedule name", p.Schedule); err != nil {
			return "", nil, 0, err
		}
		where = append(where, "schedule = ?")
		args = append(args, p.Schedule)
	}
	if len(p.Status) > 0 {
		for _, st := range p.Status {
			if !st.Valid() {
				return "", nil, 0, invalid("run status", string(st), "unknown")
			}
		}
		where = append(where, "status IN ("+in(len(p.Status))+")")
		for _, st := range p.Status {
			args = append(args, string(st))
		}
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, "created_at >= ?")
		args = append(args, s.t(norm(p.CreatedAfter)))
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, "created_at < ?")
		args = append(args, s.t(norm(p.CreatedBefore)))
	}
	if p.Cursor != "" {
		parts, err := decodeCursor(p.Cursor, 2)
		if err != nil {
			return "", nil, 0, err
		}
		at, err := cursorTime(parts[0])
		if err != nil {
			return "", nil, 0, err
		}
		// (created_at, id) < (at, id0), written so the created_at range
		// is sargable.
		where = append(where, "created_at <= ? AND (created_at < ? OR id < ?)")
		args = append(args, s.t(at), s.t(at), parts[1])
	}
	q := `SELECT ` + runCols + ` FROM workflow_runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit+1)
	return q, args, limit, nil
}

// stepListDeadQuery builds StepListDead's query: newest first by
// (finished_at, run_id, step). Indexes (migration 00003): idx_steps_due
// (status, due_at, run_id, step), where due_at is finished_at for a dead
// step; with a workflow, idx_steps_dead_wf (dead_workflow, dead_at, run_id,
// step), whose columns are the workflow and finished_at of dead steps only.
func (s *Store) stepListDeadQuery(p persistence.StepListDeadParams) (string, []any, int, error) {
	limit := clampLimit(p.Limit, 50, 1000)
	at := "due_at"
	where := []string{"status = ?"}
	args := []any{string(persistence.StepDead)}
	if p.Workflow != "" {
		if err := validName("workflow name", p.Workflow); err != nil {
			return "", nil, 0, err
		}
		at = "dead_at"
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
// arguments for the time now, and the statements of claim and completion
// batches that name steps by key (named StepClaimMany/... and
// StepCompleteMany/...), exactly as the store builds them, so that tests
// can EXPLAIN them.
func (s *Store) IndexedQueries(now time.Time) []Query {
	due := persistence.ListDueParams{Before: now, Limit: 100}
	qs := []Query{s.runListDueQuery(due), s.runDeleteFinishedQuery(persistence.RunDeleteFinishedParams{Before: now})}
	qs = append(qs, s.stepListQueuedQueries(due)...)
	qs = append(qs, s.stepListRetryDueQueries(due)...)
	qs = append(qs, s.stepListLeaseExpiredQueries(due)...)
	cursor := encodeCursor(now, "zzzz")
	for _, c := range []struct {
		name string
		p    persistence.RunListParams
	}{
		{"RunList", persistence.RunListParams{}},
		{"RunList/cursor", persistence.RunListParams{Cursor: cursor}},
		{"RunList/workflow", persistence.RunListParams{Workflow: "w"}},
		{"RunList/workflow+cursor", persistence.RunListParams{Workflow: "w", Cursor: cursor}},
		{"RunList/status", persistence.RunListParams{Status: []persistence.RunStatus{persistence.RunFailed}}},
		{"RunList/status+cursor", persistence.RunListParams{Status: []persistence.RunStatus{persistence.RunFailed}, Cursor: cursor}},
		{"RunList/workflow+status", persistence.RunListParams{Workflow: "w", Status: []persistence.RunStatus{persistence.RunFailed}}},
		{"RunList/time", persistence.RunListParams{CreatedAfter: now.Add(-time.Hour), CreatedBefore: now}},
	} {
		q, args, _, _ := s.runListQuery(c.p)
		qs = append(qs, Query{Name: c.name, SQL: q, Args: args})
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
	if err != nil {
		return time.Time{}, invalid("cursor", s, "not a cursor of this list")
	}
	return time.UnixMicro(us).UTC(), nil
}

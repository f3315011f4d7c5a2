package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Retention (MySQL migration 00014, SQLite 00013): finished runs are
// deleted a batch at a time, with every row kept by run, and named leases
// let one node at a time run the sweep.
//
// A batch reads finished runs oldest first through idx_runs_finished_id
// (finished_at, id), after the previous batch's last (finished_at, id):
// the runs it keeps (dead-lettered ones) are read once per sweep, never
// again by each batch. Only terminal runs have a finished_at (RunReopen
// clears it), so no status filter is needed. Everything else is read and
// deleted by key: steps by their primary key's run_id prefix, attempts by
// idx_attempts_run, event links by idx_event_runs_run, events and
// schedule ticks by primary key.

// finishedRow is a run a retention batch read.
type finishedRow struct {
	ID            string   `db:"id"`
	FinishedAt    dbTime   `db:"finished_at"`
	Schedule      string   `db:"schedule"`
	ScheduledTick nullTime `db:"scheduled_tick"`
	ParentRunID   string   `db:"parent_run_id"`
}

// retentionRead is the query of a batch's finished runs; lock adds the
// dialect's FOR UPDATE (a deleting batch: a run cannot be reopened under
// it).
func (s *Store) retentionRead(p persistence.RunDeleteFinishedParams, lock bool) (Query, error) {
	before, limit := s.t(norm(p.Before)), clampLimit(p.Limit, 1000, 10000)
	q := Query{Name: "RunDeleteFinished", SQL: `SELECT id, finished_at, schedule, scheduled_tick, parent_run_id FROM workflow_runs` +
		s.d.useIndex("idx_runs_finished_id") + ` WHERE finished_at < ?`, Args: []any{before}}
	if p.Cursor != "" {
		parts, err := decodeCursor(p.Cursor, 2)
		if err != nil {
			return Query{}, err
		}
		t, err := cursorTime(parts[0])
		if err != nil {
			return Query{}, err
		}
		// One range of the index from the cursor's time on, in order;
		// the runs of that very time up to the cursor's id (kept ones:
		// the deleted are gone) are read again and filtered out.
		q.Name += "/cursor"
		q.SQL += ` AND finished_at >= ? AND (finished_at > ? OR id > ?)`
		q.Args = append(q.Args, s.t(t), s.t(t), parts[1])
	}
	q.SQL += ` ORDER BY finished_at, id LIMIT ?`
	q.Args = append(q.Args, limit)
	if lock {
		q.SQL += s.d.ForUpdate
	}
	return q, nil
}

// The statements of a batch over the runs ids (all read) and del (those
// without a dead step), as retentionBatch runs them.
//
// deadOf reads the batch's steps by primary key and keeps the runs with a
// dead one: a condition on status would let the planner read every dead
// step (the whole dead-letter queue) through a status index instead.
func (s *Store) deadOf(ids []any) Query {
	return Query{Name: "RunDeleteFinished/dead", SQL: `SELECT run_id FROM step_runs` + s.d.ByPrimaryKey + ` WHERE run_id IN (` + in(len(ids)) +
		`) GROUP BY run_id HAVING MAX(CASE WHEN status = 'dead' THEN 1 ELSE 0 END) = 1`, Args: ids}
}

// parentsOf reads which of the batch's child runs' parents exist, by
// primary key: a child is kept while its parent is (deleted with it, or
// by the first sweep after it).
func parentsOf(parents []any) Query {
	return Query{Name: "RunDeleteFinished/parents", SQL: `SELECT id FROM workflow_runs WHERE id IN (` + in(len(parents)) + `)`, Args: parents}
}

// attemptsOf reads the ids of the batch's attempts through
// idx_attempts_run, so that they are deleted by primary key: a DELETE
// takes no index hint, and a planner that takes the table for small
// would scan it.
func (s *Store) attemptsOf(del []any) Query {
	return Query{Name: "RunDeleteFinished/attempts", SQL: `SELECT id FROM step_attempts` + s.d.useIndex("idx_attempts_run") +
		` WHERE run_id IN (` + in(len(del)) + `)`, Args: del}
}

func eventsOf(del []any) Query {
	return Query{Name: "RunDeleteFinished/event-links", SQL: `SELECT event_id FROM event_runs WHERE run_id IN (` + in(len(del)) + `)`, Args: del}
}

// eventsGone selects the events among evs that the batch leaves without a
// run: dispatched (a pending event is the outbox's), published before
// the sweep's bound, and with no link to a run outside the batch.
func (s *Store) eventsGone(evs, del []any, before time.Time) Query {
	args := append(append(append([]any{}, evs...), s.t(norm(before))), del...)
	return Query{Name: "RunDeleteFinished/events", SQL: `SELECT id FROM events WHERE id IN (` + in(len(evs)) + `)
		AND dispatched_at IS NOT NULL AND published_at < ?
		AND NOT EXISTS (SELECT 1 FROM event_runs r WHERE r.event_id = events.id AND r.run_id NOT IN (` + in(len(del)) + `))`, Args: args}
}

// batchDeletes are a batch's deletes, children first (the MySQL schema
// has no foreign keys to cascade, migration 00004), the runs last. ticks
// maps a schedule to the ticks of its runs in the batch.
func (s *Store) batchDeletes(del, attempts, gone []any, ticks map[string][]any) []Query {
	list := in(len(del))
	var qs []Query
	if len(attempts) > 0 {
		qs = append(qs, Query{Name: "RunDeleteFinished/delete-attempts", SQL: `DELETE FROM step_attempts WHERE id IN (` + in(len(attempts)) + `)`, Args: attempts})
	}
	qs = append(qs,
		Query{Name: "RunDeleteFinished/delete-steps", SQL: `DELETE FROM step_runs WHERE run_id IN (` + list + `)`, Args: del},
		Query{Name: "RunDeleteFinished/delete-event-links", SQL: `DELETE FROM event_runs WHERE run_id IN (` + list + `)`, Args: del},
		Query{Name: "RunDeleteFinished/delete-actions", SQL: `DELETE FROM run_actions WHERE run_id IN (` + list + `)`, Args: del},
		// A finished run has no parked step left, but a wait row of a
		// step cancelled by hand in the store would outlive its run.
		Query{Name: "RunDeleteFinished/delete-waits", SQL: `DELETE FROM step_waits WHERE run_id IN (` + list + `)`, Args: del})
	if len(gone) > 0 {
		qs = append(qs, Query{Name: "RunDeleteFinished/delete-events", SQL: `DELETE FROM events WHERE id IN (` + in(len(gone)) + `)`, Args: gone})
	}
	for sched, ts := range ticks {
		qs = append(qs, Query{Name: "RunDeleteFinished/delete-ticks", SQL: `DELETE FROM schedule_ticks WHERE schedule = ? AND tick IN (` + in(len(ts)) + `)`,
			Args: append([]any{sched}, ts...)})
	}
	return append(qs, Query{Name: "RunDeleteFinished/delete-runs", SQL: `DELETE FROM workflow_runs WHERE id IN (` + list + `)`, Args: del})
}

// RunDeleteFinished implements persistence.Store: one batch, in one
// transaction (none for a dry run).
func (s *Store) RunDeleteFinished(ctx context.Context, p persistence.RunDeleteFinishedParams) (persistence.RunDeleteFinishedResult, error) {
	if p.Before.IsZero() {
		return persistence.RunDeleteFinishedResult{}, invalid("retention bound (Before)", "", "is zero")
	}
	read, err := s.retentionRead(p, !p.DryRun)
	if err != nil {
		return persistence.RunDeleteFinishedResult{}, err
	}
	var res persistence.RunDeleteFinishedResult
	batch := func(q querier) error {
		res = persistence.RunDeleteFinishedResult{}
		return s.retentionBatch(ctx, q, p, read, &res)
	}
	if p.DryRun {
		err = batch(s.db)
	} else {
		err = s.write(ctx, batch)
	}
	if err != nil {
		return persistence.RunDeleteFinishedResult{}, wrap("run delete finished", err)
	}
	return res, nil
}

// retentionBatch reads one batch of finished runs (read) and deletes
// those it does not keep, with every row kept by run, in the order of
// batchDeletes; a dry run counts the rows instead. res is filled as it
// goes.
func (s *Store) retentionBatch(ctx context.Context, q querier, p persistence.RunDeleteFinishedParams, read Query, res *persistence.RunDeleteFinishedResult) error {
	var rows []finishedRow
	if err := s.selectAll(ctx, q, &rows, read.SQL, read.Args...); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	if len(rows) == clampLimit(p.Limit, 1000, 10000) {
		last := rows[len(rows)-1]
		res.NextCursor = encodeCursor(last.FinishedAt.T, last.ID)
	}
	kept, err := s.keptRuns(ctx, q, rows)
	if err != nil {
		return err
	}
	res.Kept = len(kept)
	var del []any
	ticks := map[string][]any{}
	for _, r := range rows {
		if kept[r.ID] {
			continue
		}
		del = append(del, r.ID)
		res.RunIDs = append(res.RunIDs, r.ID)
		if r.Schedule != "" && r.ScheduledTick.Valid {
			ticks[r.Schedule] = append(ticks[r.Schedule], s.t(norm(r.ScheduledTick.T)))
		}
	}
	if len(del) == 0 {
		return nil
	}
	gone, err := s.goneEvents(ctx, q, del, p.Before, res)
	if err != nil {
		return err
	}
	res.Events = len(gone)
	attempts, err := s.batchAttempts(ctx, q, del)
	if err != nil {
		return err
	}
	res.Attempts = len(attempts)
	return s.runDeletes(ctx, q, s.batchDeletes(del, attempts, gone, ticks), p.DryRun, res)
}

// keptRuns returns the runs of a batch that it keeps: those with a dead
// step, and the children of a run that exists and is not deleted by the
// batch.
func (s *Store) keptRuns(ctx context.Context, q querier, rows []finishedRow) (map[string]bool, error) {
	ids := make([]any, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	var deadRows []struct {
		RunID string `db:"run_id"`
	}
	dq := s.deadOf(ids)
	if err := s.selectAll(ctx, q, &deadRows, dq.SQL, dq.Args...); err != nil {
		return nil, err
	}
	kept := make(map[string]bool, len(deadRows))
	for _, d := range deadRows {
		kept[d.RunID] = true
	}
	// A child whose parent exists, and is not deleted by this batch, is
	// kept: the parent's Get and compensation still need it.
	deleting := make(map[string]bool, len(rows))
	var parents []any
	for _, r := range rows {
		if !kept[r.ID] {
			deleting[r.ID] = true
		}
		if r.ParentRunID != "" {
			parents = append(parents, r.ParentRunID)
		}
	}
	if len(parents) == 0 {
		return kept, nil
	}
	var exist []struct {
		ID string `db:"id"`
	}
	pq := parentsOf(parents)
	if err := s.selectAll(ctx, q, &exist, pq.SQL, pq.Args...); err != nil {
		return nil, err
	}
	exists := make(map[string]bool, len(exist))
	for _, e := range exist {
		exists[e.ID] = true
	}
	// Until nothing changes: a kept child keeps its own children.
	for changed := true; changed; {
		changed = false
		for _, r := range rows {
			if r.ParentRunID != "" && exists[r.ParentRunID] && !deleting[r.ParentRunID] && deleting[r.ID] {
				kept[r.ID], deleting[r.ID], changed = true, false, true
			}
		}
	}
	return kept, nil
}

// goneEvents reads the event links of the runs del and returns the
// events the batch deletes with them (eventsGone); res gets the number
// of links.
func (s *Store) goneEvents(ctx context.Context, q querier, del []any, before time.Time, res *persistence.RunDeleteFinishedResult) ([]any, error) {
	var links []struct {
		EventID string `db:"event_id"`
	}
	eq := eventsOf(del)
	if err := s.selectAll(ctx, q, &links, eq.SQL, eq.Args...); err != nil {
		return nil, err
	}
	res.EventLinks = len(links)
	if len(links) == 0 {
		return nil, nil
	}
	seen := map[string]bool{}
	var evs []any
	for _, l := range links {
		if !seen[l.EventID] {
			seen[l.EventID] = true
			evs = append(evs, l.EventID)
		}
	}
	var rows []struct {
		ID string `db:"id"`
	}
	gq := s.eventsGone(evs, del, before)
	if err := s.selectAll(ctx, q, &rows, gq.SQL, gq.Args...); err != nil {
		return nil, err
	}
	var gone []any
	for _, r := range rows {
		gone = append(gone, r.ID)
	}
	return gone, nil
}

// batchAttempts returns the ids of the attempts of the runs del
// (attemptsOf).
func (s *Store) batchAttempts(ctx context.Context, q querier, del []any) ([]any, error) {
	var atts []struct {
		ID int64 `db:"id"`
	}
	aq := s.attemptsOf(del)
	if err := s.selectAll(ctx, q, &atts, aq.SQL, aq.Args...); err != nil {
		return nil, err
	}
	attempts := make([]any, len(atts))
	for i, a := range atts {
		attempts[i] = a.ID
	}
	return attempts, nil
}

// runDeletes runs a batch's deletes in order (or counts their rows, with
// dryRun) and puts their counts in res. The attempts were read by id
// first: a delete of another number means a concurrent writer.
func (s *Store) runDeletes(ctx context.Context, q querier, deletes []Query, dryRun bool, res *persistence.RunDeleteFinishedResult) error {
	for _, st := range deletes {
		n, err := s.countOrDelete(ctx, q, st, dryRun)
		if err != nil {
			return fmt.Errorf("%s: %w", st.Name, err)
		}
		switch st.Name {
		case "RunDeleteFinished/delete-attempts":
			if n != res.Attempts {
				return fmt.Errorf("deleted %d attempts of the %d read (a concurrent writer?)", n, res.Attempts)
			}
		case "RunDeleteFinished/delete-steps":
			res.Steps = n
		case "RunDeleteFinished/delete-actions":
			res.Actions = n
		case "RunDeleteFinished/delete-ticks":
			res.ScheduleTicks += n
		}
	}
	return nil
}

// countOrDelete runs a DELETE and returns how many rows it deleted, or
// with dryRun counts the rows it would delete.
func (s *Store) countOrDelete(ctx context.Context, q querier, st Query, dryRun bool) (int, error) {
	if !dryRun {
		n, err := s.exec(ctx, q, st.SQL, st.Args...)
		return int(n), err
	}
	var n int
	err := q.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) `+st.SQL[len("DELETE "):]), st.Args...).Scan(&n)
	return n, err
}

// RetentionQueries returns the statements of a retention batch, with
// arguments for the time now (the first batch and one after a cursor;
// the dead-letter check, the event reads and the deletes of 100 runs, of
// events and of schedule ticks), exactly as the store builds them, so
// that tests can EXPLAIN them.
func (s *Store) RetentionQueries(now time.Time) []Query {
	p := persistence.RunDeleteFinishedParams{Before: now, Limit: 500}
	first, _ := s.retentionRead(p, false)
	p.Cursor = encodeCursor(now.Add(-time.Hour), "zzzz")
	next, _ := s.retentionRead(p, false)
	ids := make([]any, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("run%05d", i)
	}
	evs := []any{"ev00001", "ev00002"}
	attempts := []any{int64(1), int64(2), int64(3)}
	qs := []Query{first, next, s.deadOf(ids), parentsOf(ids), eventsOf(ids), s.eventsGone(evs, ids, now), s.attemptsOf(ids)}
	return append(qs, s.batchDeletes(ids, attempts, evs, map[string][]any{"nightly": {s.t(now.Add(-time.Hour)), s.t(now)}})...)
}

// leaseName and leaseHolder bound a lease's name and holder.
const maxLeaseHolder = 128

func validLease(p persistence.LeaseParams) error {
	if err := validName("lease name", p.Name); err != nil {
		return err
	}
	return validNodeToken("lease holder", p.Holder, maxLeaseHolder)
}

// LeaseAcquire implements persistence.Store: the lease's row is inserted
// if it is missing, or else taken by a conditional update (free, expired,
// or the holder's own), in one transaction.
func (s *Store) LeaseAcquire(ctx context.Context, p persistence.LeaseParams) (bool, error) {
	if err := validLease(p); err != nil {
		return false, err
	}
	if !p.Until.After(p.Now) {
		return false, invalid(fmt.Sprintf("lease %q end", p.Name), p.Until.String(), "is not after Now")
	}
	var got bool
	err := s.write(ctx, func(q querier) error {
		r, err := q.ExecContext(ctx, s.d.rebind(`INSERT INTO dagflow_leases (name, holder, expires_at) VALUES (?, ?, ?)`+s.d.InsertOnce("name")),
			p.Name, p.Holder, s.t(norm(p.Until)))
		if err != nil {
			return err
		}
		existed, err := s.d.Existed(r)
		if err != nil {
			return err
		}
		if !existed {
			got = true
			return nil
		}
		n, err := s.exec(ctx, q, `UPDATE dagflow_leases SET holder = ?, expires_at = ? WHERE name = ? AND (holder = ? OR expires_at < ?)`,
			p.Holder, s.t(norm(p.Until)), p.Name, p.Holder, s.t(norm(p.Now)))
		got = n == 1
		return err
	})
	return got, wrap("lease acquire", err)
}

// LeaseRelease implements persistence.Store.
func (s *Store) LeaseRelease(ctx context.Context, p persistence.LeaseParams) error {
	if err := validLease(p); err != nil {
		return err
	}
	_, err := s.exec1(ctx, `DELETE FROM dagflow_leases WHERE name = ? AND holder = ?`, p.Name, p.Holder)
	return wrap("lease release", err)
}

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dagflow/dagflow/persistence"
)

// Parked steps: waits for an event or a signal, and sleeps. A parked
// step is its step_runs row (status parked, no lease, no task in Redis)
// and one step_waits row saying what ends it. Ending it is a completion
// (completeIn with Parked: the step must still be parked, so of an event,
// a signal and a timer racing exactly one wins) or, for a wait's
// timeout, StepFail with Parked.

// MaxCorrelationLen is the longest correlation value, in characters.
const MaxCorrelationLen = 255

// validCorrelation checks a correlation value: at most
// MaxCorrelationLen characters of UTF-8 without NUL (empty is none).
func validCorrelation(v string) error {
	if !validUTF8NoNUL(v) || utf8.RuneCountInString(v) > MaxCorrelationLen {
		return invalid("correlation", v, fmt.Sprintf("must be valid UTF-8 without NUL, at most %d characters", MaxCorrelationLen))
	}
	return nil
}

const stepWaitCols = "run_id, step, workflow, kind, event_name, correlation, due_at, created_at"

type stepWaitRow struct {
	RunID       string   `db:"run_id"`
	Step        string   `db:"step"`
	Workflow    string   `db:"workflow"`
	Kind        string   `db:"kind"`
	EventName   string   `db:"event_name"`
	Correlation string   `db:"correlation"`
	DueAt       nullTime `db:"due_at"`
	CreatedAt   dbTime   `db:"created_at"`
}

func (r stepWaitRow) record() persistence.StepWait {
	w := persistence.StepWait{RunID: r.RunID, Step: r.Step, Workflow: r.Workflow, Kind: persistence.WaitKind(r.Kind),
		Event: r.EventName, Correlation: r.Correlation, DueAt: r.DueAt.ptr(), CreatedAt: r.CreatedAt.T}
	if w.Kind == persistence.WaitChild {
		w.ChildRunID, w.Event, w.Correlation = r.Correlation, "", ""
	}
	return w
}

// maxCorrelationAliases bounds StepParkParams.CorrelationAliases and
// EventCreateParams.CorrelationAliases: one per key of a codec's keyring.
const maxCorrelationAliases = 16

// validAliases checks the other stored forms of a correlation value.
func validAliases(correlation string, aliases []string) error {
	if len(aliases) == 0 {
		return nil
	}
	if correlation == "" {
		return invalid("correlation alias", aliases[0], "given without a correlation")
	}
	if len(aliases) > maxCorrelationAliases {
		return invalid("correlation aliases", fmt.Sprint(len(aliases)), fmt.Sprintf("at most %d", maxCorrelationAliases))
	}
	for _, a := range aliases {
		if a == "" {
			return invalid("correlation alias", a, "must not be empty")
		}
		if err := validCorrelation(a); err != nil {
			return err
		}
	}
	return nil
}

// correlationValues returns a correlation value and its aliases, sorted
// and without repeats: the values a row may be stored with, in the order
// their locks are taken.
func correlationValues(correlation string, aliases []string) []string {
	if len(aliases) == 0 {
		return []string{correlation}
	}
	vs := append([]string{correlation}, aliases...)
	slices.Sort(vs)
	return slices.Compact(vs)
}

// correlationIn is the condition that column equals one of values byte
// for byte (Dialect.textEq: MySQL's PAD SPACE collations ignore trailing
// spaces), with its arguments after args. Each value reads one range of
// column's index.
func (s *Store) correlationIn(column string, values []string, args ...any) (string, []any) {
	if len(values) == 1 {
		eq, a := s.d.textEq(column, values[0])
		return eq, append(args, a...)
	}
	parts := make([]string, len(values))
	for i, v := range values {
		eq, a := s.d.textEq(column, v)
		parts[i], args = "("+eq+")", append(args, a...)
	}
	return "(" + strings.Join(parts, " OR ") + ")", args
}

// lockCorrelation takes the lock of (name, correlation) for each of
// values, in their order (correlationValues sorts them, so that every
// caller takes them in one order): publications and parks of one value
// are serialized by it, so that the second sees what the first wrote (the
// event, or the wait) whatever their order, also when they hash it under
// different keys of one keyring (each locks the hashes of every key it
// has). On MySQL the lock's key compares with trailing spaces ignored,
// so "D-4004" and "D-4004 " share a lock row: they are serialized more
// than they need, and still matched byte-exact (correlationIn).
func (s *Store) lockCorrelation(ctx context.Context, q querier, name string, values []string) error {
	for _, v := range values {
		if _, err := s.exec(ctx, q, `INSERT INTO correlation_locks (event_name, correlation) VALUES (?, ?)`+
			s.d.InsertIgnore([]string{"event_name", "correlation"}), name, v); err != nil {
			return err
		}
	}
	return nil
}

// checkPark validates StepPark's arguments.
func checkPark(p persistence.StepParkParams) error {
	if err := stepRef(p.RunID, p.Step); err != nil {
		return err
	}
	if !p.Kind.Valid() {
		return invalid("wait kind", string(p.Kind), "must be event, signal, sleep or child")
	}
	if (p.Kind == persistence.WaitChild) != (p.Child != nil) {
		return invalid("wait kind", string(p.Kind), "a child run is given with, and only with, a wait for a child")
	}
	if p.Kind == persistence.WaitEvent {
		if err := validEventName(p.Event); err != nil {
			return err
		}
		if p.Correlation == "" {
			return invalid("correlation", "", "a wait for an event needs one")
		}
		if err := validCorrelation(p.Correlation); err != nil {
			return err
		}
		if err := validAliases(p.Correlation, p.CorrelationAliases); err != nil {
			return err
		}
	} else if p.Event != "" || p.Correlation != "" || len(p.CorrelationAliases) > 0 {
		return invalid("wait kind", string(p.Kind), "takes no event or correlation")
	}
	if p.Kind == persistence.WaitSleep && p.DueAt == nil {
		return invalid("sleep due time", "", "a sleep needs one")
	}
	return nil
}

// matchEventSQL finds the newest event of a (name, correlation) in the
// lookback window: the end of one range of idx_events_correlation (of a
// range per value, with aliases).
func (s *Store) matchEventSQL(name string, values []string, since any) (string, []any) {
	cond, args := s.correlationIn("correlation", values, name)
	return `SELECT ` + eventCols + ` FROM events` + s.d.useIndex("idx_events_correlation") + `
		WHERE name = ? AND ` + cond + ` AND published_at >= ? ORDER BY published_at DESC LIMIT 1`, append(args, since)
}

// StepPark implements persistence.Store.
func (s *Store) StepPark(ctx context.Context, p persistence.StepParkParams) (persistence.StepParkResult, error) {
	if err := checkPark(p); err != nil {
		return persistence.StepParkResult{}, err
	}
	now, due := norm(p.Now), normPtr(p.DueAt)
	var child runPlan
	if p.Child != nil {
		cp := *p.Child
		cp.ParentRunID, cp.ParentStep = p.RunID, p.Step
		var err error
		if child, err = s.planRun(cp); err != nil {
			return persistence.StepParkResult{}, fmt.Errorf("child run: %w", err)
		}
	}
	var res persistence.StepParkResult
	err := s.write(ctx, func(q querier) error {
		res = persistence.StepParkResult{}
		values := correlationValues(p.Correlation, p.CorrelationAliases)
		if p.Kind == persistence.WaitEvent {
			// Lock order: the correlation, then the step (as a
			// publication: the correlation, then its waiters' runs and
			// steps).
			if err := s.lockCorrelation(ctx, q, p.Event, values); err != nil {
				return err
			}
		}
		row, err := s.lockFenced(ctx, q, p.RunID, p.Step, p.Fence, false)
		if err != nil {
			return err
		}
		if p.Kind == persistence.WaitEvent {
			var evs []eventRow
			match, args := s.matchEventSQL(p.Event, values, s.t(norm(p.EventsSince)))
			if err := s.selectAll(ctx, q, &evs, match, args...); err != nil {
				return err
			}
			if len(evs) > 0 {
				ev := evs[0].record()
				res.Step, res.Matched = row.record(), &ev
				return nil
			}
		}
		event, corr := p.Event, p.Correlation
		if p.Kind == persistence.WaitChild {
			// The child run, created (or found by its idempotency key)
			// with the park: the parent step is parked with a child, or
			// neither exists.
			cr, err := s.runCreate(ctx, q, child)
			if err != nil {
				return err
			}
			res.Child = &cr
			event, corr = childWaitMarker, cr.Run.ID
		}
		row.Status = string(persistence.StepParked)
		row.LeaseExpiresAt = nullTime{}
		row.NextAttemptAt = nullTime{}
		if due != nil {
			row.NextAttemptAt = nullTime{T: *due, Valid: true}
		}
		row.UpdatedAt = dbTime{now}
		// The fence stays: it names the attempt the step is parked in
		// (its history), and no one holds it (the status is not running).
		if _, err := s.exec(ctx, q, `UPDATE step_runs SET status = ?, lease_expires_at = NULL, next_attempt_at = ?, updated_at = ?
			WHERE run_id = ? AND step = ? AND fence = ? AND status = ?`,
			row.Status, s.tp(due), s.t(now), p.RunID, p.Step, p.Fence, string(persistence.StepRunning)); err != nil {
			return err
		}
		if _, err := s.exec(ctx, q, `DELETE FROM step_waits WHERE run_id = ? AND step = ?`, p.RunID, p.Step); err != nil {
			return err
		}
		if _, err := s.exec(ctx, q, `INSERT INTO step_waits (`+stepWaitCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			p.RunID, p.Step, row.Workflow, string(p.Kind), event, corr, s.tp(due), s.t(now)); err != nil {
			return err
		}
		res.Step = row.record()
		return nil
	})
	return res, wrap("step park", err)
}

// childWaitMarker is the event_name of a parked `child` step's wait row,
// whose correlation is the child run's id: not a valid event name, so no
// event matches it, and the child waits are one range of
// idx_step_waits_match (StepListChildDone).
const childWaitMarker = "#child"

// childDoneSQL lists the parked `child` steps whose child run finished:
// the child waits (one range of idx_step_waits_match, in its order, so
// nothing is sorted), each child run by its primary key. The wait's
// correlation is converted to the ids' character set (Dialect.AsID):
// compared as it is, MySQL converted every run id instead and read the
// finished runs' whole status index range on each reconcile pass.
func (s *Store) childDoneSQL() string {
	return `SELECT w.run_id, w.step, w.workflow, w.kind, w.event_name, w.correlation, w.due_at, w.created_at FROM step_waits w` + s.d.useIndex("idx_step_waits_match") + `
		JOIN workflow_runs c` + s.d.ByPrimaryKey + ` ON c.id = ` + s.d.asID("w.correlation") + `
		WHERE w.event_name = ? AND c.status IN (?, ?, ?, ?) ORDER BY w.correlation, w.run_id, w.step LIMIT ?`
}

func (s *Store) childDoneArgs(limit int) []any {
	return []any{childWaitMarker, string(persistence.RunSucceeded), string(persistence.RunFailed),
		string(persistence.RunCancelled), string(persistence.RunCompensated), clampLimit(limit, 100, 10000)}
}

// StepListChildDone implements persistence.Store.
func (s *Store) StepListChildDone(ctx context.Context, limit int) ([]persistence.StepWait, error) {
	var rows []stepWaitRow
	if err := s.selectAll(ctx, s.db, &rows, s.childDoneSQL(), s.childDoneArgs(limit)...); err != nil {
		return nil, wrap("step list child done", err)
	}
	out := make([]persistence.StepWait, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// childrenSQL lists a run's child runs: one range of idx_runs_parent.
func (s *Store) childrenSQL() string {
	return `SELECT ` + runCols + ` FROM workflow_runs` + s.d.useIndex("idx_runs_parent") + `
		WHERE parent_run_id = ? ORDER BY parent_step, id`
}

// RunChildren implements persistence.Store.
func (s *Store) RunChildren(ctx context.Context, runID string) ([]persistence.Run, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	var rows []runRow
	if err := s.selectAll(ctx, s.db, &rows, s.childrenSQL(), runID); err != nil {
		return nil, wrap("run children", err)
	}
	out := make([]persistence.Run, 0, len(rows))
	for _, r := range rows {
		run, err := r.record()
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}

// waitersSQL finds the steps waiting for an event: one range of
// idx_step_waits_match (one per value, with aliases).
func (s *Store) waitersSQL(name string, values []string) (string, []any) {
	cond, args := s.correlationIn("correlation", values, name)
	return `SELECT ` + stepWaitCols + ` FROM step_waits` + s.d.useIndex("idx_step_waits_match") + `
		WHERE event_name = ? AND ` + cond + ` ORDER BY run_id, step`, args
}

// resolveWaiters completes, in the event's transaction (which holds the
// correlation's lock), every step parked waiting for ev, with the event's
// payload (output, when not nil) as their output; a wait whose step is no longer parked (its run was
// cancelled meanwhile) is deleted.
func (s *Store) resolveWaiters(ctx context.Context, q querier, ev persistence.Event, values []string, output []byte, now time.Time) ([]persistence.StepCompleteResult, error) {
	if output == nil {
		output = ev.Payload
	}
	var waits []stepWaitRow
	waiters, args := s.waitersSQL(ev.Name, values)
	if err := s.selectAll(ctx, q, &waits, waiters, args...); err != nil {
		return nil, err
	}
	var out []persistence.StepCompleteResult
	for len(waits) > 0 {
		n := min(len(waits), maxBatch)
		items := make([]persistence.StepCompleteParams, n)
		for i, w := range waits[:n] {
			items[i] = persistence.StepCompleteParams{RunID: w.RunID, Step: w.Step, Parked: true, Output: output, Now: now}
		}
		outs, err := s.completeIn(ctx, q, items, nil)
		if err != nil {
			return nil, err
		}
		var stale []stepKey
		for i, o := range outs {
			if o.Err != nil {
				stale = append(stale, stepKey{items[i].RunID, items[i].Step})
				continue
			}
			out = append(out, o.Result)
		}
		if len(stale) > 0 {
			if err := s.execLater(ctx, q, stmt{`DELETE FROM step_waits WHERE ` + s.keyIn(len(stale)), pairArgs(stale)}); err != nil {
				return nil, err
			}
		}
		waits = waits[n:]
	}
	return out, nil
}

// StepWaitGet implements persistence.Store.
func (s *Store) StepWaitGet(ctx context.Context, runID, step string) (persistence.StepWait, error) {
	if err := stepRef(runID, step); err != nil {
		return persistence.StepWait{}, err
	}
	var rows []stepWaitRow
	if err := s.selectAll(ctx, s.db, &rows, `SELECT `+stepWaitCols+` FROM step_waits WHERE run_id = ? AND step = ?`, runID, step); err != nil {
		return persistence.StepWait{}, wrap("step wait get", err)
	}
	if len(rows) == 0 {
		return persistence.StepWait{}, fmt.Errorf("%w: run %s step %q is not parked", persistence.ErrStepNotFound, runID, step)
	}
	return rows[0].record(), nil
}

// parkedDueQueries are StepListParkedDue's reads: the due range of
// idx_step_waits_due, soonest first, and the next due time after it.
func (s *Store) parkedDueQueries(p persistence.ListDueParams) []Query {
	before, limit := s.t(norm(p.Before)), clampLimit(p.Limit, 100, 10000)
	return []Query{
		{Name: "StepListParkedDue", SQL: `SELECT ` + stepWaitCols + ` FROM step_waits` + s.d.useIndex("idx_step_waits_due") + `
			WHERE due_at <= ? ORDER BY due_at, run_id, step LIMIT ?`, Args: []any{before, limit}},
		{Name: "StepListParkedDue/next", SQL: `SELECT MIN(due_at) FROM step_waits WHERE due_at > ?`, Args: []any{before}},
	}
}

// StepListParkedDue implements persistence.Store.
func (s *Store) StepListParkedDue(ctx context.Context, p persistence.ListDueParams) ([]persistence.StepWait, time.Time, error) {
	qs := s.parkedDueQueries(p)
	var rows []stepWaitRow
	if err := s.selectAll(ctx, s.db, &rows, qs[0].SQL, qs[0].Args...); err != nil {
		return nil, time.Time{}, wrap("step list parked due", err)
	}
	out := make([]persistence.StepWait, 0, len(rows))
	for _, r := range rows {
		if len(p.Workflows) > 0 && !slices.Contains(p.Workflows, r.Workflow) {
			continue
		}
		out = append(out, r.record())
	}
	var next nullTime
	err := s.db.QueryRowContext(ctx, s.d.rebind(qs[1].SQL), qs[1].Args...).Scan(&next)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, wrap("step list parked due", err)
	}
	return out, next.T, nil
}

// ParkedQueries returns the reads of parked steps at now, for tests to
// EXPLAIN.
func (s *Store) ParkedQueries(now time.Time) []Query {
	qs := s.parkedDueQueries(persistence.ListDueParams{Before: now})
	match, matchArgs := s.matchEventSQL("payment.captured", []string{"A-1"}, s.t(now))
	waiters, waitersArgs := s.waitersSQL("payment.captured", []string{"A-1"})
	return append(qs,
		Query{Name: "StepPark/match", SQL: match, Args: matchArgs},
		Query{Name: "EventCreate/waiters", SQL: waiters, Args: waitersArgs},
		Query{Name: "StepListChildDone", SQL: s.childDoneSQL(), Args: s.childDoneArgs(100)},
		Query{Name: "RunChildren", SQL: s.childrenSQL(), Args: []any{"run-00042"}},
	)
}

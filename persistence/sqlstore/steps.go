package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// StepList implements persistence.Store.
func (s *Store) StepList(ctx context.Context, runID string) ([]persistence.StepRun, error) {
	if err := runRef(runID); err != nil {
		return nil, err
	}
	steps, err := s.stepList(ctx, s.db, runID)
	if err == nil && len(steps) == 0 {
		var ok bool
		ok, err = s.exists(ctx, s.db, `SELECT 1 FROM workflow_runs WHERE id = ?`, runID)
		if err == nil && !ok {
			err = persistence.ErrRunNotFound
		}
	}
	return steps, wrap("step list", err)
}

func (s *Store) stepList(ctx context.Context, q querier, runID string) ([]persistence.StepRun, error) {
	var rows []stepRow
	if err := s.selectAll(ctx, q, &rows, `SELECT `+stepCols+` FROM step_runs WHERE run_id = ? ORDER BY seq`, runID); err != nil {
		return nil, err
	}
	return stepRecords(rows), nil
}

// StepGet implements persistence.Store.
func (s *Store) StepGet(ctx context.Context, runID, step string) (persistence.StepRun, error) {
	if err := stepRef(runID, step); err != nil {
		return persistence.StepRun{}, err
	}
	r, err := s.stepGet(ctx, s.db, runID, step, false)
	return r.record(), wrap("step get", err)
}

func (s *Store) stepGet(ctx context.Context, q querier, runID, step string, lock bool) (stepRow, error) {
	query := `SELECT ` + stepCols + ` FROM step_runs WHERE run_id = ? AND step = ?`
	if lock {
		query += s.d.ForUpdate
	}
	var rows []stepRow
	if err := s.selectAll(ctx, q, &rows, query, runID, step); err != nil {
		return stepRow{}, err
	}
	if len(rows) == 0 {
		return stepRow{}, fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, runID, step)
	}
	return rows[0], nil
}

// StepHeartbeat implements persistence.Store.
func (s *Store) StepHeartbeat(ctx context.Context, p persistence.StepHeartbeatParams) error {
	if err := stepRef(p.RunID, p.Step); err != nil {
		return err
	}
	if p.Fence == "" {
		return fmt.Errorf("%w: empty fence", persistence.ErrFenceMismatch)
	}
	now := norm(p.Now)
	n, err := s.exec1(ctx, `UPDATE step_runs SET lease_expires_at = ?, updated_at = ?
		WHERE run_id = ? AND step = ? AND fence = ? AND status IN (?, ?)`,
		s.t(norm(p.LeaseUntil)), s.t(now), p.RunID, p.Step, p.Fence,
		string(persistence.StepRunning), string(persistence.StepCompensating))
	if err != nil {
		return wrap("step heartbeat", err)
	}
	if n == 0 {
		return s.fenceError(ctx, p.RunID, p.Step)
	}
	return nil
}

func (s *Store) fenceError(ctx context.Context, runID, step string) error {
	ok, err := s.exists(ctx, s.db, `SELECT 1 FROM step_runs WHERE run_id = ? AND step = ?`, runID, step)
	if err != nil {
		return wrap("step", err)
	}
	if !ok {
		return fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, runID, step)
	}
	return fmt.Errorf("%w: run %s step %q", persistence.ErrFenceMismatch, runID, step)
}

// lockFenced reads and locks a step and checks that fence holds its
// current attempt (forward: running; compensation: compensating).
func (s *Store) lockFenced(ctx context.Context, q querier, runID, step, fence string, compensation bool) (stepRow, error) {
	row, err := s.stepGet(ctx, q, runID, step, true)
	if err != nil {
		return row, err
	}
	want := persistence.StepRunning
	if compensation {
		want = persistence.StepCompensating
	}
	if fence == "" || row.Fence != fence || row.Status != string(want) {
		return row, fmt.Errorf("%w: run %s step %q", persistence.ErrFenceMismatch, runID, step)
	}
	return row, nil
}

// lockParked reads and locks a step and checks that it is parked: the
// test a timeout makes before failing it (ErrFenceMismatch otherwise:
// an event, a signal or a cancellation came first).
func (s *Store) lockParked(ctx context.Context, q querier, runID, step string) (stepRow, error) {
	row, err := s.stepGet(ctx, q, runID, step, true)
	if err != nil {
		return row, err
	}
	if row.Status != string(persistence.StepParked) {
		return row, fmt.Errorf("%w: run %s step %q is %s, not parked", persistence.ErrFenceMismatch, runID, step, row.Status)
	}
	return row, nil
}

// StepComplete implements persistence.Store.
//
// Releasing dependents: the completed step's row is locked first, then its
// dependents' rows (SELECT ... FOR UPDATE, in primary-key order, so two
// completions never wait on each other in a cycle). The new pending
// counts are computed from the locked rows and written back, so of two
// siblings completing at once, the second waits for the first's commit,
// sees its decrement, and is the one that queues the join step. On SQLite
// write transactions are serialized, which gives the same guarantee.
func (s *Store) StepComplete(ctx context.Context, p persistence.StepCompleteParams) (persistence.StepCompleteResult, error) {
	if err := stepRef(p.RunID, p.Step); err != nil {
		return persistence.StepCompleteResult{}, err
	}
	if !p.Compensation {
		outs, err := s.StepCompleteMany(ctx, persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{p}})
		if err != nil {
			return persistence.StepCompleteResult{}, err
		}
		return outs[0].Result, wrap("step complete", outs[0].Err)
	}
	now := norm(p.Now)
	var res persistence.StepCompleteResult
	err := s.write(ctx, func(q querier) error {
		res = persistence.StepCompleteResult{}
		row, err := s.lockFenced(ctx, q, p.RunID, p.Step, p.Fence, true)
		if err != nil {
			return err
		}
		// The forward output stays: the compensation had it as input.
		row.Status = string(persistence.StepCompensated)
		row.Fence, row.LeaseExpiresAt, row.NextAttemptAt = "", nullTime{}, nullTime{}
		row.Error.String, row.Error.Valid = "", false
		row.FinishedAt = nullTime{T: now, Valid: true}
		row.UpdatedAt = dbTime{now}
		if _, err := s.exec(ctx, q, `UPDATE step_runs SET status = ?, error = NULL, fence = '',
			lease_expires_at = NULL, next_attempt_at = NULL, finished_at = ?, updated_at = ?
			WHERE run_id = ? AND step = ?`,
			row.Status, s.t(now), s.t(now), p.RunID, p.Step); err != nil {
			return err
		}
		if err := s.finishAttempt(ctx, q, p.RunID, p.Step, p.Fence, persistence.OutcomeSucceeded, "", now); err != nil {
			return err
		}
		res.Step = row.record()
		run, err := s.runGet(ctx, q, p.RunID, false)
		if err != nil {
			return err
		}
		res.RunStatus = run.Status
		return nil
	})
	return res, wrap("step complete", err)
}

// StepFail implements persistence.Store.
func (s *Store) StepFail(ctx context.Context, p persistence.StepFailParams) (persistence.StepRun, error) {
	if err := stepRef(p.RunID, p.Step); err != nil {
		return persistence.StepRun{}, err
	}
	now := norm(p.Now)
	msg := cleanText(p.Error)
	retryAt := normPtr(p.RetryAt)
	failRun := retryAt == nil && !p.Compensation && p.DeadRunStatus != ""
	if failRun && p.DeadRunStatus != persistence.RunCompensating && p.DeadRunStatus != persistence.RunFailed {
		return persistence.StepRun{}, invalid("dead run status", string(p.DeadRunStatus), "must be compensating or failed")
	}
	var out persistence.StepRun
	err := s.write(ctx, func(q querier) error {
		var run runLock
		if failRun {
			// Lock order: run, then step.
			var err error
			if run, err = s.lockRun(ctx, q, p.RunID); err != nil {
				if errors.Is(err, persistence.ErrRunNotFound) {
					return fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, p.RunID, p.Step)
				}
				return err
			}
		}
		row, err := s.lockFailing(ctx, q, p, now)
		if err != nil {
			return err
		}
		ended := attemptEnd(&row, persistence.OutcomeFailed, msg, now)
		failRow(&row, retryAt, p.Compensation, msg, now)
		if err := s.writeFailed(ctx, q, p, &row, ended, msg, now); err != nil {
			return err
		}
		out = row.record()
		if failRun && run.Status == string(persistence.RunRunning) {
			return s.failRun(ctx, q, p.RunID, p.DeadRunStatus, cleanText(p.DeadRunError), now)
		}
		return nil
	})
	return out, wrap("step fail", err)
}

// lockFailing reads and locks the step StepFail fails: a parked step
// (lockParked; with TimedOut, only while its wait is due at now), or
// else the attempt p.Fence holds (lockFenced).
func (s *Store) lockFailing(ctx context.Context, q querier, p persistence.StepFailParams, now time.Time) (stepRow, error) {
	if !p.Parked {
		return s.lockFenced(ctx, q, p.RunID, p.Step, p.Fence, p.Compensation)
	}
	row, err := s.lockParked(ctx, q, p.RunID, p.Step)
	if err == nil && p.TimedOut {
		// The step row's lock orders this after any park: the
		// wait row read is the current one.
		var due bool
		due, err = s.exists(ctx, q, `SELECT 1 FROM step_waits WHERE run_id = ? AND step = ? AND due_at <= ?`, p.RunID, p.Step, s.t(now))
		if err == nil && !due {
			err = fmt.Errorf("%w: run %s step %q: its wait is not due at %s (parked again with a later deadline)",
				persistence.ErrFenceMismatch, p.RunID, p.Step, now.Format(time.RFC3339Nano))
		}
	}
	return row, err
}

// failRow moves a locked row to where its failure at now leaves it:
// retrying (or compensating again) at retryAt, or else dead (or
// compensation_failed), with msg as its error.
func failRow(row *stepRow, retryAt *time.Time, compensation bool, msg string, now time.Time) {
	switch {
	case retryAt != nil && !compensation:
		row.Status = string(persistence.StepRetrying)
	case retryAt != nil:
		row.Status = string(persistence.StepCompensating)
	case !compensation:
		row.Status = string(persistence.StepDead)
	default:
		row.Status = string(persistence.StepCompensationFailed)
	}
	row.Fence, row.LeaseExpiresAt = "", nullTime{}
	row.NextAttemptAt = nullTime{}
	if retryAt != nil {
		row.NextAttemptAt = nullTime{T: *retryAt, Valid: true}
	} else {
		row.FinishedAt = nullTime{T: now, Valid: true}
	}
	row.Error.String, row.Error.Valid = msg, msg != ""
	row.UpdatedAt = dbTime{now}
}

// writeFailed writes what failRow did to a failed step: its row, the
// delete of its wait when it was parked, and the end of its attempt (a
// compensation's attempt row is updated; a forward attempt's, ended, is
// written).
func (s *Store) writeFailed(ctx context.Context, q querier, p persistence.StepFailParams, row *stepRow, ended endedAttempt, msg string, now time.Time) error {
	if _, err := s.exec(ctx, q, `UPDATE step_runs SET status = ?, fence = '', lease_expires_at = NULL,
		next_attempt_at = ?, error = ?, finished_at = ?, updated_at = ? WHERE run_id = ? AND step = ?`,
		row.Status, s.tp(row.NextAttemptAt.ptr()), nullString(msg), s.tp(row.FinishedAt.ptr()), s.t(now),
		p.RunID, p.Step); err != nil {
		return err
	}
	if p.Parked {
		if _, err := s.exec(ctx, q, `DELETE FROM step_waits WHERE run_id = ? AND step = ?`, p.RunID, p.Step); err != nil {
			return err
		}
	}
	if p.Compensation {
		return s.finishAttempt(ctx, q, p.RunID, p.Step, p.Fence, persistence.OutcomeFailed, msg, now)
	}
	return s.recordEnded(ctx, q, []endedAttempt{ended})
}

// StepTransition implements persistence.Store.
func (s *Store) StepTransition(ctx context.Context, p persistence.StepTransitionParams) ([]persistence.StepRun, error) {
	if err := runRef(p.RunID); err != nil {
		return nil, err
	}
	if named := len(p.Steps) > 0; named {
		if p.Steps = storableNames(p.Steps); len(p.Steps) == 0 {
			// Only names that cannot exist: nothing to move (an empty
			// list would mean every step).
			p.Steps = []string{"-"}
		}
	}
	if !p.To.Valid() {
		return nil, invalid("step status", string(p.To), "unknown")
	}
	for _, f := range p.From {
		if !f.Valid() {
			return nil, invalid("step status", string(f), "unknown")
		}
	}
	if len(p.From) == 0 {
		return nil, invalid("step status", "", "From must name at least one status")
	}
	now := norm(p.Now)
	var out []persistence.StepRun
	err := s.write(ctx, func(q querier) error {
		var err error
		out, err = s.stepsTransition(ctx, q, p.RunID, p.Steps, p.From, p.To, cleanText(p.Error), now)
		if err == nil && len(out) == 0 {
			ok, err := s.exists(ctx, q, `SELECT 1 FROM workflow_runs WHERE id = ?`, p.RunID)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: %s", persistence.ErrRunNotFound, p.RunID)
			}
		}
		return err
	})
	return out, wrap("step transition", err)
}

// finishedStep reports the step statuses that end a step's life (for
// finished_at).
func finishedStep(st persistence.StepStatus) bool {
	switch st {
	case persistence.StepSucceeded, persistence.StepDead, persistence.StepSkipped, persistence.StepCompensated,
		persistence.StepCompensationFailed, persistence.StepCancelled:
		return true
	}
	return false
}

func (s *Store) stepsTransition(ctx context.Context, q querier, runID string, steps []string, from []persistence.StepStatus, to persistence.StepStatus, msg string, now time.Time) ([]persistence.StepRun, error) {
	query := `SELECT ` + stepCols + ` FROM step_runs WHERE run_id = ? AND status IN (` + in(len(from)) + `)`
	args := []any{runID}
	for _, f := range from {
		args = append(args, string(f))
	}
	if len(steps) > 0 {
		query += ` AND step IN (` + in(len(steps)) + `)`
		args = append(args, anys(steps)...)
	}
	var rows []stepRow
	if err := s.selectAll(ctx, q, &rows, query+` ORDER BY seq`+s.d.ForUpdate, args...); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	// The attempts the rows hold get their own rows before the rows move
	// on (and forget them: claimed_at is cleared below).
	if err := s.recordHeld(ctx, q, runID, rows); err != nil {
		return nil, err
	}
	out, aborted := transitionRows(rows, to, msg, now)
	names := make([]any, len(rows))
	for i, r := range rows {
		names[i] = r.Step
	}
	r0 := out[0]
	// Every changed row gets the same values, so one UPDATE does.
	set := `status = ?, fence = '', lease_expires_at = NULL, next_attempt_at = NULL, queued_at = ?, finished_at = ?, updated_at = ?`
	uargs := []any{string(to), s.tp(r0.QueuedAt), s.tp(r0.FinishedAt), s.t(now)}
	if to == persistence.StepQueued {
		set += `, attempt = 0`
	} else if to != persistence.StepCompensating {
		// queued_at keeps its value
		set = `status = ?, fence = '', lease_expires_at = NULL, next_attempt_at = NULL, queued_at = queued_at, finished_at = ?, updated_at = ?`
		uargs = []any{string(to), s.tp(r0.FinishedAt), s.t(now)}
	}
	set += `, claimed_at = NULL` // the rows hold no attempt from now on (recordHeld)
	if msg != "" {
		set += `, error = ?`
		uargs = append(uargs, msg)
	}
	uargs = append(uargs, runID)
	uargs = append(uargs, names...)
	if _, err := s.exec(ctx, q, `UPDATE step_runs SET `+set+` WHERE run_id = ? AND step IN (`+in(len(names))+`)`,
		uargs...); err != nil {
		return nil, err
	}
	if err := s.recordEnded(ctx, q, aborted); err != nil {
		return nil, err
	}
	return out, nil
}

// transitionRows moves rows to status to at now (with msg as their error,
// if any) and returns them as records, with the forward attempts in
// progress that the move leaves in the history as they were: running,
// never finished.
func transitionRows(rows []stepRow, to persistence.StepStatus, msg string, now time.Time) ([]persistence.StepRun, []endedAttempt) {
	out := make([]persistence.StepRun, len(rows))
	var aborted []endedAttempt
	for i, r := range rows {
		if r.Status == string(persistence.StepRunning) {
			e := attemptEnd(&r, persistence.OutcomeRunning, "", now)
			e.finished = nil
			aborted = append(aborted, e)
		}
		r.Status = string(to)
		r.Fence, r.LeaseExpiresAt, r.NextAttemptAt = "", nullTime{}, nullTime{}
		r.UpdatedAt = dbTime{now}
		if msg != "" {
			r.Error.String, r.Error.Valid = msg, true
		}
		switch {
		case to == persistence.StepQueued:
			r.Attempt = 0
			r.QueuedAt = nullTime{T: now, Valid: true}
			r.FinishedAt = nullTime{}
		case to == persistence.StepCompensating:
			// Waits for a compensation claim from now on.
			r.QueuedAt = nullTime{T: now, Valid: true}
			r.FinishedAt = nullTime{}
		case finishedStep(to):
			r.FinishedAt = nullTime{T: now, Valid: true}
		}
		out[i] = r.record()
	}
	return out, aborted
}

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// runLock is the part of a run a transaction reads while holding its lock.
type runLock struct {
	Status string `db:"status"`
}

// lockRun locks a run's row (FOR UPDATE) and returns its status.
func (s *Store) lockRun(ctx context.Context, q querier, runID string) (runLock, error) {
	var r runLock
	err := q.QueryRowContext(ctx, s.d.rebind(`SELECT status FROM workflow_runs WHERE id = ?`+s.d.ForUpdate), runID).Scan(&r.Status)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: %s", persistence.ErrRunNotFound, runID)
	}
	return r, err
}

// failRun moves a running run to status (compensating or failed) with
// msg, cancelling its pending steps, as StepFail's DeadRunStatus asks.
func (s *Store) failRun(ctx context.Context, q querier, runID string, status persistence.RunStatus, msg string, now time.Time) error {
	var finished any
	if status.Terminal() {
		finished = s.t(now)
	}
	if _, err := s.exec(ctx, q, `UPDATE workflow_runs SET status = ?, error = ?, finished_at = ?, updated_at = ?
		WHERE id = ? AND status = ?`,
		string(status), nullString(msg), finished, s.t(now), runID, string(persistence.RunRunning)); err != nil {
		return err
	}
	if _, err := s.stepsTransition(ctx, q, runID, nil,
		persistence.CancellableSteps,
		persistence.StepCancelled, "", now); err != nil {
		return err
	}
	return s.dropWaits(ctx, q, runID)
}

// dropWaits deletes the waits of a run whose parked steps were cancelled
// (one range of the primary key).
func (s *Store) dropWaits(ctx context.Context, q querier, runID string) error {
	_, err := s.exec(ctx, q, `DELETE FROM step_waits WHERE run_id = ?`, runID)
	return err
}

// reopenable checks that every step to retry exists and is dead, and
// returns them as a set.
func reopenable(p persistence.RunReopenParams, rows []stepRow) (map[string]bool, error) {
	status := make(map[string]string, len(rows))
	for _, r := range rows {
		status[r.Step] = r.Status
	}
	retry := make(map[string]bool, len(p.Steps))
	for _, name := range p.Steps {
		st, ok := status[name]
		if !ok {
			return nil, fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, p.RunID, name)
		}
		if st != string(persistence.StepDead) {
			return nil, &persistence.TransitionError{RunID: p.RunID, Step: name, From: st, To: string(persistence.StepQueued)}
		}
		retry[name] = true
	}
	return retry, nil
}

// reopenSteps moves the dead steps to retry back to queued, with a fresh
// attempt budget, and every cancelled step back to waiting (queued when
// its dependencies are done), and returns the queued ones.
func (s *Store) reopenSteps(ctx context.Context, q querier, p persistence.RunReopenParams, rows []stepRow, retry map[string]bool, now time.Time) ([]persistence.StepRun, error) {
	byName := make(map[string]*stepRow, len(rows))
	for i := range rows {
		byName[rows[i].Step] = &rows[i]
	}
	var out []persistence.StepRun
	var queued []any
	for i := range rows {
		r := &rows[i]
		switch {
		case retry[r.Step]:
			r.Attempt = 0
		case r.Status == string(persistence.StepCancelled):
			r.PendingDeps = 0
			for _, dep := range splitNames(r.Deps) {
				if d := byName[dep]; d == nil || !persistence.StepStatus(d.Status).Done() {
					r.PendingDeps++
				}
			}
		default:
			continue
		}
		r.Fence, r.LeaseExpiresAt, r.NextAttemptAt, r.FinishedAt = "", nullTime{}, nullTime{}, nullTime{}
		r.UpdatedAt = dbTime{now}
		if r.PendingDeps == 0 || retry[r.Step] {
			r.Status = string(persistence.StepQueued)
			r.QueuedAt = nullTime{T: now, Valid: true}
			queued = append(queued, r.Step)
			out = append(out, r.record())
			continue
		}
		r.Status = string(persistence.StepWaiting)
		if _, err := s.exec(ctx, q, `UPDATE step_runs SET status = ?, pending_deps = ?, fence = '',
			lease_expires_at = NULL, next_attempt_at = NULL, finished_at = NULL, updated_at = ?
			WHERE run_id = ? AND step = ?`,
			r.Status, r.PendingDeps, s.t(now), p.RunID, r.Step); err != nil {
			return nil, err
		}
	}
	if len(queued) > 0 {
		args := append([]any{string(persistence.StepQueued), s.t(now), s.t(now), p.RunID}, queued...)
		if _, err := s.exec(ctx, q, `UPDATE step_runs SET status = ?, pending_deps = 0, fence = '',
			lease_expires_at = NULL, next_attempt_at = NULL, finished_at = NULL, queued_at = ?, updated_at = ?
			WHERE run_id = ? AND step IN (`+in(len(queued))+`)`, args...); err != nil {
			return nil, err
		}
	}
	if len(p.Steps) > 0 {
		// Retried steps start their attempt budget again; the attempt
		// column is reset only for them.
		if _, err := s.exec(ctx, q, `UPDATE step_runs SET attempt = 0 WHERE run_id = ? AND step IN (`+in(len(p.Steps))+`)`,
			append([]any{p.RunID}, anys(p.Steps)...)...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RunReopen implements persistence.Store. The pending counters of the
// cancelled steps are recomputed from their dependencies' statuses, since
// steps that finished after the cancellation did not count down
// cancelled dependents.
func (s *Store) RunReopen(ctx context.Context, p persistence.RunReopenParams) ([]persistence.StepRun, error) {
	if err := runRef(p.RunID); err != nil {
		return nil, err
	}
	for _, n := range p.Steps {
		if err := stepRef(p.RunID, n); err != nil {
			return nil, err
		}
	}
	now := norm(p.Now)
	var out []persistence.StepRun
	err := s.write(ctx, func(q querier) error {
		out = nil
		run, err := s.lockRun(ctx, q, p.RunID)
		if err != nil {
			return err
		}
		if run.Status != string(persistence.RunFailed) {
			return &persistence.TransitionError{RunID: p.RunID, From: run.Status, To: string(persistence.RunRunning)}
		}
		var rows []stepRow
		if err := s.selectAll(ctx, q, &rows, `SELECT `+stepCols+` FROM step_runs WHERE run_id = ? ORDER BY seq`+s.d.ForUpdate, p.RunID); err != nil {
			return err
		}
		retry, err := reopenable(p, rows)
		if err != nil {
			return err
		}
		if _, err := s.exec(ctx, q, `UPDATE workflow_runs SET status = ?, error = NULL, finished_at = NULL, updated_at = ? WHERE id = ?`,
			string(persistence.RunRunning), s.t(now), p.RunID); err != nil {
			return err
		}
		out, err = s.reopenSteps(ctx, q, p, rows, retry, now)
		return err
	})
	return out, wrap("run reopen", err)
}

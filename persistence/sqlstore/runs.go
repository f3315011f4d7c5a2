package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// RunGet implements persistence.Store.
func (s *Store) RunGet(ctx context.Context, id string) (persistence.Run, error) {
	if err := runRef(id); err != nil {
		return persistence.Run{}, err
	}
	r, err := s.runGet(ctx, s.db, id, false)
	return r, wrap("run get", err)
}

func (s *Store) runGet(ctx context.Context, q querier, id string, lock bool) (persistence.Run, error) {
	query := `SELECT ` + runCols + ` FROM workflow_runs WHERE id = ?`
	if lock {
		query += s.d.ForUpdate
	}
	var rows []runRow
	if err := s.selectAll(ctx, q, &rows, query, id); err != nil {
		return persistence.Run{}, err
	}
	if len(rows) == 0 {
		return persistence.Run{}, persistence.ErrRunNotFound
	}
	return rows[0].record()
}

// RunList implements persistence.Store.
func (s *Store) RunList(ctx context.Context, p persistence.RunListParams) (persistence.RunPage, error) {
	qq, limit, err := s.runListQuery(p)
	if err != nil {
		return persistence.RunPage{}, err
	}
	var rows []runRow
	if err := s.selectAll(ctx, s.db, &rows, qq.SQL, qq.Args...); err != nil {
		return persistence.RunPage{}, wrap("run list", err)
	}
	var page persistence.RunPage
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = encodeCursor(last.CreatedAt.T, last.ID)
	}
	for _, r := range rows {
		run, err := r.record()
		if err != nil {
			return persistence.RunPage{}, err
		}
		page.Runs = append(page.Runs, run)
	}
	return page, nil
}

// RunTransition implements persistence.Store.
func (s *Store) RunTransition(ctx context.Context, p persistence.RunTransitionParams) (persistence.RunTransitionResult, error) {
	if err := runRef(p.RunID); err != nil {
		return persistence.RunTransitionResult{}, err
	}
	if !p.To.Valid() {
		return persistence.RunTransitionResult{}, invalid("run status", string(p.To), "unknown")
	}
	for _, f := range p.From {
		if !f.Valid() {
			return persistence.RunTransitionResult{}, invalid("run status", string(f), "unknown")
		}
	}
	if err := s.validJSON("run output", p.Output); err != nil {
		return persistence.RunTransitionResult{}, err
	}
	now := norm(p.Now)
	var res persistence.RunTransitionResult
	err := s.write(ctx, func(q querier) error {
		res = persistence.RunTransitionResult{}
		run, err := s.runGet(ctx, q, p.RunID, true)
		if err != nil {
			return err
		}
		undo := p.Undo && run.Status == persistence.RunSucceeded && p.To == persistence.RunCompensating
		if run.Status.Terminal() && !undo {
			return fmt.Errorf("%w: run %s is %s", persistence.ErrRunFinished, run.ID, run.Status)
		}
		if len(p.From) > 0 && !slices.Contains(p.From, run.Status) {
			return &persistence.TransitionError{RunID: run.ID, From: string(run.Status), To: string(p.To)}
		}
		run.Status = p.To
		run.UpdatedAt = now
		if p.To == persistence.RunSucceeded {
			run.Output = nonEmpty(p.Output)
		}
		if p.Error != "" {
			run.Error = cleanText(p.Error)
		}
		if p.To == persistence.RunRunning && run.StartedAt == nil {
			run.StartedAt = &now
		}
		if p.To.Terminal() {
			run.FinishedAt = &now
		} else if undo {
			run.FinishedAt = nil
		}
		if _, err := s.exec(ctx, q, `UPDATE workflow_runs SET status = ?, output = ?, error = ?, started_at = ?,
			finished_at = ?, updated_at = ? WHERE id = ?`,
			string(run.Status), nullBytes(run.Output), nullString(run.Error), s.tp(run.StartedAt),
			s.tp(run.FinishedAt), s.t(now), run.ID); err != nil {
			return err
		}
		res.Run = run
		if p.CancelPendingSteps {
			if res.Cancelled, err = s.stepsTransition(ctx, q, run.ID, nil,
				persistence.CancellableSteps,
				persistence.StepCancelled, "", now); err != nil {
				return err
			}
			return s.dropWaits(ctx, q, run.ID)
		}
		return nil
	})
	return res, wrap("run transition", err)
}

// RunStart implements persistence.Store.
func (s *Store) RunStart(ctx context.Context, p persistence.RunStartParams) ([]persistence.StepRun, error) {
	if err := runRef(p.RunID); err != nil {
		return nil, err
	}
	now := norm(p.Now)
	var out []persistence.StepRun
	err := s.write(ctx, func(q querier) error {
		out = nil
		run, err := s.runGet(ctx, q, p.RunID, true)
		if err != nil {
			return err
		}
		if run.Status != persistence.RunPending || run.StartAt.After(now) {
			return nil
		}
		if _, err := s.exec(ctx, q, `UPDATE workflow_runs SET status = ?, started_at = ?, updated_at = ? WHERE id = ?`,
			string(persistence.RunRunning), s.t(now), s.t(now), run.ID); err != nil {
			return err
		}
		var rows []stepRow
		if err := s.selectAll(ctx, q, &rows, `SELECT `+stepCols+` FROM step_runs
			WHERE run_id = ? AND status = ? AND pending_deps = 0 ORDER BY seq`+s.d.ForUpdate,
			run.ID, string(persistence.StepWaiting)); err != nil {
			return err
		}
		out, err = s.queueSteps(ctx, q, run.ID, rows, now)
		return err
	})
	return out, wrap("run start", err)
}

// queueSteps moves locked waiting rows to queued.
func (s *Store) queueSteps(ctx context.Context, q querier, runID string, rows []stepRow, now time.Time) ([]persistence.StepRun, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	names := make([]any, len(rows))
	out := make([]persistence.StepRun, len(rows))
	for i, r := range rows {
		names[i] = r.Step
		r.Status = string(persistence.StepQueued)
		r.PendingDeps = 0
		r.QueuedAt = nullTime{T: now, Valid: true}
		r.UpdatedAt = dbTime{now}
		out[i] = r.record()
	}
	args := append([]any{string(persistence.StepQueued), s.t(now), s.t(now), runID}, names...)
	args = append(args, string(persistence.StepWaiting))
	_, err := s.exec(ctx, q, `UPDATE step_runs SET status = ?, pending_deps = 0, queued_at = ?, updated_at = ?
		WHERE run_id = ? AND step IN (`+in(len(names))+`) AND status = ?`, args...)
	return out, err
}

// RunListDue implements persistence.Store: the due pending runs, by
// (start_at, id), of every workflow or of p.Workflows (one query each,
// merged; runListDueQueries).
func (s *Store) RunListDue(ctx context.Context, p persistence.ListDueParams) ([]persistence.Run, error) {
	p, err := dueWorkflows(p)
	if err != nil {
		return nil, err
	}
	var rows []runRow
	for _, qq := range s.runListDueQueries(p) {
		var part []runRow
		if err := s.selectAll(ctx, s.db, &part, qq.SQL, qq.Args...); err != nil {
			return nil, wrap("run list due", err)
		}
		rows = append(rows, part...)
	}
	slices.SortStableFunc(rows, func(a, b runRow) int {
		if c := a.StartAt.T.Compare(b.StartAt.T); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	rows = rows[:min(len(rows), clampLimit(p.Limit, 100, 10000))]
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

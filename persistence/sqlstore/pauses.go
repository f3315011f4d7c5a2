package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dagflow/dagflow/persistence"
)

// Pausing runs and queues: a run's paused_at (read with its row by every
// claim, see forwardRefusal) and the queue_pauses table, which the engine
// mirrors into Redis.

// RunSetPaused implements persistence.Store.
func (s *Store) RunSetPaused(ctx context.Context, p persistence.RunSetPausedParams) (persistence.RunSetPausedResult, error) {
	if err := runRef(p.RunID); err != nil {
		return persistence.RunSetPausedResult{}, err
	}
	now := norm(p.Now)
	var res persistence.RunSetPausedResult
	err := s.write(ctx, func(q querier) error {
		res = persistence.RunSetPausedResult{}
		run, err := s.runGet(ctx, q, p.RunID, true)
		if err != nil {
			if errors.Is(err, persistence.ErrRunNotFound) {
				return fmt.Errorf("%w: %s", persistence.ErrRunNotFound, p.RunID)
			}
			return err
		}
		if run.Status.Terminal() {
			return fmt.Errorf("%w: run %s is %s", persistence.ErrRunFinished, run.ID, run.Status)
		}
		if p.Paused != (run.PausedAt != nil) {
			var at any
			run.PausedAt = nil
			if p.Paused {
				at, run.PausedAt = s.t(now), &now
			}
			if _, err := s.exec(ctx, q, `UPDATE workflow_runs SET paused_at = ?, updated_at = ? WHERE id = ?`,
				at, s.t(now), run.ID); err != nil {
				return err
			}
			run.UpdatedAt = now
			res.Changed = true
		}
		res.Run = run
		res.Steps, err = s.stepList(ctx, q, run.ID)
		return err
	})
	return res, wrap("run pause", err)
}

// QueueSetPaused implements persistence.Store.
func (s *Store) QueueSetPaused(ctx context.Context, p persistence.QueueSetPausedParams) (bool, error) {
	if err := validName("queue name", p.Queue); err != nil {
		return false, err
	}
	var n int64
	err := s.write(ctx, func(q querier) error {
		var err error
		n = 0 // a retried transaction starts over
		if p.Paused {
			// Read first: MySQL counts a duplicate's no-op update as an
			// affected row, and TiDB's insert id cannot tell a repeat.
			var one int
			err = q.QueryRowContext(ctx, s.d.rebind(`SELECT 1 FROM queue_pauses WHERE queue = ?`+s.d.ForUpdate), p.Queue).Scan(&one)
			if err == nil {
				return nil // paused already
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			n, err = s.exec(ctx, q, `INSERT INTO queue_pauses (queue, paused_at) VALUES (?, ?)`+s.d.InsertIgnore([]string{"queue"}),
				p.Queue, s.t(norm(p.Now)))
		} else {
			n, err = s.exec(ctx, q, `DELETE FROM queue_pauses WHERE queue = ?`, p.Queue)
		}
		return err
	})
	if err != nil {
		return false, wrap("queue pause", err)
	}
	return n > 0, nil
}

// QueueListPaused implements persistence.Store.
func (s *Store) QueueListPaused(ctx context.Context) ([]persistence.QueuePause, error) {
	var rows []struct {
		Queue    string `db:"queue"`
		PausedAt dbTime `db:"paused_at"`
	}
	if err := s.selectAll(ctx, s.db, &rows, s.queueListPausedQuery().SQL); err != nil {
		return nil, wrap("queue list paused", err)
	}
	out := make([]persistence.QueuePause, len(rows))
	for i, r := range rows {
		out[i] = persistence.QueuePause{Queue: r.Queue, PausedAt: r.PausedAt.T}
	}
	return out, nil
}

// queueListPausedQuery reads queue_pauses by its primary key, in order:
// a handful of rows at most.
func (s *Store) queueListPausedQuery() Query {
	return Query{Name: "QueueListPaused", SQL: `SELECT queue, paused_at FROM queue_pauses` + s.d.ByPrimaryKey + ` ORDER BY queue`}
}

// PauseQueries are the queries of pausing that read more than one row by
// key, for the EXPLAIN tests.
func (s *Store) PauseQueries() []Query {
	return []Query{s.queueListPausedQuery()}
}

package sqlstore

import (
	"context"
	"slices"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// The listings of steps due for work (queued, retries due, expired
// leases) and of dead steps. Their queries are in queries.go.

// mergeSteps runs the queries qs and returns their rows in key order, up
// to limit.
func (s *Store) mergeSteps(ctx context.Context, qs []Query, limit int, key func(stepRow) time.Time) ([]persistence.StepRun, error) {
	var all []stepRow
	for _, qq := range qs {
		var rows []stepRow
		if err := s.selectAll(ctx, s.db, &rows, qq.SQL, qq.Args...); err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	slices.SortStableFunc(all, func(a, b stepRow) int { return key(a).Compare(key(b)) })
	if len(all) > limit {
		all = all[:limit]
	}
	return stepRecords(all), nil
}

// StepListQueued implements persistence.Store.
func (s *Store) StepListQueued(ctx context.Context, p persistence.ListDueParams) ([]persistence.StepRun, error) {
	p, ok, err := s.dueStepScope(ctx, p, "StepListQueued", persistence.StepQueued, persistence.StepCompensating)
	if err != nil {
		return nil, wrap("step list queued", err)
	}
	if !ok {
		return []persistence.StepRun{}, nil
	}
	out, err := s.mergeSteps(ctx, s.stepListQueuedQueries(p), clampLimit(p.Limit, 100, 10000),
		func(r stepRow) time.Time { return r.QueuedAt.T })
	return out, wrap("step list queued", err)
}

// StepListRetryDue implements persistence.Store.
func (s *Store) StepListRetryDue(ctx context.Context, p persistence.ListDueParams) ([]persistence.StepRun, error) {
	p, ok, err := s.dueStepScope(ctx, p, "StepListRetryDue", persistence.StepRetrying, persistence.StepCompensating)
	if err != nil {
		return nil, wrap("step list retry due", err)
	}
	if !ok {
		return []persistence.StepRun{}, nil
	}
	out, err := s.mergeSteps(ctx, s.stepListRetryDueQueries(p), clampLimit(p.Limit, 100, 10000),
		func(r stepRow) time.Time { return r.NextAttemptAt.T })
	return out, wrap("step list retry due", err)
}

// StepListLeaseExpired implements persistence.Store.
func (s *Store) StepListLeaseExpired(ctx context.Context, p persistence.ListDueParams) ([]persistence.StepRun, error) {
	p, ok, err := s.dueStepScope(ctx, p, "StepListLeaseExpired", persistence.StepRunning, persistence.StepCompensating)
	if err != nil {
		return nil, wrap("step list lease expired", err)
	}
	if !ok {
		return []persistence.StepRun{}, nil
	}
	out, err := s.mergeSteps(ctx, s.stepListLeaseExpiredQueries(p), clampLimit(p.Limit, 100, 10000),
		func(r stepRow) time.Time { return r.LeaseExpiresAt.T })
	return out, wrap("step list lease expired", err)
}

// StepListDead implements persistence.Store.
func (s *Store) StepListDead(ctx context.Context, p persistence.StepListDeadParams) (persistence.StepPage, error) {
	query, args, limit, err := s.stepListDeadQuery(p)
	if err != nil {
		return persistence.StepPage{}, err
	}
	var rows []stepRow
	if err := s.selectAll(ctx, s.db, &rows, query, args...); err != nil {
		return persistence.StepPage{}, wrap("step list dead", err)
	}
	var page persistence.StepPage
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = encodeCursor(last.FinishedAt.T, last.RunID, last.Step)
	}
	page.Steps = stepRecords(rows)
	return page, nil
}

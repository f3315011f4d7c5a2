package sqlstore

import (
	"context"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Change detection for dashboards (MySQL migration 00009, SQLite 00008):
// idx_steps_updated (updated_at, run_id) covers both queries.

const (
	defaultChangeLimit = 1000
	maxChangeLimit     = 10000
)

// StepListChanged implements persistence.ChangeFeed: one range of
// idx_steps_updated, read from the index alone.
func (s *Store) StepListChanged(ctx context.Context, p persistence.StepListChangedParams) (persistence.StepChanges, error) {
	out := persistence.StepChanges{Latest: p.After}
	if p.After.IsZero() {
		var t dbTime
		err := s.db.QueryRowContext(ctx, s.changedLatestSQL()).Scan(&t)
		if err != nil {
			return out, wrap("step list changed", err)
		}
		out.Latest = t.T
		return out, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = defaultChangeLimit
	}
	limit = min(limit, maxChangeLimit)
	rows, err := s.db.QueryContext(ctx, s.changedSQL(), s.t(norm(p.After)), limit+1)
	if err != nil {
		return out, wrap("step list changed", err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	n := 0
	for rows.Next() {
		var t dbTime
		var id string
		if err := rows.Scan(&t, &id); err != nil {
			return out, wrap("step list changed", err)
		}
		if n++; n > limit {
			out.More = true
			break
		}
		if t.T.After(out.Latest) {
			out.Latest = t.T
		}
		if !seen[id] {
			seen[id] = true
			out.RunIDs = append(out.RunIDs, id)
		}
	}
	return out, wrap("step list changed", rows.Err())
}

func (s *Store) changedLatestSQL() string {
	return `SELECT COALESCE(MAX(updated_at), '1970-01-01 00:00:00.000000') FROM step_runs`
}

func (s *Store) changedSQL() string {
	return `SELECT updated_at, run_id FROM step_runs` + s.d.useIndex("idx_steps_updated") +
		` WHERE updated_at > ? ORDER BY updated_at LIMIT ?`
}

// ChangeQueries returns StepListChanged's queries, for tests to EXPLAIN.
// after is the change the listing starts after.
func (s *Store) ChangeQueries(after time.Time) []Query {
	return []Query{
		{Name: "StepListChanged/latest", SQL: s.changedLatestSQL()},
		{Name: "StepListChanged", SQL: s.changedSQL(), Args: []any{s.t(norm(after)), defaultChangeLimit + 1}},
	}
}

var _ persistence.ChangeFeed = (*Store)(nil)

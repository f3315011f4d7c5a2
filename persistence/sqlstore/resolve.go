package sqlstore

import (
	"context"

	"github.com/dagflow/dagflow/persistence"
)

// RunResolve implements persistence.Store: one range of the primary key,
// [prefix, the prefix with its last byte one higher), in key order. Run
// ids are ASCII and compared bytewise (ascii_bin on MySQL, BINARY on
// SQLite), so that range holds exactly the ids that start with prefix;
// LIKE 'prefix%' would mean the same, but whether a planner seeks on it
// depends on the collation and on its settings.
func (s *Store) RunResolve(ctx context.Context, prefix string, limit int) ([]string, error) {
	p, err := persistence.RunIDPrefix(prefix)
	if err != nil {
		return nil, err
	}
	q := s.resolveQuery(p, clampLimit(limit, 10, 100))
	ids, err := s.selectIDs(ctx, q)
	if err != nil {
		return nil, wrap("run resolve", err)
	}
	return ids, nil
}

func (s *Store) selectIDs(ctx context.Context, q Query) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q.SQL), q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func (s *Store) resolveQuery(prefix string, limit int) Query {
	end := prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
	return Query{Name: "RunResolve", SQL: `SELECT id FROM workflow_runs WHERE id >= ? AND id < ? ORDER BY id LIMIT ?`,
		Args: []any{prefix, end, limit}}
}

// ResolveQueries returns RunResolve's read of prefix (a normalised
// prefix), for tests to EXPLAIN.
func (s *Store) ResolveQueries(prefix string) []Query {
	return []Query{s.resolveQuery(prefix, 11)}
}

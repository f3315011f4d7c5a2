package sqlstore

import (
	"slices"
	"strings"
)

// Naming rows by key: a batch names its steps by (run id, step) pairs.

// maxBatch bounds the items of one batch call (placeholders stay well
// under MySQL's 65,535).
const maxBatch = 512

// pairWhere returns "((run_id = ? AND step = ?) OR ...)" for n pairs.
func pairWhere(n int) string {
	var b strings.Builder
	b.WriteString("(")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(run_id = ? AND step = ?)")
	}
	b.WriteString(")")
	return b.String()
}

// keyIn returns a condition on n (run_id, step) pairs, for pairArgs.
// One pair is always written as "run_id = ? AND step = ?": MariaDB
// plans an UPDATE whose WHERE is an IN of a single row value as a scan
// of the whole primary key (for two or more it reads their ranges), so
// a claim of one step on a table of a million runs took seconds.
func (s *Store) keyIn(n int) string {
	if !s.d.RowValueIn || n == 1 {
		return pairWhere(n)
	}
	var b strings.Builder
	b.Grow(20 + 8*n)
	b.WriteString("(run_id, step) IN (")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?)")
	}
	b.WriteString(")")
	return b.String()
}

type stepKey struct{ run, step string }

func pairArgs(keys []stepKey) []any {
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k.run, k.step)
	}
	return args
}

func sortKeys(keys []stepKey) {
	slices.SortFunc(keys, func(a, b stepKey) int {
		if c := strings.Compare(a.run, b.run); c != 0 {
			return c
		}
		return strings.Compare(a.step, b.step)
	})
}

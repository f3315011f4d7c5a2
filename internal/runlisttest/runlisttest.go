// Package runlisttest holds what the MySQL and SQLite RunList seek tests
// share: the runs a listing must return, found without the store's query,
// the index each filter must read, and the time of a page.
package runlisttest

import (
	"context"
	"database/sql"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlstore"
)

// Run is a run's RunList key.
type Run struct {
	At time.Time
	ID string
}

// Matching returns the keys of the runs that p's filters select, newest
// first, read with a plain query (d encodes the time arguments).
func Matching(t testing.TB, db *sql.DB, d sqlstore.Dialect, p persistence.RunListParams) []Run {
	t.Helper()
	where := []string{"1 = 1"}
	var args []any
	if p.Workflow != "" {
		where, args = append(where, "workflow = ?"), append(args, p.Workflow)
	}
	if p.Schedule != "" {
		where, args = append(where, "schedule = ?"), append(args, p.Schedule)
	}
	if p.IdempotencyKey != "" {
		where, args = append(where, "idempotency_key = ?"), append(args, p.IdempotencyKey)
	}
	if len(p.Status) > 0 {
		where = append(where, "status IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(p.Status)), ", ")+")")
		for _, st := range p.Status {
			args = append(args, string(st))
		}
	}
	if !p.CreatedAfter.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, d.Time(p.CreatedAfter.UTC()))
	}
	if !p.CreatedBefore.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, d.Time(p.CreatedBefore.UTC()))
	}
	rows, err := db.Query("SELECT created_at, id FROM workflow_runs WHERE "+strings.Join(where, " AND "), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var at any
		var r Run
		if err := rows.Scan(&at, &r.ID); err != nil {
			t.Fatal(err)
		}
		r.At = asTime(t, at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := out[i].At.Compare(out[j].At); c != 0 {
			return c > 0
		}
		return out[i].ID > out[j].ID
	})
	return out
}

// asTime reads a created_at as the drivers return it: a time (MySQL with
// parseTime) or text in sqlstore.TimeLayout (SQLite).
func asTime(t testing.TB, v any) time.Time {
	t.Helper()
	switch v := v.(type) {
	case time.Time:
		return v
	case string:
		return parseTime(t, v)
	case []byte:
		return parseTime(t, string(v))
	}
	t.Fatalf("created_at of type %T", v)
	return time.Time{}
}

func parseTime(t testing.TB, s string) time.Time {
	t.Helper()
	at, err := time.Parse(sqlstore.TimeLayout, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// ExpectedIndex is the index a RunList filter must read.
func ExpectedIndex(p persistence.RunListParams) string {
	switch {
	case p.IdempotencyKey != "":
		return "idx_runs_idempotency_created"
	case p.Schedule != "":
		return "idx_runs_schedule_created"
	case p.Workflow != "" && len(p.Status) > 0:
		return "idx_runs_wf_status_created"
	case p.Workflow != "":
		return "idx_runs_wf_created"
	case len(p.Status) > 0:
		return "idx_runs_status_created"
	}
	return "idx_runs_created"
}

// PageTime returns the median time of five RunList calls for p.
func PageTime(t testing.TB, s persistence.Store, p persistence.RunListParams) time.Duration {
	t.Helper()
	var ds []time.Duration
	for range 5 {
		began := time.Now()
		if _, err := s.RunList(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(began))
	}
	slices.Sort(ds)
	return ds[2].Round(10 * time.Microsecond)
}

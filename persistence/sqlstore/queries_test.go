package sqlstore

import (
	"strings"
	"testing"
	"time"
)

// TestRunListQueryHasOneUpperBound: each branch of a RunList statement
// bounds created_at from above once, by the tighter of the window's end
// and the cursor. SQLite ends an index range at the first of two upper
// bounds it finds, which for a deep page of a window is the window's end,
// far newer than the cursor; its query plan does not tell them apart.
func TestRunListQueryHasOneUpperBound(t *testing.T) {
	s := &Store{d: SQLite(nil, nil)}
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	after, before := now.Add(-48*time.Hour), now.Add(-24*time.Hour)
	for _, shape := range RunListShapes(after, before) {
		for _, c := range []struct {
			name, cursor string
			bounds       int // upper bounds per branch
		}{
			{"first page", "", 0},
			{"cursor in the window", encodeCursor(before.Add(-time.Hour), "r1"), 1},
			{"cursor after the window", encodeCursor(now, "r1"), 1},
		} {
			p := shape.Params
			p.Cursor = c.cursor
			want := c.bounds
			if c.cursor == "" && !p.CreatedBefore.IsZero() {
				want = 1
			}
			q, _, err := s.runListQuery(p)
			if err != nil {
				t.Fatal(err)
			}
			branches := max(len(p.Status), 1)
			got := strings.Count(q.SQL, "created_at <= ?") + strings.Count(q.SQL, "created_at < ?") -
				strings.Count(q.SQL, "(created_at < ? OR")
			if got != want*branches {
				t.Errorf("%s, %s: %d upper bounds on created_at in %d branches, want %d each\n%s", shape.Name, c.name, got, branches, want, q.SQL)
			}
		}
	}
}

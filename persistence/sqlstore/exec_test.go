package sqlstore

import (
	"context"
	"strings"
	"testing"
)

// TestValuesStmtsSplits: multi-row statements are split at maxStmtBytes
// of argument data and at maxStmtArgs arguments; a row larger than the
// byte bound goes alone; every row lands once, in order, with as many
// placeholders as arguments.
func TestValuesStmtsSplits(t *testing.T) {
	big := strings.Repeat("x", maxStmtBytes/4-8) // with its int, a quarter of the bound
	huge := strings.Repeat("y", maxStmtBytes+1)
	var rows [][]any
	for i := range 7 {
		rows = append(rows, []any{i, big})
	}
	rows = append(rows, []any{7, huge}, []any{8, "small"})
	check := func(t *testing.T, stmts []stmt, rows [][]any, width int) {
		t.Helper()
		var got []any
		for _, st := range stmts {
			if !strings.HasPrefix(st.query, "INSERT INTO t VALUES ") || !strings.HasSuffix(st.query, " TAIL") {
				t.Fatalf("statement %q lacks its head or tail", st.query[:min(len(st.query), 40)])
			}
			if n := strings.Count(st.query, "?"); n != len(st.args) {
				t.Fatalf("%d placeholders for %d arguments", n, len(st.args))
			}
			if len(st.args) > maxStmtArgs {
				t.Errorf("%d arguments in one statement, over %d", len(st.args), maxStmtArgs)
			}
			if b := argBytes(st.args); b > maxStmtBytes && len(st.args) != width {
				t.Errorf("%d bytes of arguments in a statement of %d rows", b, len(st.args)/width)
			}
			got = append(got, st.args...)
		}
		var want []any
		for _, r := range rows {
			want = append(want, r...)
		}
		if len(got) != len(want) {
			t.Fatalf("%d arguments in all, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("argument %d out of order", i)
			}
		}
	}
	// 4 big rows fill the bound exactly: 7 make 2 statements; the huge
	// row goes alone, and so does the small one after it.
	stmts := valuesStmts("INSERT INTO t VALUES ", "(?, ?)", " TAIL", rows)
	check(t, stmts, rows, 2)
	if len(stmts) != 4 {
		t.Errorf("%d statements, want 4 (4 + 3 big rows, the huge row, the small one)", len(stmts))
	}
	// Many small rows: split by the argument count.
	var many [][]any
	for i := range 2*maxStmtArgs/10 + 3 {
		many = append(many, []any{i, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	}
	stmts = valuesStmts("INSERT INTO t VALUES ", "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", " TAIL", many)
	check(t, stmts, many, 10)
	if len(stmts) != 3 {
		t.Errorf("%d statements, want 3", len(stmts))
	}
	if got := valuesStmts("INSERT INTO t VALUES ", "(?)", "", nil); len(got) != 0 {
		t.Errorf("no rows gave %d statements", len(got))
	}
}

// TestExecAllFailingStatement: on MySQL, with and without multi-statement
// calls, a statement that fails in the middle of a batch returns its
// error, the transaction rolls back whole (the statements before it
// included), and the connection serves the next transaction.
func TestExecAllFailingStatement(t *testing.T) {
	_, db, _, isDup := pipeStore(t) // one pooled connection: the next transaction gets the same one
	ctx := context.Background()
	for _, multi := range []bool{true, false} {
		d := MySQL(isDup, func(error) bool { return false })
		d.MultiStatements = multi
		s := New(db, d, Config{})
		err := s.write(ctx, func(q querier) error { return s.execAll(ctx, q, ins(1), ins(2), ins(1), ins(3)) })
		if !isDup(err) {
			t.Fatalf("multi %v: err = %v, want the duplicate key of the third statement", multi, err)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 0 {
			t.Fatalf("multi %v: %d rows after the failed batch (%v), want 0: it was not rolled back whole", multi, n, err)
		}
		if err := s.write(ctx, func(q querier) error { return s.execAll(ctx, q, ins(1), ins(2)) }); err != nil {
			t.Fatalf("multi %v: the batch after a failed one: %v", multi, err)
		}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 2 {
			t.Fatalf("multi %v: %d rows (%v), want 2", multi, n, err)
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM t"); err != nil {
			t.Fatal(err)
		}
	}
}

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/dagflow/dagflow/internal/testenv"
)

// pipeStore is a Store on its own MySQL database with multi-statement
// calls, whose pool holds one connection (so a transaction left open on it
// would show in the next one), and a second handle that sees only what
// was committed.
func pipeStore(t *testing.T) (s *Store, db, other *sql.DB, isDup func(error) bool) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testenv.MySQLDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MultiStatements, cfg.InterpolateParams = true, true
	open := func() *sql.DB {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db, other = open(), open()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(context.Background(), "CREATE TABLE t (id INT PRIMARY KEY, v LONGBLOB NULL)"); err != nil {
		t.Fatal(err)
	}
	isDup = func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 1062
	}
	d := MySQL(isDup, func(error) bool { return false })
	d.MultiStatements = true
	return New(db, d, Config{}), db, other, isDup
}

func ins(id int) stmt { return stmt{"INSERT INTO t (id) VALUES (?)", []any{id}} }

// committed counts t's rows as another connection sees them.
func committed(t *testing.T, other *sql.DB) int {
	t.Helper()
	var n int
	if err := other.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// noOpenTransaction checks that the pooled connection is not left inside
// a transaction: a row it inserts outside write() is seen at once by
// another connection.
func noOpenTransaction(t *testing.T, db, other *sql.DB, id int) {
	t.Helper()
	before := committed(t, other)
	if _, err := db.ExecContext(context.Background(), "INSERT INTO t (id) VALUES (?)", id); err != nil {
		t.Fatal(err)
	}
	if after := committed(t, other); after != before+1 {
		t.Fatalf("an autocommitted insert is not visible (%d rows, then %d): the connection was left in a transaction", before, after)
	}
	if _, err := db.ExecContext(context.Background(), "DELETE FROM t WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
}

// TestPipeTxWritesTravelLater: writes queued with execLater fail where
// they travel, with the next query or with the COMMIT; either way the
// error is the failing statement's, nothing of the transaction is
// committed, and the connection is not left inside it.
func TestPipeTxWritesTravelLater(t *testing.T) {
	s, db, other, isDup := pipeStore(t)
	ctx := context.Background()
	err := s.write(ctx, func(q querier) error {
		if _, ok := q.(*pipeTx); !ok {
			t.Fatalf("write ran on %T, want a pipeTx", q)
		}
		if err := s.execLater(ctx, q, ins(1), ins(2), ins(1)); err != nil {
			return err // nothing is sent yet
		}
		var n int
		return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n)
	})
	if !isDup(err) {
		t.Fatalf("err = %v, want the duplicate key of the queued insert, surfacing at the next query", err)
	}
	if n := committed(t, other); n != 0 {
		t.Fatalf("%d rows committed by a failed transaction", n)
	}
	noOpenTransaction(t, db, other, 100)

	err = s.write(ctx, func(q querier) error { return s.execLater(ctx, q, ins(1), ins(1)) })
	if !isDup(err) {
		t.Fatalf("err = %v, want the duplicate key, surfacing at the commit", err)
	}
	if n := committed(t, other); n != 0 {
		t.Fatalf("%d rows committed by a failed transaction", n)
	}
	noOpenTransaction(t, db, other, 100)

	// Writes queued, then read back in the same transaction: the query
	// sees them; the COMMIT makes them visible.
	err = s.write(ctx, func(q querier) error {
		if err := s.execLater(ctx, q, ins(1), ins(2)); err != nil {
			return err
		}
		var n int
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil {
			return err
		}
		if n != 2 {
			t.Errorf("the transaction sees %d of its 2 queued rows", n)
		}
		if c := committed(t, other); c != 0 {
			t.Errorf("%d rows visible before the commit", c)
		}
		return s.execLater(ctx, q, ins(3))
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := committed(t, other); n != 3 {
		t.Fatalf("%d rows committed, want 3", n)
	}
	noOpenTransaction(t, db, other, 100)
}

// TestPipeTxFnErrorRollsBack: a transaction whose function fails after
// its writes were sent is rolled back, and the connection serves the next
// one; one cut short by its context too.
func TestPipeTxFnErrorRollsBack(t *testing.T) {
	s, db, other, _ := pipeStore(t)
	boom := errors.New("boom")
	ctx := context.Background()
	err := s.write(ctx, func(q querier) error {
		if err := s.execAll(ctx, q, ins(1), ins(2)); err != nil { // sent now
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the function's", err)
	}
	if n := committed(t, other); n != 0 {
		t.Fatalf("%d rows committed by a failed transaction", n)
	}
	noOpenTransaction(t, db, other, 100)

	cctx, cancel := context.WithCancel(ctx)
	err = s.write(cctx, func(q querier) error {
		if err := s.execAll(cctx, q, ins(1)); err != nil {
			return err
		}
		cancel()
		return s.execLater(cctx, q, ins(2))
	})
	if err == nil {
		t.Fatal("a transaction whose context was cancelled before its commit committed")
	}
	if n := committed(t, other); n != 0 {
		t.Fatalf("%d rows committed by a cancelled transaction", n)
	}
	noOpenTransaction(t, db, other, 100)
	if err := s.write(ctx, func(q querier) error { return s.execLater(ctx, q, ins(1)) }); err != nil {
		t.Fatalf("the transaction after a cancelled one: %v", err)
	}
}

// TestPipeTxLargeWrites: queued writes that carry more than maxStmtBytes
// together are sent in several calls, each under max_allowed_packet, and
// all of them commit.
func TestPipeTxLargeWrites(t *testing.T) {
	s, _, other, _ := pipeStore(t)
	ctx := context.Background()
	big := strings.Repeat("z", maxStmtBytes/2)
	err := s.write(ctx, func(q querier) error {
		for i := range 5 {
			if err := s.execLater(ctx, q, stmt{"INSERT INTO t (id, v) VALUES (?, ?)", []any{i, big}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := committed(t, other); n != 5 {
		t.Fatalf("%d rows committed, want 5", n)
	}
}

// TestSelectSets: several queries in one call fill their own
// destinations in order; a failing one fails the call.
func TestSelectSets(t *testing.T) {
	s, _, _, _ := pipeStore(t)
	ctx := context.Background()
	if err := s.write(ctx, func(q querier) error { return s.execLater(ctx, q, ins(1), ins(2), ins(3)) }); err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID int `db:"id"`
	}
	err := s.write(ctx, func(q querier) error {
		var a, b, c []row
		if err := s.selectSets(ctx, q,
			rowSet{&a, "SELECT id FROM t WHERE id < ? ORDER BY id FOR UPDATE", []any{3}},
			rowSet{&b, "SELECT id FROM t WHERE id > ?", []any{5}},
			rowSet{&c, "SELECT id FROM t WHERE id = ?", []any{3}},
		); err != nil {
			return err
		}
		if len(a) != 2 || a[0].ID != 1 || a[1].ID != 2 || len(b) != 0 || len(c) != 1 || c[0].ID != 3 {
			t.Errorf("sets %v %v %v, want [1 2] [] [3]", a, b, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.write(ctx, func(q querier) error {
		var a, b []row
		return s.selectSets(ctx, q,
			rowSet{&a, "SELECT id FROM t", nil},
			rowSet{&b, "SELECT id FROM missing_table", nil},
		)
	})
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1146 {
		t.Fatalf("err = %v, want the missing table of the second query", err)
	}
}

// TestScanFastPathsMatchSqlx: the hand-written scans of whole run and step
// rows fill every field as sqlx's struct scan does, for rows with every
// nullable column set and with none.
func TestScanFastPathsMatchSqlx(t *testing.T) {
	_, db, _, _ := pipeStore(t)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE r (id VARCHAR(64), workflow VARCHAR(64), version INT, status VARCHAR(32), input LONGBLOB NULL,
			output LONGBLOB NULL, error TEXT NULL, idempotency_key VARCHAR(255) NULL, metadata LONGBLOB NULL,
			schedule VARCHAR(64), scheduled_tick DATETIME(6) NULL, start_at DATETIME(6), created_at DATETIME(6),
			started_at DATETIME(6) NULL, finished_at DATETIME(6) NULL, updated_at DATETIME(6), definition VARCHAR(64),
			priority INT, paused_at DATETIME(6) NULL, parent_run_id VARCHAR(64), parent_step VARCHAR(64))`,
		`INSERT INTO r VALUES ('a', 'wf', 2, 'succeeded', '{"n":1}', '{"ok":true}', 'boom', 'key', '{"m":"v"}', 'every',
			'2030-01-01 00:00:00.000001', '2030-01-01 00:00:01', '2030-01-01 00:00:02', '2030-01-01 00:00:03',
			'2030-01-01 00:00:04', '2030-01-01 00:00:05.123456', 'a1b2c3d4e5f60718', 3, '2030-01-01 00:00:06', 'p', 'pay')`,
		`INSERT INTO r VALUES ('b', 'wf', 1, 'pending', NULL, NULL, NULL, NULL, NULL, '', NULL,
			'2030-01-01 00:00:01', '2030-01-01 00:00:02', NULL, NULL, '2030-01-01 00:00:05', '', 0, NULL, '', '')`,
		`CREATE TABLE s (run_id VARCHAR(64), step VARCHAR(64), seq INT, workflow VARCHAR(64), queue VARCHAR(64),
			status VARCHAR(32), deps TEXT, dependents TEXT, attempt INT, max_attempts INT, pending_deps INT,
			comp_attempt INT, fence VARCHAR(64), lease_expires_at DATETIME(6) NULL, next_attempt_at DATETIME(6) NULL,
			output LONGBLOB NULL, error TEXT NULL, queued_at DATETIME(6) NULL, started_at DATETIME(6) NULL,
			finished_at DATETIME(6) NULL, updated_at DATETIME(6), worker VARCHAR(255), claimed_at DATETIME(6) NULL, reruns INT,
			priority INT)`,
		`INSERT INTO s VALUES ('a', 'ship', 3, 'wf', 'q', 'running', 'notify,points', '', 2, 5, 0, 1, 'f',
			'2030-01-01 00:00:01', '2030-01-01 00:00:02', '{"x":1}', 'e', '2030-01-01 00:00:03', '2030-01-01 00:00:04',
			'2030-01-01 00:00:05', '2030-01-01 00:00:06', 'w', '2030-01-01 00:00:07', 2, -2)`,
		`INSERT INTO s VALUES ('b', 'reserve', 0, 'wf', 'q', 'waiting', '', 'notify', 0, 3, 1, 0, '',
			NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2030-01-01 00:00:06', '', NULL, 0, 0)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	scan := func(query string, dest any, fast bool) {
		t.Helper()
		rows, err := db.QueryContext(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		if fast {
			err = scanInto(rows, dest)
		} else {
			err = sqlx.StructScan(rows, dest)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var runsFast, runsSqlx []runRow
	scan("SELECT "+runCols+" FROM r ORDER BY id", &runsFast, true)
	scan("SELECT "+runCols+" FROM r ORDER BY id", &runsSqlx, false)
	if len(runsFast) != 2 || !reflect.DeepEqual(runsFast, runsSqlx) {
		t.Errorf("run rows:\nfast %+v\nsqlx %+v", runsFast, runsSqlx)
	}
	if !runsFast[0].FinishedAt.Valid || string(runsFast[0].Metadata) != `{"m":"v"}` || runsFast[1].Error.Valid ||
		runsFast[0].Definition != "a1b2c3d4e5f60718" || runsFast[0].ParentRunID != "p" || runsFast[0].ParentStep != "pay" {
		t.Errorf("run rows not read as stored: %+v", runsFast)
	}
	var stepsFast, stepsSqlx []stepRow
	scan("SELECT "+stepCols+" FROM s ORDER BY run_id", &stepsFast, true)
	scan("SELECT "+stepCols+" FROM s ORDER BY run_id", &stepsSqlx, false)
	if len(stepsFast) != 2 || !reflect.DeepEqual(stepsFast, stepsSqlx) {
		t.Errorf("step rows:\nfast %+v\nsqlx %+v", stepsFast, stepsSqlx)
	}
	if stepsFast[0].Deps != "notify,points" || !stepsFast[0].ClaimedAt.Valid || stepsFast[1].ClaimedAt.Valid {
		t.Errorf("step rows not read as stored: %+v", stepsFast)
	}
	// A row that cannot be scanned (NULL where the field is a string)
	// fails the scan with the column named, and leaves only the rows
	// before it in dest, none half filled.
	for _, q := range []string{
		`INSERT INTO r VALUES ('c', NULL, 1, 'pending', NULL, NULL, NULL, NULL, NULL, '', NULL,
			'2030-01-01 00:00:01', '2030-01-01 00:00:02', NULL, NULL, '2030-01-01 00:00:05', '', 0, NULL, '', '')`,
		`INSERT INTO s VALUES ('c', 'ship', 3, NULL, 'q', 'waiting', '', '', 0, 3, 1, 0, '',
			NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2030-01-01 00:00:06', '', NULL, 0, 0)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	scanErr := func(query string, dest any) error {
		t.Helper()
		rows, err := db.QueryContext(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		return scanInto(rows, dest)
	}
	var runsBad []runRow
	if err := scanErr("SELECT "+runCols+" FROM r ORDER BY id", &runsBad); err == nil || !strings.Contains(err.Error(), "workflow") {
		t.Errorf("scanning a run row with a NULL workflow: err = %v, want one naming the column", err)
	}
	if len(runsBad) != 2 || !reflect.DeepEqual(runsBad, runsSqlx) {
		t.Errorf("after a failed run row, dest = %+v, want the two rows before it", runsBad)
	}
	var stepsBad []stepRow
	if err := scanErr("SELECT "+stepCols+" FROM s ORDER BY run_id", &stepsBad); err == nil || !strings.Contains(err.Error(), "workflow") {
		t.Errorf("scanning a step row with a NULL workflow: err = %v, want one naming the column", err)
	}
	if len(stepsBad) != 2 || !reflect.DeepEqual(stepsBad, stepsSqlx) {
		t.Errorf("after a failed step row, dest = %+v, want the two rows before it", stepsBad)
	}
	// Other columns take sqlx's way.
	var some []runRow
	scan("SELECT id, status FROM r ORDER BY id", &some, true)
	if len(some) != 3 || some[0].ID != "a" || some[1].Status != "pending" || some[0].Workflow != "" {
		t.Errorf("partial run rows = %+v", some)
	}
}

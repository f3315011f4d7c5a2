package mysql

import (
	"context"
	"database/sql"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/dagflow/dagflow/internal/testenv"
)

// showCreate returns SHOW CREATE TABLE of table, its lines sorted: an
// index dropped and added back is listed last.
func showCreate(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	var n, c string
	if err := db.QueryRowContext(context.Background(), "SHOW CREATE TABLE "+table).Scan(&n, &c); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(c, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, ",")
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// downTo runs the down migrations of db to version.
func downTo(t *testing.T, db *sql.DB, version int64) {
	t.Helper()
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectMySQL, db, sub, goose.WithTableName(MigrationTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(context.Background(), version); err != nil {
		t.Fatalf("down to %d: %v", version, err)
	}
}

// countTables counts which of tables the database has.
func countTables(t *testing.T, db *sql.DB, tables ...string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name IN ('`+strings.Join(tables, "', '")+`')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIsolationMigrationDown: migration 00007 goes down to the schema of
// 00006 exactly (its tables gone, the old index back) and up again.
func TestIsolationMigrationDown(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{DSN: testenv.MySQLDatabase(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := s.DB()
	if err := migrateDB(ctx, db, 6); err != nil {
		t.Fatal(err)
	}
	before := showCreate(t, db, "step_runs") + showCreate(t, db, "workflow_runs")
	if err := migrateDB(ctx, db, 0); err != nil {
		t.Fatal(err)
	}
	downTo(t, db, 6)
	if after := showCreate(t, db, "step_runs") + showCreate(t, db, "workflow_runs"); after != before {
		t.Errorf("schema after going down to 6:\n%s\nwant:\n%s", after, before)
	}
	if n := countTables(t, db, "dagflow_meta", "dagflow_nodes"); n != 0 {
		t.Errorf("%d of the new tables left after going down", n)
	}
	if err := migrateDB(ctx, db, 0); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if !strings.Contains(showCreate(t, db, "step_runs"), "idx_steps_wf_due") {
		t.Error("no idx_steps_wf_due after going up again")
	}
}

// TestDefinitionsMigrationDown: migration 00008 goes down to the schema
// of 00007 exactly (its tables, column and index gone) and up again.
func TestDefinitionsMigrationDown(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{DSN: testenv.MySQLDatabase(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := s.DB()
	if err := migrateDB(ctx, db, 7); err != nil {
		t.Fatal(err)
	}
	before := showCreate(t, db, "workflow_runs")
	if err := migrateDB(ctx, db, 0); err != nil {
		t.Fatal(err)
	}
	if n := countTables(t, db, "workflow_definitions", "api_keys"); n != 2 {
		t.Fatalf("%d of the new tables after going up, want 2", n)
	}
	downTo(t, db, 7)
	if after := showCreate(t, db, "workflow_runs"); after != before {
		t.Errorf("workflow_runs after going down to 7:\n%s\nwant:\n%s", after, before)
	}
	if n := countTables(t, db, "workflow_definitions", "api_keys"); n != 0 {
		t.Errorf("%d of the new tables left after going down", n)
	}
	if err := migrateDB(ctx, db, 0); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if c := showCreate(t, db, "workflow_runs"); !strings.Contains(c, "idx_runs_idempotency_created") || !strings.Contains(c, "`definition`") {
		t.Errorf("workflow_runs after going up again:\n%s", c)
	}
}

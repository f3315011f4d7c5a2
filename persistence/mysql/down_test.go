package mysql

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/dagflow/dagflow/internal/testenv"
)

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
	// SHOW CREATE TABLE's lines, sorted: an index dropped and added back
	// is listed last.
	create := func(table string) string {
		t.Helper()
		var n, c string
		if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+table).Scan(&n, &c); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(c, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimSuffix(l, ",")
		}
		slices.Sort(lines)
		return strings.Join(lines, "\n") + "\n"
	}
	if err := migrateDB(ctx, db, 6); err != nil {
		t.Fatal(err)
	}
	before := create("step_runs") + create("workflow_runs")
	if err := migrateDB(ctx, db, 0); err != nil {
		t.Fatal(err)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectMySQL, db, sub, goose.WithTableName(MigrationTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 6); err != nil {
		t.Fatalf("down to 6: %v", err)
	}
	if after := create("step_runs") + create("workflow_runs"); after != before {
		t.Errorf("schema after going down to 6:\n%s\nwant:\n%s", after, before)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name IN ('dagflow_meta', 'dagflow_nodes')`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d of the new tables left after going down (%v)", n, err)
	}
	if err := migrateDB(ctx, db, 0); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if !strings.Contains(create("step_runs"), "idx_steps_wf_due") {
		t.Error("no idx_steps_wf_due after going up again")
	}
}

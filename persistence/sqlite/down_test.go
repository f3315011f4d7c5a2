package sqlite

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"
)

// TestIsolationMigrationDown: migration 00006 goes down to the schema of
// 00005 exactly (its tables gone, the old index back) and up again.
func TestIsolationMigrationDown(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "dagflow.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	schema := func() string {
		t.Helper()
		rows, err := s.DB().QueryContext(ctx, "SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_schema")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(l, MigrationTable) && !strings.Contains(l, "sqlite_sequence") {
				out = append(out, l)
			}
		}
		slices.Sort(out)
		return strings.Join(out, "\n")
	}
	if err := s.migrate(ctx, 5); err != nil {
		t.Fatal(err)
	}
	before := schema()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.DB(), sub, goose.WithTableName(MigrationTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatalf("down to 5: %v", err)
	}
	if after := schema(); after != before {
		t.Errorf("schema after going down to 5:\n%s\nwant:\n%s", after, before)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if !strings.Contains(schema(), "idx_steps_wf_due") {
		t.Error("no idx_steps_wf_due after going up again")
	}
}

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

// schemaOf returns every table, index and trigger of s's database with
// its SQL, sorted, but the migration table's.
func schemaOf(t *testing.T, s *Store) string {
	t.Helper()
	rows, err := s.DB().QueryContext(context.Background(), "SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_schema")
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
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// downTo runs the down migrations of s's database to version.
func downTo(t *testing.T, s *Store, version int64) {
	t.Helper()
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.DB(), sub, goose.WithTableName(MigrationTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(context.Background(), version); err != nil {
		t.Fatalf("down to %d: %v", version, err)
	}
}

// checkDown migrates a new database to version, then all the way, then
// down to version again, and requires the schema of version exactly; then
// up again, requiring the newest schema.
func checkDown(t *testing.T, version int64) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "dagflow.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.migrate(ctx, version); err != nil {
		t.Fatal(err)
	}
	before := schemaOf(t, s)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	latest := schemaOf(t, s)
	downTo(t, s, version)
	if after := schemaOf(t, s); after != before {
		t.Errorf("schema after going down to %d:\n%s\nwant:\n%s", version, after, before)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if again := schemaOf(t, s); again != latest {
		t.Errorf("schema after going up again:\n%s\nwant:\n%s", again, latest)
	}
}

// TestIsolationMigrationDown: migration 00006 goes down to the schema of
// 00005 exactly (its tables gone, the old index back) and up again.
func TestIsolationMigrationDown(t *testing.T) { checkDown(t, 5) }

// TestDefinitionsMigrationDown: migration 00007 goes down to the schema
// of 00006 exactly (its tables, column and index gone) and up again.
func TestDefinitionsMigrationDown(t *testing.T) { checkDown(t, 6) }

package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/persistence/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db"), AutoMigrate: true})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store { return openStore(t) },
		storetest.WithSchemaDump(func(t *testing.T, s persistence.Store) string {
			return schemaDump(t, s.(*sqlite.Store).DB())
		}),
		storetest.WithBeginTx(func(ctx context.Context, s persistence.Store) (*sql.Tx, error) {
			return s.(*sqlite.Store).DB().BeginTx(ctx, nil)
		}))
}

func TestConformanceInMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("the file-backed run covers the same code")
	}
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: ":memory:", AutoMigrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func schemaDump(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query("SELECT type, name, COALESCE(sql, '') FROM sqlite_schema ORDER BY type, name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	n := 0
	for rows.Next() {
		var typ, name, sql string
		if err := rows.Scan(&typ, &name, &sql); err != nil {
			t.Fatal(err)
		}
		b.WriteString(typ + " " + name + ": " + sql + "\n")
		n++
	}
	if n < 6 {
		t.Fatalf("schema has %d objects", n)
	}
	return b.String()
}

func TestMigrateIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	before := schemaDump(t, s.DB())
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, sqlite.Config{Path: path, AutoMigrate: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if after := schemaDump(t, s.DB()); after != before {
		t.Errorf("re-running Migrate changed the schema")
	}
	var mode string
	if err := s.DB().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk int
	if err := s.DB().QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}
	if _, err := sqlite.Open(ctx, sqlite.Config{}); err == nil {
		t.Error("Open with no path succeeded")
	}
}

// TestUpgradeRunningAttempts: a database migrated by the version before
// 00005, with attempts in progress in the old format, upgrades to the one
// history format without losing any of it.
func TestUpgradeRunningAttempts(t *testing.T) {
	storetest.RunUpgradeRunningAttempts(t, func(t *testing.T) (persistence.Store, *sql.DB, func() error) {
		s, upgrade := atVersion(t, 4)
		return s, s.DB(), upgrade
	})
}

// TestSchemaVersion: a fresh, unmigrated file is version 0 and is refused
// with a message that says to migrate; a database migrated by a newer
// release passes (see storetest.RunSchemaVersion).
func TestSchemaVersion(t *testing.T) {
	storetest.RunSchemaVersion(t, sqlite.MigrationTable, func(t *testing.T) (persistence.Store, *sql.DB, func(int64) error) {
		ctx := context.Background()
		s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db")})
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s, s.DB(), func(to int64) error {
			if to == 0 {
				return s.Migrate(ctx)
			}
			return s.MigrateTo(ctx, to)
		}
	})
}

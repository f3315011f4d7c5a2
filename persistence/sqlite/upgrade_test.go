package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/persistence/storetest"
)

// atVersion returns a store whose database is migrated up to version, for
// an upgrade test to write the rows of an earlier release with, and the
// function that upgrades it to the binary's schema.
//
// The store is this binary's, which reads and writes every column of
// workflow_runs, migration 00007's definition among them: until the
// upgrade the database gets that column, empty in every row, and loses
// it again just before, so that 00007 adds it as on a real upgrade. The
// same goes for migration 00010's priority and paused_at.
func atVersion(t *testing.T, version int64) (*sqlite.Store, func() error) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db")})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.MigrateTo(ctx, version); err != nil {
		t.Fatalf("migrating to %d: %v", version, err)
	}
	for _, q := range []string{
		`ALTER TABLE workflow_runs ADD COLUMN definition TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE workflow_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE workflow_runs ADD COLUMN paused_at TEXT`,
		`ALTER TABLE step_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0`,
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return s, func() error {
		for _, q := range []string{
			`ALTER TABLE workflow_runs DROP COLUMN definition`,
			`ALTER TABLE workflow_runs DROP COLUMN priority`,
			`ALTER TABLE workflow_runs DROP COLUMN paused_at`,
			`ALTER TABLE step_runs DROP COLUMN priority`,
		} {
			if _, err := s.DB().ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return s.Migrate(ctx)
	}
}

// TestUpgradeDefinitions: a database at migration 00006, with runs in it,
// migrates to definitions, API keys and runs listed by idempotency key.
func TestUpgradeDefinitions(t *testing.T) {
	storetest.RunUpgradeDefinitions(t, func(t *testing.T) (persistence.Store, func() error) {
		return atVersion(t, 6)
	})
}

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
	// Columns this binary's store reads or writes, by the migration
	// that adds them.
	later := []struct {
		migration          int64
		table, column, ddl string
	}{
		{7, "workflow_runs", "definition", "TEXT NOT NULL DEFAULT ''"},
		{11, "step_runs", "reruns", "INTEGER NOT NULL DEFAULT 0"},
		{13, "workflow_runs", "priority", "INTEGER NOT NULL DEFAULT 0"},
		{13, "workflow_runs", "paused_at", "TEXT"},
		{13, "step_runs", "priority", "INTEGER NOT NULL DEFAULT 0"},
		{14, "schedules", "owner", "TEXT NOT NULL DEFAULT 'code'"},
		{14, "schedules", "deleted", "INTEGER NOT NULL DEFAULT 0"},
		{14, "schedules", "changed_at", "TEXT NOT NULL DEFAULT '1970-01-01 00:00:00.000000'"},
		{15, "workflow_runs", "parent_run_id", "TEXT NOT NULL DEFAULT ''"},
		{15, "workflow_runs", "parent_step", "TEXT NOT NULL DEFAULT ''"},
	}
	var drops []string
	for _, c := range later {
		if c.migration <= version {
			continue
		}
		if _, err := s.DB().ExecContext(ctx, "ALTER TABLE "+c.table+" ADD COLUMN "+c.column+" "+c.ddl); err != nil {
			t.Fatal(err)
		}
		drops = append(drops, "ALTER TABLE "+c.table+" DROP COLUMN "+c.column)
	}
	return s, func() error {
		for _, d := range drops {
			if _, err := s.DB().ExecContext(ctx, d); err != nil {
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

package mysql_test

import (
	"context"
	"testing"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/storetest"
)

// atVersion returns a store whose database is migrated up to version, for
// an upgrade test to write the rows of an earlier release with, and the
// function that upgrades it to the binary's schema.
//
// The store is this binary's, which reads and writes every column of
// workflow_runs, migration 00008's definition among them: until the
// upgrade the database gets that column, empty in every row, and loses
// it again just before, so that 00008 adds it as on a real upgrade.
func atVersion(t *testing.T, version int64) (*mysql.Store, func() error) {
	t.Helper()
	ctx := context.Background()
	s, err := mysql.Open(ctx, mysql.Config{DSN: testenv.MySQLDatabase(t)})
	if err != nil {
		t.Fatalf("mysql.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := mysql.MigrateTo(ctx, s.DB(), version); err != nil {
		t.Fatalf("migrating to %d: %v", version, err)
	}
	if _, err := s.DB().ExecContext(ctx, `ALTER TABLE workflow_runs ADD COLUMN definition
		VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''`); err != nil {
		t.Fatal(err)
	}
	return s, func() error {
		if _, err := s.DB().ExecContext(ctx, `ALTER TABLE workflow_runs DROP COLUMN definition`); err != nil {
			return err
		}
		return s.Migrate(ctx)
	}
}

// TestUpgradeDefinitions: a database at migration 00007, with runs in it,
// migrates to definitions, API keys and runs listed by idempotency key.
func TestUpgradeDefinitions(t *testing.T) {
	storetest.RunUpgradeDefinitions(t, func(t *testing.T) (persistence.Store, func() error) {
		return atVersion(t, 7)
	})
}

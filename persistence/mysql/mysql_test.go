package mysql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openStore(t testing.TB) *mysql.Store {
	t.Helper()
	dsn := testenv.MySQLDatabase(t)
	// Three minutes: TiDB runs the DDL of every database one statement
	// at a time, so a fresh migration waits for those of the tests that
	// migrate alongside (about 7 s each alone).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
	if err != nil {
		t.Fatalf("mysql.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store { return openStore(t) },
		storetest.WithSchemaDump(func(t *testing.T, s persistence.Store) string {
			return schemaDump(t, s.(*mysql.Store).DB())
		}),
		storetest.WithBeginTx(func(ctx context.Context, s persistence.Store) (*sql.Tx, error) {
			return s.(*mysql.Store).DB().BeginTx(ctx, nil)
		}))
}

// schemaDump returns SHOW CREATE TABLE of every table, sorted by name.
func schemaDump(t *testing.T, db *sql.DB) string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, "SHOW TABLES")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if len(tables) < 6 {
		t.Fatalf("only %d tables: %v", len(tables), tables)
	}
	var b strings.Builder
	for _, name := range tables {
		var n, create string
		if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE `"+name+"`").Scan(&n, &create); err != nil {
			t.Fatal(err)
		}
		// AUTO_INCREMENT counters move with data, not with the schema.
		if i := strings.Index(create, " AUTO_INCREMENT="); i >= 0 {
			j := strings.IndexByte(create[i+1:], ' ')
			if j < 0 {
				j = len(create) - i - 1
			}
			create = create[:i] + create[i+1+j:]
		}
		b.WriteString(create + "\n")
	}
	return b.String()
}

func TestMigrateIsIdempotent(t *testing.T) {
	ctx := context.Background()
	// Concurrent first migrations serialize on the named lock, the
	// version table's creation included (goose creates it in a check it
	// makes before taking its own locker). Several fresh databases, so
	// that a race between them shows.
	var dsn string
	for round := range 5 {
		dsn = testenv.MySQLDatabase(t)
		errs := make(chan error, 6)
		for range 6 {
			go func() { errs <- mysql.Migrate(ctx, dsn) }()
		}
		for range 6 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: Migrate: %v", round, err)
			}
		}
	}
	s, err := mysql.Open(ctx, mysql.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := schemaDump(t, s.DB())
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if after := schemaDump(t, s.DB()); after != before {
		t.Errorf("re-running Migrate changed the schema")
	}
}

func TestOpenForcesSessionSettings(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	ctx := context.Background()
	// A DSN asking for other settings still gets the store's.
	s, err := mysql.Open(ctx, mysql.Config{DSN: dsn + "&loc=Local&parseTime=false&charset=latin1", AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var charset, collation, tz, mode string
	if err := s.DB().QueryRowContext(ctx, "SELECT @@character_set_connection, @@collation_connection, @@time_zone, @@sql_mode").Scan(&charset, &collation, &tz, &mode); err != nil {
		t.Fatal(err)
	}
	if charset != "utf8mb4" || collation != "utf8mb4_bin" || tz != "+00:00" || !strings.Contains(mode, "STRICT_ALL_TABLES") {
		t.Errorf("session = %s %s %s %s", charset, collation, tz, mode)
	}
	var iso string
	if err := s.DB().QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&iso); err != nil {
		if err := s.DB().QueryRowContext(ctx, "SELECT @@transaction_isolation").Scan(&iso); err != nil {
			t.Fatal(err)
		}
	}
	if iso != "READ-COMMITTED" {
		t.Errorf("isolation = %s, want READ-COMMITTED", iso)
	}
	// A DSN with multiStatements=false still gets them, and the store
	// sends a transaction's writes together; the bare dialect, for a
	// database opened by someone else, sends statements one by one.
	s2, err := mysql.Open(ctx, mysql.Config{DSN: dsn + "&multiStatements=false"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.DB().ExecContext(ctx, "SELECT 1; SELECT 2"); err != nil {
		t.Errorf("two statements in one call: %v", err)
	}
	if !s2.Dialect().MultiStatements || mysql.Dialect().MultiStatements {
		t.Errorf("store dialect multi-statements %v, bare dialect %v; want true and false",
			s2.Dialect().MultiStatements, mysql.Dialect().MultiStatements)
	}
	if _, err := mysql.Open(ctx, mysql.Config{}); err == nil {
		t.Error("Open with no DSN succeeded")
	}
	if _, err := mysql.Open(ctx, mysql.Config{DSN: "root@tcp(127.0.0.1:3306)/"}); err == nil {
		t.Error("Open with no database succeeded")
	}
}

// TestMigrateWaitsForTheLock: while another session holds the database's
// migration lock, Migrate waits and, when its context ends first, fails
// with an error naming the lock, having touched nothing; once the lock is
// free it migrates.
func TestMigrateWaitsForTheLock(t *testing.T) {
	dsn := testenv.MySQLDatabase(t)
	ctx := context.Background()
	s, err := mysql.Open(ctx, mysql.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	holder, err := s.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var got int
	if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT('dagflow_migrate:', DATABASE()), 0)").Scan(&got); err != nil || got != 1 {
		t.Fatalf("taking the migration lock: %d, %v", got, err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err = mysql.Migrate(short, dsn)
	if err == nil || !strings.Contains(err.Error(), "migration lock") {
		t.Fatalf("Migrate while the lock is held: %v, want an error naming the migration lock", err)
	}
	tables := func() int {
		t.Helper()
		var n int
		if err := s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := tables(); n != 0 {
		t.Errorf("a migration that never got the lock created %d tables", n)
	}
	if _, err := holder.ExecContext(ctx, "SELECT RELEASE_LOCK(CONCAT('dagflow_migrate:', DATABASE()))"); err != nil {
		t.Fatal(err)
	}
	if err := mysql.Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate once the lock is free: %v", err)
	}
	if !strings.Contains(schemaDump(t, s.DB()), "CREATE TABLE `step_runs`") {
		t.Error("no step_runs table after the migration")
	}
}

// TestUpgradeRunningAttempts: a database migrated by the version before
// 00006, with attempts in progress in the old format, upgrades to the one
// history format without losing any of it.
func TestUpgradeRunningAttempts(t *testing.T) {
	storetest.RunUpgradeRunningAttempts(t, func(t *testing.T) (persistence.Store, *sql.DB, func() error) {
		s, upgrade := atVersion(t, 5)
		return s, s.DB(), upgrade
	})
}

// TestSchemaVersion: a fresh, unmigrated database is version 0 and is
// refused with a message that says to migrate; a database migrated by a
// newer release passes (see storetest.RunSchemaVersion).
func TestSchemaVersion(t *testing.T) {
	storetest.RunSchemaVersion(t, mysql.MigrationTable, func(t *testing.T) (persistence.Store, *sql.DB, func(int64) error) {
		ctx := context.Background()
		s, err := mysql.Open(ctx, mysql.Config{DSN: testenv.MySQLDatabase(t)})
		if err != nil {
			t.Fatalf("mysql.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s, s.DB(), func(to int64) error {
			if to == 0 {
				return s.Migrate(ctx)
			}
			return mysql.MigrateTo(ctx, s.DB(), to)
		}
	})
}

package mysql_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/storetest"
)

// atVersion returns a store whose database is migrated up to version, for
// an upgrade test to write the rows of an earlier release with, and the
// function that upgrades it to the binary's schema.
//
// The store is this binary's, which reads and writes columns later
// migrations add (laterColumns): until the upgrade the database gets
// them, at their defaults in every row, and loses them again just
// before, so that their migrations add them as on a real upgrade.
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
	drop := addLaterColumns(t, s.DB(), version)
	return s, func() error {
		if err := drop(); err != nil {
			return err
		}
		return s.Migrate(ctx)
	}
}

// laterColumn is a column (or, with no column, a table: ddl creates it)
// this binary's store reads or writes that migration adds.
type laterColumn struct {
	migration          int64
	table, column, ddl string
}

var laterColumns = []laterColumn{
	{8, "workflow_runs", "definition", "VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''"},
	{12, "step_runs", "reruns", "INT NOT NULL DEFAULT 0"},
	{14, "workflow_runs", "priority", "SMALLINT NOT NULL DEFAULT 0"},
	{14, "workflow_runs", "paused_at", "DATETIME(6) NULL"},
	{14, "step_runs", "priority", "SMALLINT NOT NULL DEFAULT 0"},
	{15, "schedules", "owner", "VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'code'"},
	{15, "schedules", "deleted", "BOOLEAN NOT NULL DEFAULT FALSE"},
	{15, "schedules", "changed_at", "DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000'"},
	{16, "workflow_runs", "parent_run_id", "VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''"},
	{16, "workflow_runs", "parent_step", "VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''"},
	{13, "step_waits", "", `CREATE TABLE step_waits (run_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		step VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, PRIMARY KEY (run_id, step))`},
}

// addLaterColumns adds the laterColumns a database at version lacks and
// returns the function that drops them again.
func addLaterColumns(t *testing.T, db *sql.DB, version int64) func() error {
	t.Helper()
	ctx := context.Background()
	var added []laterColumn
	for _, c := range laterColumns {
		if c.migration <= version {
			continue
		}
		ddl := c.ddl
		if c.column != "" {
			ddl = "ALTER TABLE " + c.table + " ADD COLUMN " + c.column + " " + c.ddl
		}
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
		added = append(added, c)
	}
	return func() error {
		for _, c := range added {
			ddl := "DROP TABLE " + c.table
			if c.column != "" {
				ddl = "ALTER TABLE " + c.table + " DROP COLUMN " + c.column
			}
			if _, err := db.ExecContext(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestUpgradeDefinitions: a database at migration 00007, with runs in it,
// migrates to definitions, API keys and runs listed by idempotency key.
func TestUpgradeDefinitions(t *testing.T) {
	storetest.RunUpgradeDefinitions(t, func(t *testing.T) (persistence.Store, func() error) {
		return atVersion(t, 7)
	})
}

// update rewrites the golden files of the schema and upgrade tests (run
// against MariaDB or MySQL, whose earlier releases' migrations apply).
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// v8 holds the migrations of the last release whose 00003 and 00004
// altered the tables in ways TiDB refuses; databases it migrated must
// upgrade to the same schema as a fresh install.
func v8(t *testing.T) fs.FS {
	t.Helper()
	sub, err := fs.Sub(os.DirFS("testdata"), "migrations-v8")
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// isTiDB reports whether db is a TiDB server.
func isTiDB(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var v string
	if err := db.QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(v, "TiDB")
}

// freshDB returns a store on a new, empty database, not migrated.
func freshDB(t *testing.T) *mysql.Store {
	t.Helper()
	s, err := mysql.Open(context.Background(), mysql.Config{DSN: testenv.MySQLDatabase(t)})
	if err != nil {
		t.Fatalf("mysql.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// exactSchema describes the database's tables as information_schema
// lists them, everything a server of one kind reports: columns (type,
// nullability, default, character set, generation), index columns and
// foreign keys, sorted. The migration table is left out.
func exactSchema(t *testing.T, db *sql.DB) string {
	t.Helper()
	return strings.Join(slices.Concat(
		queryRows(t, db, `SELECT table_name, column_name, ordinal_position, column_type, is_nullable, column_default,
			character_set_name, collation_name, extra, generation_expression
			FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name <> ?`, mysql.MigrationTable),
		queryRows(t, db, `SELECT table_name, index_name, non_unique, seq_in_index, column_name
			FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name <> ?`, mysql.MigrationTable),
		queryRows(t, db, `SELECT table_name, constraint_name, referenced_table_name, delete_rule
			FROM information_schema.referential_constraints WHERE constraint_schema = DATABASE()`),
		queryRows(t, db, `SELECT table_name, engine, table_collation FROM information_schema.tables
			WHERE table_schema = DATABASE() AND table_name <> ?`, mysql.MigrationTable),
	), "\n")
}

// portableSchema describes the tables in the terms that MySQL 8, MariaDB
// and TiDB report alike: columns in order with their type (integer display
// widths dropped), nullability, character set and whether they are stored
// generated columns; indexes with their columns and uniqueness; foreign
// keys. Generation expressions and defaults are left out: each server
// prints them its own way.
func portableSchema(t *testing.T, db *sql.DB) string {
	t.Helper()
	intWidth := regexp.MustCompile(`^((tiny|small|medium|big)?int)\(\d+\)`)
	var b strings.Builder
	for _, r := range queryRows(t, db, `SELECT table_name, LPAD(ordinal_position, 2, '0'), column_name, LOWER(column_type), is_nullable,
			COALESCE(character_set_name, ''), COALESCE(collation_name, ''),
			CASE WHEN UPPER(extra) LIKE '%STORED%' OR UPPER(extra) LIKE '%PERSISTENT%' THEN 'stored generated' ELSE '' END
			FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name <> ?`, mysql.MigrationTable) {
		f := strings.Split(r, "|")
		f[3] = intWidth.ReplaceAllString(f[3], "$1")
		b.WriteString("column " + strings.Join(f, " ") + "\n")
	}
	for _, r := range queryRows(t, db, `SELECT table_name, index_name, CASE WHEN non_unique = 0 THEN 'unique' ELSE '' END,
			GROUP_CONCAT(column_name ORDER BY seq_in_index SEPARATOR ',')
			FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name <> ?
			GROUP BY table_name, index_name, non_unique`, mysql.MigrationTable) {
		b.WriteString("index " + strings.ReplaceAll(r, "|", " ") + "\n")
	}
	for _, r := range queryRows(t, db, `SELECT table_name, constraint_name FROM information_schema.referential_constraints
			WHERE constraint_schema = DATABASE()`) {
		b.WriteString("foreign key " + strings.ReplaceAll(r, "|", " ") + "\n")
	}
	return b.String()
}

// queryRows runs q and returns its rows as "|"-joined strings, sorted.
func queryRows(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		f := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				f[i] = "NULL"
			} else {
				f[i] = string(v)
			}
		}
		out = append(out, strings.Join(f, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// dumpRows returns every row of every table but the migration table and
// dagflow_meta (whose store id is random), each as its table's name and
// its values (quoted, or in hex for bytes), sorted: what must survive an
// upgrade. With only, just the columns it holds ("table.column").
func dumpRows(t *testing.T, db *sql.DB, only map[string]bool) string {
	t.Helper()
	var b strings.Builder
	for _, table := range queryRows(t, db, `SELECT table_name FROM information_schema.tables
			WHERE table_schema = DATABASE() AND table_name NOT IN (?, 'dagflow_meta')`, mysql.MigrationTable) {
		var cols []string
		for _, c := range queryRows(t, db, `SELECT LPAD(ordinal_position, 3, '0'), column_name, data_type FROM information_schema.columns
				WHERE table_schema = DATABASE() AND table_name = ?`, table) {
			f := strings.Split(c, "|")
			if only != nil && !only[table+"."+f[1]] {
				continue // a column the upgrade added
			}
			if strings.HasSuffix(f[2], "blob") || strings.HasSuffix(f[2], "binary") {
				cols = append(cols, "IFNULL(HEX(`"+f[1]+"`), 'NULL')") // bytes as bytes
			} else {
				cols = append(cols, "QUOTE(`"+f[1]+"`)")
			}
		}
		if len(cols) == 0 {
			continue // a table the upgrade added
		}
		for _, r := range queryRows(t, db, "SELECT "+strings.Join(cols, ", ")+" FROM `"+table+"`") {
			b.WriteString(table + ": " + r + "\n")
		}
	}
	return b.String()
}

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", name, diff)
	}
}

// TestFreshSchemaIsPortable: a fresh install ends with the same tables,
// columns and indexes on every server the tests run on (MariaDB in make
// test, TiDB in make test-tidb): those of testdata/schema.golden.
func TestFreshSchemaIsPortable(t *testing.T) {
	s := openStore(t)
	golden(t, "schema.golden", portableSchema(t, s.DB()))
}

// TestUpgradeFromV8: a database migrated by the release whose migrations
// 00003 and 00004 TiDB refused, with runs, steps, attempts, definitions,
// keys and nodes in it, upgrades with every row as it was, to exactly the
// schema of a fresh install. (That release's migrations never ran on
// TiDB: the test needs MariaDB or MySQL.)
func TestUpgradeFromV8(t *testing.T) {
	ctx := context.Background()
	old := freshDB(t)
	if isTiDB(t, old.DB()) {
		t.Skip("the v8 migrations stop at 00003 on TiDB (error 3106): no TiDB database was ever migrated by them")
	}
	if err := mysql.MigrateFSTo(ctx, old.DB(), v8(t), 0); err != nil {
		t.Fatalf("migrating with the v8 files: %v", err)
	}
	drop := addLaterColumns(t, old.DB(), 8)
	seedV8(t, old)
	if err := drop(); err != nil {
		t.Fatal(err)
	}
	before := dumpRows(t, old.DB(), nil)
	had := map[string]bool{}
	for _, c := range queryRows(t, old.DB(), `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = DATABASE()`) {
		had[strings.Replace(c, "|", ".", 1)] = true
	}
	if err := old.Migrate(ctx); err != nil {
		t.Fatalf("upgrading: %v", err)
	}
	if after := dumpRows(t, old.DB(), had); after != before {
		t.Errorf("rows changed by the upgrade (-before +after):\n%s", cmp.Diff(before, after))
	}
	fresh := openStore(t)
	if got, want := exactSchema(t, old.DB()), exactSchema(t, fresh.DB()); got != want {
		t.Errorf("upgraded schema differs from a fresh install's (-fresh +upgraded):\n%s", cmp.Diff(want, got))
	}
	// The upgraded store still works: a run created after the upgrade
	// completes.
	run, err := old.RunCreate(ctx, persistence.RunCreateParams{ID: "after-upgrade", Workflow: "wf", Now: seedTime, Steps: []persistence.StepSpec{{Name: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.StepClaim(ctx, persistence.StepClaimParams{RunID: run.Run.ID, Step: "a", Fence: "f", Worker: "w", LeaseUntil: seedTime.Add(time.Minute), Now: seedTime}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.StepComplete(ctx, persistence.StepCompleteParams{RunID: run.Run.ID, Step: "a", Fence: "f", Now: seedTime}); err != nil {
		t.Fatal(err)
	}
}

var seedTime = time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)

// seedV8 writes, through the store, runs in every state a step can be
// in, attempts, a definition, API keys (one revoked), a node and a
// schedule.
func seedV8(t *testing.T, s *mysql.Store) {
	t.Helper()
	ctx := context.Background()
	now := seedTime
	steps := []persistence.StepSpec{{Name: "a"}, {Name: "b", Deps: []string{"a"}}}
	for i, what := range []string{"queued", "running", "retrying", "dead", "succeeded", "delayed"} {
		p := persistence.RunCreateParams{ID: fmt.Sprintf("run-%d-%s", i, what), Workflow: "wf", Now: now, Steps: steps,
			Input: []byte(fmt.Sprintf(`{"n":%d,"s":"☃\\u0000"}`, i)), IdempotencyKey: "key-" + what}
		if what == "delayed" {
			p.StartAt = now.Add(time.Hour)
		}
		if _, err := s.RunCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
		if what == "queued" || what == "delayed" {
			continue
		}
		if _, err := s.StepClaim(ctx, persistence.StepClaimParams{RunID: p.ID, Step: "a", Fence: "f" + what, Worker: "worker-1",
			LeaseUntil: now.Add(time.Minute), Now: now}); err != nil {
			t.Fatal(err)
		}
		var err error
		switch what {
		case "retrying":
			retry := now.Add(time.Hour)
			_, err = s.StepFail(ctx, persistence.StepFailParams{RunID: p.ID, Step: "a", Fence: "f" + what, RetryAt: &retry, Error: "boom ☃", Now: now})
		case "dead":
			_, err = s.StepFail(ctx, persistence.StepFailParams{RunID: p.ID, Step: "a", Fence: "f" + what, Error: "dead ☃", Now: now,
				DeadRunStatus: persistence.RunFailed})
		case "succeeded":
			_, err = s.StepComplete(ctx, persistence.StepCompleteParams{RunID: p.ID, Step: "a", Fence: "f" + what, Output: []byte(`"out"`), Now: now})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DefinitionUpsert(ctx, persistence.Definition{Workflow: "wf", Version: "a1b2c3d4e5f60718", Declared: 1,
		Spec: []byte(`{"steps":[{"name":"a"}]}`), RegisteredAt: now}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"ci", "ops"} {
		k, err := s.APIKeyCreate(ctx, persistence.APIKey{ID: fmt.Sprintf("k%d", i), Name: name, Scope: persistence.ScopeRead,
			Hash: []byte(fmt.Sprintf("%032d", i)), CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		if name == "ops" {
			if _, err := s.APIKeyRevoke(ctx, persistence.APIKeyRevokeParams{ID: k.ID, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.NodeHeartbeat(ctx, persistence.Node{ID: "node-1", StartedAt: now, HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
}

// seedV2 writes rows as the release at migration 00002 did: runs pending,
// running and failed, steps in every status (b running with its attempt
// in a 'running' row, which 00006 moves onto the step), and attempts.
func seedV2(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO workflow_runs (id, workflow, version, status, input, output, error, idempotency_key, metadata, schedule,
			scheduled_tick, start_at, created_at, started_at, finished_at, updated_at) VALUES
			('r1', 'wf', 1, 'pending', X'00ff', NULL, NULL, X'6b31', X'7b7d', '', NULL,
				'2026-03-04 06:00:00.000001', '2026-03-04 05:00:00', NULL, NULL, '2026-03-04 05:00:00'),
			('r2', 'wf', 2, 'running', X'01', NULL, NULL, NULL, NULL, 'nightly', '2026-03-04 00:00:00',
				'2026-03-04 05:00:00', '2026-03-04 05:00:00', '2026-03-04 05:00:01', NULL, '2026-03-04 05:00:02'),
			('r3', 'other', 1, 'failed', NULL, NULL, 'déjà vu ☃', X'6b33', NULL, '', NULL,
				'2026-03-04 05:00:00', '2026-03-04 05:00:00', '2026-03-04 05:00:01', '2026-03-04 05:10:00', '2026-03-04 05:10:00')`,
		`INSERT INTO step_runs (run_id, step, seq, workflow, queue, status, deps, dependents, attempt, max_attempts, pending_deps,
			comp_attempt, fence, lease_expires_at, next_attempt_at, output, error, queued_at, started_at, finished_at, updated_at) VALUES
			('r1', 'a', 0, 'wf', 'default', 'pending', '', '', 0, 3, 0, 0, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2026-03-04 05:00:00'),
			('r2', 'a', 0, 'wf', 'default', 'queued', '', 'b', 0, 3, 0, 0, '', NULL, NULL, NULL, NULL, '2026-03-04 05:00:01', NULL, NULL, '2026-03-04 05:00:01'),
			('r2', 'b', 1, 'wf', 'q2', 'running', '', '', 1, 3, 0, 0, 'fb', '2026-03-04 05:01:00', NULL, NULL, NULL, '2026-03-04 05:00:01', '2026-03-04 05:00:02', NULL, '2026-03-04 05:00:02'),
			('r2', 'c', 2, 'wf', 'default', 'retrying', '', '', 1, 3, 0, 0, '', NULL, '2026-03-04 06:00:00', NULL, 'try again', '2026-03-04 05:00:01', '2026-03-04 05:00:02', NULL, '2026-03-04 05:00:03'),
			('r2', 'd', 3, 'wf', 'default', 'succeeded', '', '', 1, 3, 0, 0, 'fd', NULL, NULL, X'00010203', NULL, '2026-03-04 05:00:01', '2026-03-04 05:00:02', '2026-03-04 05:00:03', '2026-03-04 05:00:03'),
			('r2', 'e', 4, 'wf', 'default', 'compensating', '', '', 1, 3, 0, 1, 'fe', NULL, '2026-03-04 05:30:00', NULL, NULL, '2026-03-04 05:00:01', '2026-03-04 05:00:02', NULL, '2026-03-04 05:00:04'),
			('r3', 'a', 0, 'other', 'default', 'dead', '', '', 3, 3, 0, 0, 'fa', NULL, NULL, NULL, 'gave up ☃', '2026-03-04 05:00:01', '2026-03-04 05:00:02', '2026-03-04 05:10:00', '2026-03-04 05:10:00')`,
		`INSERT INTO step_attempts (run_id, step, kind, attempt, worker, fence, outcome, error, started_at, finished_at) VALUES
			('r2', 'b', 'step', 1, 'w1', 'fb', 'running', NULL, '2026-03-04 05:00:02', NULL),
			('r2', 'c', 'step', 1, 'w1', 'fc', 'failed', 'try again', '2026-03-04 05:00:02', '2026-03-04 05:00:03'),
			('r2', 'd', 'step', 1, 'w2', 'fd', 'succeeded', NULL, '2026-03-04 05:00:02', '2026-03-04 05:00:03'),
			('r2', 'e', 'compensation', 1, 'w2', 'ce', 'failed', 'undo failed', '2026-03-04 05:00:04', '2026-03-04 05:00:05'),
			('r3', 'a', 'step', 3, 'w1', 'fa', 'failed', 'gave up ☃', '2026-03-04 05:09:00', '2026-03-04 05:10:00')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("seeding: %v\n%s", err, q)
		}
	}
}

// TestUpgradeFromV2: a database at migration 00002 with rows in it
// upgrades through the rebuilt 00003 to the rows and the schema that the
// earlier release's ALTERs gave (testdata/upgrade-v2.golden, written from
// that release's migrations on MariaDB), and, where those migrations run
// (not on TiDB), to the very same schema and rows as a database upgraded
// by them first.
func TestUpgradeFromV2(t *testing.T) {
	ctx := context.Background()
	s := freshDB(t)
	if err := mysql.MigrateTo(ctx, s.DB(), 2); err != nil {
		t.Fatal(err)
	}
	seedV2(t, s.DB())
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("upgrading from 00002: %v", err)
	}
	rows := dumpRows(t, s.DB(), nil)
	if isTiDB(t, s.DB()) {
		if *update {
			t.Fatal("-update needs the earlier release's migrations: run it against MariaDB or MySQL")
		}
		golden(t, "upgrade-v2.golden", rows)
		return
	}
	old := freshDB(t)
	if err := mysql.MigrateFSTo(ctx, old.DB(), v8(t), 2); err != nil {
		t.Fatal(err)
	}
	seedV2(t, old.DB())
	if err := mysql.MigrateFSTo(ctx, old.DB(), v8(t), 0); err != nil {
		t.Fatalf("upgrading with the v8 files: %v", err)
	}
	if err := old.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	golden(t, "upgrade-v2.golden", dumpRows(t, old.DB(), nil))
	if want := dumpRows(t, old.DB(), nil); rows != want {
		t.Errorf("rows after the upgrade (-v8 files +these):\n%s", cmp.Diff(want, rows))
	}
	if got, want := exactSchema(t, s.DB()), exactSchema(t, old.DB()); got != want {
		t.Errorf("schema after the upgrade (-v8 files +these):\n%s", cmp.Diff(want, got))
	}
	if got, want := exactSchema(t, s.DB()), exactSchema(t, openStore(t).DB()); got != want {
		t.Errorf("schema after the upgrade differs from a fresh install's (-fresh +upgraded):\n%s", cmp.Diff(want, got))
	}
}

package storetest

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/persistence"
)

// RunSchemaVersion checks Store.SchemaVersion and SchemaVersion.Check.
// open returns a store on an empty database that was never migrated, its
// *sql.DB, and migrate, which applies the migrations up to a version (0:
// all of them); table is the store's migration table. An unmigrated
// database is version 0 and stays unmigrated (SchemaVersion only reads);
// a database behind the binary fails Check with ErrSchemaBehind and a
// message naming both versions; one at or ahead of the binary (a newer
// release migrated first) passes.
func RunSchemaVersion(t *testing.T, table string, open func(t *testing.T) (persistence.Store, *sql.DB, func(to int64) error)) {
	st, db, migrate := open(t)
	c := ctx(t)
	version := func(want int64) persistence.SchemaVersion {
		t.Helper()
		v, err := st.SchemaVersion(c)
		if err != nil {
			t.Fatalf("SchemaVersion: %v", err)
		}
		if v.Database != want || v.Binary < 2 {
			t.Fatalf("SchemaVersion = %+v, want Database %d and Binary at least 2", v, want)
		}
		return v
	}
	behind := func(v persistence.SchemaVersion, want string) {
		t.Helper()
		err := v.Check()
		if !errors.Is(err, persistence.ErrSchemaBehind) {
			t.Fatalf("Check of %+v = %v, want ErrSchemaBehind", v, err)
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "dagflow migrate") {
			t.Errorf("Check of %+v = %q, want it to say %q and how to migrate", v, err, want)
		}
	}

	v := version(0)
	behind(v, fmt.Sprintf("no dagflow schema (version 0), this binary needs version %d", v.Binary))
	var n int
	if err := db.QueryRowContext(c, "SELECT COUNT(*) FROM "+table).Scan(&n); err == nil {
		t.Errorf("SchemaVersion created %s: it must only read", table)
	}

	if err := migrate(v.Binary - 1); err != nil {
		t.Fatalf("migrating to %d: %v", v.Binary-1, err)
	}
	// The migration before the newest: numbers may have gaps (reserved
	// for migrations on other branches), so it is at most Binary-1.
	prev, err := st.SchemaVersion(c)
	if err != nil {
		t.Fatalf("SchemaVersion: %v", err)
	}
	if prev.Database < 1 || prev.Database >= v.Binary {
		t.Fatalf("SchemaVersion after migrating to %d = %+v, want a database version in 1..%d", v.Binary-1, prev, v.Binary-1)
	}
	behind(prev, fmt.Sprintf("database is at schema version %d, this binary needs %d", prev.Database, v.Binary))

	if err := migrate(0); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	if v := version(v.Binary); v.Check() != nil || v.Ahead() {
		t.Errorf("migrated: Check = %v, Ahead = %v; want nil, false", v.Check(), v.Ahead())
	}

	// A newer release migrated the database first.
	if _, err := db.ExecContext(c, "INSERT INTO "+table+" (version_id, is_applied) VALUES (?, ?)", v.Binary+1, true); err != nil {
		t.Fatal(err)
	}
	if v := version(v.Binary + 1); v.Check() != nil || !v.Ahead() {
		t.Errorf("ahead: Check = %v, Ahead = %v; want nil, true", v.Check(), v.Ahead())
	}
}

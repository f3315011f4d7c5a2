package mysql

import (
	"context"
	"database/sql"
	"io/fs"
)

// MigrateTo applies the migrations up to version, for the upgrade tests.
func MigrateTo(ctx context.Context, db *sql.DB, version int64) error {
	return migrateDB(ctx, db, version)
}

// MigrateFSTo applies the migrations of fsys up to version (0: all of
// them), for the tests that upgrade a database migrated by an earlier
// release's files.
func MigrateFSTo(ctx context.Context, db *sql.DB, fsys fs.FS, version int64) error {
	return migrateFS(ctx, db, fsys, version)
}

package mysql

import (
	"context"
	"database/sql"
)

// MigrateTo applies the migrations up to version, for the upgrade tests.
func MigrateTo(ctx context.Context, db *sql.DB, version int64) error {
	return migrateDB(ctx, db, version)
}

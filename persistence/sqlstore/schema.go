package sqlstore

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/dagflow/dagflow/persistence"
)

// SchemaVersion implements persistence.Store: the newest version in the
// migration table (Config.MigrationTable) beside Config.SchemaVersion.
// It only reads: a missing table is version 0, not created.
func (s *Store) SchemaVersion(ctx context.Context) (persistence.SchemaVersion, error) {
	v := persistence.SchemaVersion{Binary: s.schema.version}
	if s.schema.table == "" {
		return v, nil
	}
	var n int
	if err := s.db.QueryRowContext(ctx, s.d.rebind(s.d.TableExistsSQL), s.schema.table).Scan(&n); err != nil {
		return v, wrap("schema version", err)
	}
	if n == 0 {
		return v, nil
	}
	// The table name is the driver's constant, never input.
	q := "SELECT COALESCE(MAX(version_id), 0) FROM " + s.schema.table + " WHERE is_applied"
	if err := s.db.QueryRowContext(ctx, q).Scan(&v.Database); err != nil {
		return v, wrap("schema version", err)
	}
	return v, nil
}

// LatestMigration returns the newest version among the migration files
// of fsys (its top directory): files named "<version>_<name>.sql".
func LatestMigration(fsys fs.FS) (int64, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return 0, fmt.Errorf("sqlstore: migrations: %w", err)
	}
	var latest int64
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if e.IsDir() || !ok || !strings.HasSuffix(name, ".sql") {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v <= 0 {
			return 0, fmt.Errorf("sqlstore: migration file %q does not start with a positive version number", name)
		}
		latest = max(latest, v)
	}
	if latest == 0 {
		return 0, fmt.Errorf("sqlstore: no migration files")
	}
	return latest, nil
}

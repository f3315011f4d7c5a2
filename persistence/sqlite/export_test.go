package sqlite

import "context"

// MigrateTo applies the migrations up to version, for the upgrade tests.
func (s *Store) MigrateTo(ctx context.Context, version int64) error { return s.migrate(ctx, version) }

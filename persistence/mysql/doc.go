// Package mysql is dagflow's production store: persistence.Store and
// persistence.TxStore on MySQL 8 or MariaDB 10.6+ (InnoDB), through the
// shared SQL implementation in persistence/sqlstore.
//
// Open forces the connection settings the store relies on, whatever the
// DSN says: parseTime with UTC times, utf8mb4 with binary collation (so
// 4-byte UTF-8 round-trips), clientFoundRows (a no-op UPDATE of a matched
// row still counts as matched, which fencing relies on), strict SQL mode and
// READ COMMITTED transactions.
//
// The schema is versioned by embedded migrations (goose) applied with
// Migrate, or at Open with AutoMigrate. Concurrent migrations from many
// processes are serialized by a named lock (GET_LOCK) per database.
package mysql

// Package sqlite is dagflow's embedded store: persistence.Store and
// persistence.TxStore on a SQLite file (or ":memory:"), through the shared
// SQL implementation in persistence/sqlstore, with the pure-Go
// modernc.org/sqlite driver (no cgo).
//
// Connections use WAL, a busy timeout, foreign keys and IMMEDIATE
// transactions; the store also runs its write transactions one at a time,
// so concurrent writers in one process queue rather than fail with
// SQLITE_BUSY, and writers in other processes wait up to the busy timeout.
// A ":memory:" database lives in a single connection.
package sqlite

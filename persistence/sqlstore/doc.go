// Package sqlstore is the one SQL implementation of persistence.Store,
// shared by the MySQL/MariaDB and SQLite drivers.
//
// Both drivers run the same queries through sqlx; what differs between the
// databases lives in a small Dialect value: row locking (SELECT ... FOR
// UPDATE on InnoDB; SQLite has one writer, so write transactions are
// serialized instead), time encoding, upsert and insert-or-ignore syntax,
// duplicate-key and retryable-error detection, and placeholder rebinding.
//
// Every value reaches the database through placeholders. Table schemas are
// owned by the drivers' embedded migrations; this package only assumes the
// column names they create.
//
// # Concurrency
//
// Each Store method is one transaction. On InnoDB, transactions that
// change a step lock the rows they read with FOR UPDATE and run at READ
// COMMITTED (the drivers set it per session); a deadlock victim is retried
// a few times. On SQLite, write transactions begin IMMEDIATE and are
// serialized by an in-process semaphore, so concurrent writers queue
// instead of failing with SQLITE_BUSY.
package sqlstore

// Package sqlstore is the one SQL implementation of persistence.Store,
// shared by the MySQL/MariaDB and SQLite drivers.
//
// Both drivers run the same queries through sqlx; what differs between the
// databases lives in a small Dialect value: row locking (SELECT ... FOR
// UPDATE on InnoDB; SQLite has one writer, so write transactions are
// serialized instead), time encoding, upsert and insert-or-ignore syntax,
// duplicate-key and retryable-error detection, and placeholder rebinding.
//
// Where sqlx earns its place: StructScan fills the many small row
// structs (schedules, attempts, runs and steps read with other columns)
// by their db tags, in place of a hand-written Scan per query. The two
// scans on the hot path (whole step rows and whole run rows, read by
// every claim and completion batch) are written out by hand (scan.go):
// reflection per row showed in CPU profiles. Dialect.BindType and sqlx's
// Rebind are kept for a database with other placeholders; MySQL and
// SQLite both take '?', so today they change nothing and cost a compare.
// Nothing else of sqlx is used: transactions and statements are
// database/sql's, so that a caller's *sql.Tx works as a querier.
//
// The files follow the store's concerns: claim.go (claims),
// complete.go (completions), create.go (run creation), write.go (a
// batch's grouped row writes), history.go (attempts), statemachine.go
// (the rules every path applies: which step may be claimed, the claim's
// row transition, the claim budget, what a claimed step may read),
// runs.go and steps.go (single-row calls and listings), steplist.go (the
// steps due for work, and the dead), lifecycle.go (reopen, delete),
// schedules.go, nodes.go (the store's id, the node registry),
// definitions.go (workflow definitions), apikeys.go (the HTTP API's keys).
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

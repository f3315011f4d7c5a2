// Package seed writes a large history of finished runs straight into a
// MySQL database of dagflow's schema, for the benchmark's --history and for
// capacity tests: what a store looks like after months of use, made in
// seconds instead of months.
//
// It is a harness, not part of the product: it writes the tables with plain
// SQL on the store's *sql.DB (mysql.Store.DB) rather than through the
// engine, so the rows are only as consistent as the engine would have left
// them, and nothing is dispatched.
package seed

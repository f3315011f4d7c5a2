// Package bench is the end-to-end benchmark behind `dagflow bench`: an
// engine runs the order workflow (reserve -> notify || points -> ship) with
// no-op handlers against a Redis and a MySQL server (or miniredis and
// SQLite), first as fast as it can, then at a fixed offered rate, and the
// package reports throughput, dispatch and run latencies, the servers' work
// per step and Redis memory per queued step.
//
// The bench works in a database and under a Redis key prefix of its own,
// and removes both when it ends. Config says what to measure (RegisterFlags
// gives it the command's flags), Run measures, and Result.Print writes the
// table and the JSON line. docs/benchmarks.md explains every figure and
// keeps the measurements made with it; the seed subpackage writes the
// history of finished runs that --history asks for.
//
// It is a harness, not part of the product: the engine, the stores and the
// queue know nothing of it.
package bench

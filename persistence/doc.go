// Package persistence holds dagflow's durable vocabulary: the records of
// workflow runs, step runs, attempts, schedules, workflow definitions and
// API keys, their statuses, the errors callers branch on, and the Store
// interface that every storage driver implements.
//
// It imports only the standard library, so drivers (persistence/mysql,
// persistence/sqlite) and the engine depend on it and never on each other.
// The Store is the source of truth: every transition of a run or a step is
// committed through it before Redis is told anything.
package persistence

// Package names holds the one rule for dagflow's names: workflow, step,
// queue and schedule names are a letter followed by up to 63 letters,
// digits, '_' or '-' (^[A-Za-z][A-Za-z0-9_-]{0,63}$).
//
// The names end up in MySQL key columns and in Redis keys
// ("dagflow:{<queue>}:..."), so they hold no '/', '{', '}', ':' or
// spaces, and they are ASCII so that every index over them stays small and
// collation-free. dag, queue and the stores each check names with [Valid]
// and report a bad one with their own sentinel or typed error; this
// package imports only the standard library, so that any of them may use
// it without depending on another.
package names

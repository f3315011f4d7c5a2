// Package faults is dagflow's fault-injection suite: it proves the
// engine's guarantees (no task lost, no step's success recorded twice, no
// effect made twice) against the real Redis and MariaDB while workers are
// killed, frozen and cut off.
//
// The tests run workers as child processes (the test binary re-executed
// with -test.run=^TestWorkerProcess$), so SIGKILL, SIGSTOP and SIGCONT are
// real, and put a [Proxy] in front of MariaDB or Redis to cut connections,
// add latency or drop the reply of a committed transaction. Every handler
// records its invocation and writes its external effect into an effects
// table keyed by the step's idempotency key; after every scenario an
// invariant checker reads the store, the effects and Redis.
//
// The package's only exported API is the proxy, which other tests may
// reuse.
package faults

// Package clocktest is dagflow's one fake clock: a time that moves only
// when told to. The queue's, the scheduler's and the engine's tests use
// it, and the public test kit exposes it as enginetest.FakeClock. It
// imports only the standard library, so that any package's tests can use
// it without importing the engine.
package clocktest

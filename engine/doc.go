// Package engine runs dagflow workflows: it starts runs (Trigger,
// TriggerTx, and Publish/PublishTx for the workflows subscribed to an
// event), dispatches ready steps through the Redis queue, runs their
// handlers on workers with fenced claims and heartbeats, retries failures
// with backoff and jitter, dead-letters steps that keep failing, undoes the
// completed steps of a failed run by running their compensations in reverse
// dependency order (saga), and reconciles Redis with the store so that a
// lost Redis never loses a run.
//
// The store (package persistence) is the source of truth; Redis (package
// queue) only says which step to try next. Delivery is at-least-once; the
// store's fences make sure a step's success is recorded once, and each step
// gets a stable idempotency key ("<run id>/<step>") for the services it
// calls.
//
// With Config.Codec (package codec; codec/aesgcm encrypts), run inputs,
// step outputs and error texts are encoded before they reach the store
// and decoded where the engine reads them, so the database holds no
// payload in clear.
package engine

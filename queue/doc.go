// Package queue is dagflow's dispatch queue: a reliable, lease-based queue
// of small task ids on Redis (single node, Sentinel or Cluster), driven by
// Lua scripts so that every state change is atomic.
//
// A task is ready, delayed (until a due time) or leased (by a consumer,
// until a lease deadline). Enqueue is idempotent per id while the task is
// in the queue. Dequeue leases ready tasks and raises their delivery
// count; the consumer then Acks (done), Retries (delayed again), Releases
// (handed back unprocessed) or Extends the lease while it works. A lease
// that runs out makes the task ready again, so delivery is at least once;
// dagflow fences the real work in its database.
//
// Redis is a rebuildable index here: payloads and the truth about each
// step live in the database, and a reconciler re-enqueues what Redis lost.
// The queue has no dead state of its own: a step that keeps failing (or
// keeps losing its worker, counted by the delivery count) is dead-lettered
// in the store, and its consumer Acks the task. One dead-letter list, the
// store's, is what operators see, retry and discard (engine.DeadLetters).
// An index entry left in the dead state by an older version of this
// package is treated as absent; enqueue overwrites it.
//
// # Layout
//
// All keys of a queue share the hash tag "{<queue>}" (see keys.go), so
// each script touches one Cluster slot. Task states live in a per-queue
// index split over small hashes, which keeps a pending task to about 105
// bytes of Redis memory with 45-byte ids.
//
// # Blocking
//
// A Dequeue that finds nothing sets the queue's waiting flag and waits on
// the Queue's single pub/sub connection; the next script that makes tasks
// ready publishes on the queue's channel while the flag is set. No
// connection is held per blocked consumer, context cancellation is
// immediate, and it works the same on miniredis. On a Redis Cluster the
// wake-ups use sharded pub/sub (SSUBSCRIBE on the shard that owns the
// queue's slot, SPUBLISH from the scripts, which run in that slot), one
// connection per queue waited on, so a wake-up does not travel to every
// node; the flag's value tells the scripts which kind to publish.
//
// # Access
//
// A Redis ACL user for the queue needs the commands of Commands on the
// keys and channels under its prefix (on a Redis Cluster also those of
// ClusterCommands), and nothing else:
//
//	user dagflow on >password resetkeys ~dagflow:* resetchannels &dagflow:* -@all +eval +evalsha +subscribe +ping ...
//
// Probe checks, on throwaway keys under the prefix, that the client may
// do all of it, and names what Redis refused.
package queue

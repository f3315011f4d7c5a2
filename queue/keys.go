package queue

// Every Redis key and channel name of the package is built here. All keys
// of one queue carry the hash tag "{<queue>}", so each script touches a
// single Cluster slot.
//
//	<prefix>:{<queue>}:ready     list: ready task ids, consumers pop from the left
//	<prefix>:{<queue>}:delayed   zset: id -> due time, unix ms
//	<prefix>:{<queue>}:leased    zset: id -> lease deadline, unix ms
//	<prefix>:{<queue>}:i:<n>     hash: id -> deliveries*4 + state (n < 2048, see lua/common.lua)
//	<prefix>:{<queue>}:waiting   string: set while a consumer waits for work
//	<prefix>:{<queue>}:notify    pub/sub channel: "n tasks became ready"
//	<prefix>:{<queue>}:ready:<p> list: ready task ids of priority p != 0
//	<prefix>:{<queue>}:levels    zset: the priorities p != 0 with ready tasks
//	<prefix>:{<queue>}:pri       hash: id -> priority, for tasks of priority != 0
//	<prefix>:{<queue>}:paused    string: set while the queue is paused
//	<prefix>:{<queue>}:bucket    hash: the rate limit's token bucket (see lua/limits.lua)
//	<prefix>:{<queue>}:lim       hash: id -> the task's own limit (TaskLimit, see lua/keyed.lua)
//	<prefix>:{<queue>}:k:<key>   set: tasks holding a slot of key (lua/keyed.lua)
//	<prefix>:{<queue>}:kw:<key>  zset: tasks parked until a slot of key frees, by when they parked
//	<prefix>:{<queue>}:rb:<name> hash: a task limit's token bucket
//	<prefix>:{<queue>}:routed    set: kinds with routed tasks (see Route, lua/routed.lua)
//	<prefix>:{<queue>}:r:<kind>  list: the routed ready ids of kind
//	<prefix>:{<queue>}:rk        hash: id -> kind, while routed
//
// The scripts derive ready:<p>, levels, pri and paused from the ready
// list's name (see lua/priority.lua); paused is built here too, for Pause
// and Resume, and bucket for the dequeue of a rate-limited queue.
//
// Older versions also kept a dead set, "<prefix>:{<queue>}:dead" and
// ":reasons"; nothing reads them now (dead letters live in the store), and
// an operator may DEL them.
type keys struct {
	ready, delayed, leased, index, waiting, channel, paused, bucket, lim string
}

func (q *Queue) keys(queue string) keys {
	base := q.prefix + ":{" + queue + "}:"
	return keys{
		ready:   base + "ready",
		delayed: base + "delayed",
		leased:  base + "leased",
		index:   base + "i:",
		waiting: base + "waiting",
		channel: base + "notify",
		paused:  base + "paused",
		bucket:  base + "bucket",
		lim:     base + "lim",
	}
}

// pattern matches every key of queue (for tests and tools that SCAN).
func (q *Queue) pattern(queue string) string {
	return q.prefix + ":{" + queue + "}:*"
}

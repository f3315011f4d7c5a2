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
//	<prefix>:{<queue>}:bucket    hash: the rate limit's token bucket (see lua/limits.lua)
//
// Older versions also kept a dead set, "<prefix>:{<queue>}:dead" and
// ":reasons"; nothing reads them now (dead letters live in the store), and
// an operator may DEL them.
type keys struct {
	ready, delayed, leased, index, waiting, channel, bucket string
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
		bucket:  base + "bucket",
	}
}

// pattern matches every key of queue (for tests and tools that SCAN).
func (q *Queue) pattern(queue string) string {
	return q.prefix + ":{" + queue + "}:*"
}

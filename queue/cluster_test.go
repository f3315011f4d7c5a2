package queue

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// TestCluster runs the suite on a 3-master Redis Cluster of its own.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped under -short")
	}
	addrs := testenv.StartCluster(t, 3, 0).Addrs
	t.Run("QueuesSpreadOverNodes", func(t *testing.T) {
		// The suite's queues must not all sit on one master, or the
		// cross-slot paths (priority, multi-queue waits) go untested.
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		defer c.Close()
		q := &Queue{prefix: "dagflow"}
		nodes := map[string]bool{}
		for _, name := range []string{"jobs", "other", "high", "low", "qa", "qb"} {
			m, err := c.MasterForKey(context.Background(), q.keys(name).ready)
			if err != nil {
				t.Fatal(err)
			}
			nodes[m.Options().Addr] = true
		}
		if len(nodes) < 2 {
			t.Fatalf("suite queues all on %v", nodes)
		}
	})
	t.Run("Probe", func(t *testing.T) {
		// The probe's keys share a slot; its wake-up crosses nodes.
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { c.Close() })
		if err := newTestQueue(t, c, Config{}).Probe(context.Background()); err != nil {
			t.Fatalf("Probe on Cluster: %v", err)
		}
	})
	t.Run("WakeUpAcrossNodes", func(t *testing.T) {
		testWakeUpAcrossNodes(t, addrs)
	})
	runSuite(t, func(t testing.TB) redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { c.Close() })
		return c
	})
}

// testWakeUpAcrossNodes: a consumer's one pub/sub connection sits on the
// master of the first queue it waited on; a wake-up for a queue whose
// slot another master holds is published there (by the enqueue script,
// PUBLISH) and must still reach it, within milliseconds, not at the
// PollInterval. Classic PUBLISH on a Cluster is forwarded to every node
// over the cluster bus, so the subscriber's node does not matter.
func testWakeUpAcrossNodes(t *testing.T, addrs []string) {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Close() })
	prefix := testenv.KeyPrefix(t)
	q := newTestQueue(t, c, Config{Prefix: prefix, PollInterval: time.Minute})
	producer := newTestQueue(t, c, Config{Prefix: prefix})
	master := func(name string) string {
		m, err := c.MasterForKey(ctx, q.keys(name).ready)
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	a, b := "jobs", ""
	for _, name := range []string{"other", "high", "low", "qa", "qb", "qc"} {
		if master(name) != master(a) {
			b = name
			break
		}
	}
	if b == "" {
		t.Fatalf("no queue name on another master than %q's", a)
	}
	// The first wait opens the pub/sub connection, on a's master.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := q.Dequeue(short, DequeueParams{Queues: []string{a}, Lease: time.Minute}); err == nil {
		t.Fatal("dequeue of the empty queue returned a task")
	}
	cancel()
	got := make(chan error, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		tasks, err := q.Dequeue(dctx, DequeueParams{Queues: []string{b}, Lease: time.Minute})
		if err == nil && len(tasks) != 1 {
			t.Errorf("dequeue of %s: %d tasks, want 1", b, len(tasks))
		}
		got <- err
	}()
	bch := q.keys(b).channel
	// Once b's channel is subscribed, the subscriber is on a's master and
	// not on b's, where the enqueue script publishes.
	testenv.Eventually(t, 10*time.Second, func() bool {
		return slices.Contains(channelsOn(t, master(a), bch), bch)
	}, "%s subscribed on %s", bch, master(a))
	if slices.Contains(channelsOn(t, master(b), bch), bch) {
		t.Fatalf("%s is subscribed on %s too: the test does not cross nodes", bch, master(b))
	}
	time.Sleep(100 * time.Millisecond) // the consumer's scripts set the waiting flag
	start := time.Now()
	if _, err := producer.Enqueue(ctx, b, Item{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("dequeue of %s: %v", b, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("woken %v after the enqueue on another node, want well under the PollInterval (1m)", d)
	} else {
		t.Logf("queue %s on %s, subscriber on %s: woken %v after the enqueue", b, master(b), master(a), d)
	}
}

// channelsOn lists the pub/sub channels matching pattern that have a
// subscriber connected to the node at addr.
func channelsOn(t *testing.T, addr, pattern string) []string {
	n := redis.NewClient(&redis.Options{Addr: addr})
	defer n.Close()
	chs, err := n.PubSubChannels(context.Background(), pattern).Result()
	if err != nil {
		t.Fatalf("PUBSUB CHANNELS on %s: %v", addr, err)
	}
	return chs
}

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

// testWakeUpAcrossNodes: on a Cluster a consumer waiting on queues of two
// masters listens to each queue's channel with sharded pub/sub on the
// master that owns the queue's slot (and to no classic channel), and a
// wake-up published there by the enqueue script reaches it within
// milliseconds, not at the PollInterval.
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
	// The first wait subscribes to a's channel, the second to b's.
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
	ach, bch := q.keys(a).channel, q.keys(b).channel
	testenv.Eventually(t, 10*time.Second, func() bool {
		return slices.Contains(channelsOn(t, master(a), ach, true), ach) && slices.Contains(channelsOn(t, master(b), bch, true), bch)
	}, "%s and %s subscribed on their own shards", ach, bch)
	for _, addr := range addrs {
		if chs := channelsOn(t, addr, prefix+":*", false); len(chs) > 0 {
			t.Errorf("classic channels subscribed on %s: %v", addr, chs)
		}
	}
	waitWaiting(t, c, q.keys(b).waiting)
	start := time.Now()
	if _, err := producer.Enqueue(ctx, b, Item{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("dequeue of %s: %v", b, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("woken %v after the enqueue, want well under the PollInterval (1m)", d)
	} else {
		t.Logf("queue %s on %s: woken %v after the enqueue", b, master(b), d)
	}
}

// waitWaiting waits until a consumer set the waiting flag key: it is
// asleep, and the next enqueue publishes its wake-up.
func waitWaiting(t *testing.T, c redis.UniversalClient, flag string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() bool {
		n, err := c.Exists(context.Background(), flag).Result()
		return err == nil && n == 1
	}, "the waiting flag %s set", flag)
}

// channelsOn lists the pub/sub channels matching pattern that have a
// subscriber connected to the node at addr: shard channels (PUBSUB
// SHARDCHANNELS) or classic ones.
func channelsOn(t *testing.T, addr, pattern string, shard bool) []string {
	n := redis.NewClient(&redis.Options{Addr: addr})
	defer n.Close()
	cmd := n.PubSubChannels(context.Background(), pattern)
	if shard {
		cmd = n.PubSubShardChannels(context.Background(), pattern)
	}
	chs, err := cmd.Result()
	if err != nil {
		t.Fatalf("PUBSUB on %s: %v", addr, err)
	}
	return chs
}

// TestClusterWakeUpAfterFailover: the master that owns a queue's slot
// fails over to its replica, killed (the subscription's connection
// breaks) or by a manual failover (the old master, now a replica, ends
// the shard subscription itself). The consumer's shard subscription
// moves to the new master, and a wake-up published there reaches it
// within milliseconds, not at the PollInterval.
func TestClusterWakeUpAfterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped under -short")
	}
	for _, how := range []string{"killed", "manual failover"} {
		t.Run(how, func(t *testing.T) {
			cl := testenv.StartClusterWith(t, 3, 1, testenv.RedisOptions{Config: []string{"cluster-node-timeout 1000"}})
			ctx := context.Background()
			c := cl.Client(t)
			prefix := testenv.KeyPrefix(t)
			q := newTestQueue(t, c, Config{Prefix: prefix, PollInterval: time.Minute})
			producer := newTestQueue(t, c, Config{Prefix: prefix})
			k := q.keys("jobs")
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			q.Dequeue(short, DequeueParams{Queues: []string{"jobs"}, Lease: time.Minute})
			cancel()
			m, err := c.MasterForKey(ctx, k.ready)
			if err != nil {
				t.Fatal(err)
			}
			var master *testenv.RedisServer
			for _, n := range cl.Nodes {
				if n.Addr == m.Options().Addr {
					master = n
				}
			}
			testenv.Eventually(t, 10*time.Second, func() bool {
				return slices.Contains(channelsOn(t, master.Addr, k.channel, true), k.channel)
			}, "%s subscribed on %s", k.channel, master.Addr)
			slot, err := c.ClusterKeySlot(ctx, k.ready).Result()
			if err != nil {
				t.Fatal(err)
			}
			failStart := time.Now()
			var promoted *testenv.RedisServer
			if how == "killed" {
				promoted, err = cl.KillMaster(master)
			} else {
				promoted, err = cl.FailOver(master)
			}
			if err != nil {
				t.Fatal(err)
			}
			// For a client the failover is over once every node's slot map
			// names the promoted master: how long that takes on this box
			// (seconds when it is busy) is what the resubscription's
			// deadline follows, not a fixed time.
			slotOwnedEverywhere(t, cl, slot, promoted, 2*time.Minute)
			converged := time.Now()
			// From then on the notifier needs at most the attempt under
			// way (unconfirmed within subscribeWait), its backoff, one
			// more such round (its slot map reread may have begun before
			// the convergence), the two quiet spells in which it rereads
			// the map and finds it subscribed on a replica, and its own
			// subscription, plus slack for a loaded box.
			resubWithin := 2*(subscribeWait+shardBackoffMax) + 2*shardPing + subscribeWait + 10*time.Second
			// The producer's calls to the queue's slot learn the new slot
			// map, as a node's scripts do.
			// (A subscription made with a stale map may land on the old
			// master, now a replica, which confirms it and passes on no
			// wake-up: the notifier must move it.)
			for !slices.Contains(channelsOn(t, promoted.Addr, k.channel, true), k.channel) {
				producer.Stats(ctx, "jobs")
				if time.Since(converged) > resubWithin {
					var where []string
					for _, n := range cl.Nodes {
						if n.Running() && len(channelsOn(t, n.Addr, k.channel, true)) > 0 {
							where = append(where, n.Addr)
						}
					}
					t.Fatalf("%s not subscribed again on the promoted %s within %v of the slot map converging (%v after the failover began); subscribed on %v",
						k.channel, promoted.Addr, resubWithin, converged.Sub(failStart), where)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("%s: slot map converged %v after the failover began; subscribed again on the promoted master %v later (allowed %v)",
				how, converged.Sub(failStart).Round(time.Millisecond), time.Since(converged).Round(time.Millisecond), resubWithin)
			got := make(chan error, 1)
			go func() {
				// Bounds the enqueue's retries below too.
				dctx, cancel := context.WithTimeout(ctx, 45*time.Second)
				defer cancel()
				_, err := q.Dequeue(dctx, DequeueParams{Queues: []string{"jobs"}, Lease: time.Minute})
				got <- err
			}()
			waitWaiting(t, c, k.waiting)
			start := time.Now()
			testenv.Eventually(t, 30*time.Second, func() bool {
				_, err := producer.Enqueue(ctx, "jobs", Item{ID: "t1"})
				return err == nil
			}, "an enqueue on the promoted master")
			if err := <-got; err != nil {
				t.Fatalf("dequeue after the failover: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("woken %v after the enqueue, want well under the PollInterval (1m)", d)
			} else {
				t.Logf("%s: %s promoted; woken %v after the enqueue", how, promoted.Addr, d)
			}
		})
	}
}

package queue

import (
	"context"
	"testing"

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
	runSuite(t, func(t testing.TB) redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { c.Close() })
		return c
	})
}

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// Scenario 3 on a Redis Cluster of 3 masters and 3 replicas, with worker
// processes and the triggering engine as cluster clients: mid-run, every
// master loses everything (FLUSHALL on each), or the master that holds
// the queue's slot is SIGKILLed and its replica promoted (writes it had
// not replicated are lost). The reconcilers rebuild what Redis lost from
// MySQL; every run finishes and every step succeeds once.
func TestRedisClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped under -short")
	}
	for _, how := range []string{"flushall every master", "master killed, replica promoted"} {
		t.Run(how, func(t *testing.T) {
			// A short node timeout: the surviving nodes count the killed
			// master failed in a second (the promotion itself is forced).
			cl := testenv.StartClusterWith(t, 3, 1, testenv.RedisOptions{Config: []string{"cluster-node-timeout 1000"}})
			c := newCluster(t, clusterOptions{RedisCluster: cl.Addrs})
			c.start(2, nil)
			ids := c.triggerMany(30, plan{SleepMS: map[string]int{"b": 100, "c": 50}})
			testenv.Eventually(t, 30*time.Second, func() bool { return c.countSucceeded() >= 30 }, "some progress")
			before := c.countSucceeded()
			if how == "flushall every master" {
				cl.FlushAll(t)
			} else {
				ready := c.prefix + ":{default}:ready"
				m, err := c.rdb.(*redis.ClusterClient).MasterForKey(context.Background(), ready)
				if err != nil {
					t.Fatal(err)
				}
				var master *testenv.RedisServer
				for _, n := range cl.Nodes {
					if n.Addr == m.Options().Addr {
						master = n
					}
				}
				if master == nil {
					t.Fatalf("the master of %s, %s, is not a node of the cluster %v", ready, m.Options().Addr, cl.Addrs)
				}
				promoted, err := cl.KillMaster(master)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("killed master %s; %s promoted", master.Addr, promoted.Addr)
			}
			lost := time.Now()
			// Runs triggered after the event go through the changed cluster.
			for i := range 10 {
				ids = append(ids, c.trigger(wfChain, plan{N: 100 + i, SleepMS: map[string]int{"b": 50}}))
			}
			runs := checkInvariants(t, c, ids, 90*time.Second)
			logRecovery(t, fmt.Sprintf("redis cluster, %s after %d of %d steps: -> all runs finished", how, before, 4*len(ids)), time.Since(lost))
			assertAllSucceeded(t, runs)
		})
	}
}

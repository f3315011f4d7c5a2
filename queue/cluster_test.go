package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
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
	addrs := startCluster(t, 3)
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

// startCluster starts n redis-server processes in cluster mode on
// loopback, joins them as masters and stops them when the test ends.
func startCluster(t *testing.T, n int) []string {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, bin, err)
		}
	}
	dir := t.TempDir()
	var addrs []string
	for range n {
		port := clusterPort(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
			"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitPing(t, addr)
		addrs = append(addrs, addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		testenv.Eventually(t, 20*time.Second, func() bool {
			info, err := c.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		}, "cluster state ok on %s", addr)
		c.Close()
	}
	return addrs
}

// clusterPort picks a free loopback port whose cluster bus port (+10000)
// is free too.
func clusterPort(t *testing.T) int {
	for range 100 {
		p := 20000 + rand.IntN(20000)
		if portFree(p) && portFree(p+10000) {
			return p
		}
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func waitPing(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	testenv.Eventually(t, 10*time.Second, func() bool {
		return c.Ping(context.Background()).Err() == nil
	}, "redis-server on %s answers", addr)
}

package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a Redis Cluster of private redis-server processes on
// loopback, owned by one test.
type RedisCluster struct {
	// Addrs are every node's address, masters first.
	Addrs []string
	// Nodes are the servers, in the order of Addrs.
	Nodes []*RedisServer
	// Masters is how many of Nodes were created as masters (a failover
	// since may have moved the role: see MasterNodes).
	Masters int
}

// ClusterNodeTimeout is the cluster-node-timeout of the clusters
// StartCluster starts: how long a master may be silent before its
// replicas may take over. StartClusterWith's opts.Config may set another
// ("cluster-node-timeout 1000"); the last line wins.
const ClusterNodeTimeout = 5 * time.Second

// StartCluster starts masters*(1+replicasPerMaster) redis-server processes
// in cluster mode, joins them (each master with replicasPerMaster
// replicas), waits until every node says the cluster is ok with all 16384
// slots covered and every replica is attached, and stops them when the
// test ends.
func StartCluster(t testing.TB, masters, replicasPerMaster int) *RedisCluster {
	t.Helper()
	return StartClusterWith(t, masters, replicasPerMaster, RedisOptions{})
}

// StartClusterWith is StartCluster with every node started with opts
// (ACL users, say); opts.Port and opts.TLS must be unset, and the default
// user must keep its rights, which the cluster's creation uses.
func StartClusterWith(t testing.TB, masters, replicasPerMaster int, opts RedisOptions) *RedisCluster {
	t.Helper()
	if opts.Port != 0 || opts.TLS != nil || opts.Password != "" {
		t.Fatal("testenv: StartClusterWith: Port, TLS and Password are not supported")
	}
	if masters < 3 {
		t.Fatalf("testenv: StartCluster: %d masters; Redis Cluster needs at least 3", masters)
	}
	if replicasPerMaster < 0 {
		t.Fatalf("testenv: StartCluster: %d replicas per master is negative", replicasPerMaster)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		Unavailable(t, "redis-cli binary", err)
	}
	c := &RedisCluster{Masters: masters}
	for range masters * (1 + replicasPerMaster) {
		port := clusterPort(t)
		o := opts
		o.Port = port
		o.Config = append([]string{
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout " + strconv.Itoa(int(ClusterNodeTimeout.Milliseconds())),
		}, opts.Config...)
		s := StartRedisWith(t, o)
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	// redis-cli makes the first nodes the masters.
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	cmd := exec.Command("redis-cli", args...)
	dieWithTest(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.wait(t)
	return c
}

// wait waits until every node reports a healthy cluster of all nodes and
// every replica's link to its master is up.
func (c *RedisCluster) wait(t testing.TB) {
	t.Helper()
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_ok":       "16384",
		"cluster_known_nodes":    strconv.Itoa(len(c.Nodes)),
		"cluster_slots_assigned": "16384",
	}
	for i, s := range c.Nodes {
		rc := redis.NewClient(s.ClientOptions())
		waitFor(t, 30*time.Second, "cluster node "+s.Addr+" ready", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			info, err := rc.ClusterInfo(ctx).Result()
			if err != nil {
				return false, err.Error()
			}
			fields := infoFields(info)
			for k, v := range want {
				if fields[k] != v {
					return false, k + ":" + fields[k]
				}
			}
			if i < c.Masters {
				return true, ""
			}
			repl, err := rc.Info(ctx, "replication").Result()
			if err != nil {
				return false, err.Error()
			}
			link := infoFields(repl)["master_link_status"]
			return link == "up", "master_link_status:" + link
		})
		rc.Close()
	}
}

// Client returns a cluster client of the cluster, closed when the test
// ends.
func (c *RedisCluster) Client(t testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// infoFields parses the "key:value" lines of an INFO or CLUSTER INFO reply.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// clusterPort picks a free loopback port whose cluster bus port (+10000)
// is free too, both below Linux's ephemeral range (32768 and up by
// default): a bus port there can be taken by an outgoing connection
// between the check and the server's start, and the node then refuses to
// start ("Failed listening on port ... (cluster)"), as seen under load.
func clusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := 10000 + rand.IntN(12000)
		if portFree(p) && portFree(p+10000) {
			return p
		}
	}
	t.Fatal("testenv: no free port pair for a cluster node")
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

// URL returns the nodes as a go-redis cluster URL:
// redis://<first node>?addr=<other nodes>.
func (c *RedisCluster) URL() string {
	q := url.Values{"addr": c.Addrs[1:]}
	return (&url.URL{Scheme: "redis", Host: c.Addrs[0], RawQuery: q.Encode()}).String()
}

// MasterNodes returns the running nodes that say they are masters, in the
// order of Nodes.
func (c *RedisCluster) MasterNodes(t testing.TB) []*RedisServer {
	t.Helper()
	var ms []*RedisServer
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		if role := c.role(t, s); role == "master" {
			ms = append(ms, s)
		}
	}
	return ms
}

// role is what ROLE's first field says node s is: master or slave.
func (c *RedisCluster) role(t testing.TB, s *RedisServer) string {
	t.Helper()
	rc := redis.NewClient(s.ClientOptions())
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := rc.Do(ctx, "ROLE").Slice()
	if err != nil || len(r) == 0 {
		t.Fatalf("testenv: ROLE on cluster node %s: %v", s.Addr, err)
	}
	role, _ := r[0].(string)
	return role
}

// FlushAll runs FLUSHALL on every running master (their replicas follow):
// the whole cluster loses its data.
func (c *RedisCluster) FlushAll(t testing.TB) {
	t.Helper()
	for _, s := range c.MasterNodes(t) {
		rc := redis.NewClient(s.ClientOptions())
		err := rc.FlushAll(context.Background()).Err()
		rc.Close()
		if err != nil {
			t.Fatalf("testenv: FLUSHALL on cluster master %s: %v", s.Addr, err)
		}
	}
}

// KillMaster SIGKILLs master (a running master node of c) and promotes a
// replica of it with CLUSTER FAILOVER TAKEOVER (the replica's own
// failover may come first after cluster-node-timeout; either way one
// takes over), then waits until every surviving node reports the cluster
// ok with all slots covered. It returns the promoted replica. The killed
// node stays down. It may be called from any goroutine: it returns an
// error instead of failing the test.
func (c *RedisCluster) KillMaster(master *RedisServer) (*RedisServer, error) {
	return c.failover(master, true)
}

// FailOver moves master's role to one of its replicas with a manual
// CLUSTER FAILOVER (master alive, replication caught up first; the old
// master becomes a replica), then waits as KillMaster does. It returns
// the new master.
func (c *RedisCluster) FailOver(master *RedisServer) (*RedisServer, error) {
	return c.failover(master, false)
}

func (c *RedisCluster) failover(master *RedisServer, kill bool) (*RedisServer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mc := redis.NewClient(master.ClientOptions())
	id, err := mc.Do(ctx, "CLUSTER", "MYID").Text()
	mc.Close()
	if err != nil {
		return nil, fmt.Errorf("testenv: CLUSTER MYID on %s: %w", master.Addr, err)
	}
	var replica *RedisServer
	for _, s := range c.Nodes {
		if s == master || !s.Running() {
			continue
		}
		rc := redis.NewClient(s.ClientOptions())
		repl, err := rc.Info(ctx, "replication").Result()
		if err == nil && infoFields(repl)["role"] == "slave" {
			if nodes, err := rc.Do(ctx, "CLUSTER", "NODES").Text(); err == nil && replicaOf(nodes, id) {
				replica = s
			}
		}
		rc.Close()
		if replica != nil {
			break
		}
	}
	if replica == nil {
		return nil, fmt.Errorf("testenv: master %s (%s) has no running replica", master.Addr, id)
	}
	rc := redis.NewClient(replica.ClientOptions())
	defer rc.Close()
	if kill {
		master.Kill()
		// The replica's own failover may already have started: TAKEOVER
		// then answers an error, and the wait below sees the promotion
		// all the same.
		rc.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER")
	} else if err := rc.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		return nil, fmt.Errorf("testenv: CLUSTER FAILOVER on %s: %w", replica.Addr, err)
	}
	for {
		ok := true
		for _, s := range c.Nodes {
			if !s.Running() {
				continue
			}
			nc := redis.NewClient(s.ClientOptions())
			info, err := nc.ClusterInfo(ctx).Result()
			nc.Close()
			f := infoFields(info)
			if err != nil || f["cluster_state"] != "ok" || f["cluster_slots_ok"] != "16384" {
				ok = false
				break
			}
		}
		if repl, err := rc.Info(ctx, "replication").Result(); err != nil || infoFields(repl)["role"] != "master" {
			ok = false
		}
		if ok {
			return replica, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testenv: %s was not promoted in place of %s with the cluster ok within 60s", replica.Addr, master.Addr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replicaOf reports whether the CLUSTER NODES reply says its "myself"
// node replicates masterID.
func replicaOf(nodes, masterID string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && strings.Contains(f[2], "myself") {
			return f[3] == masterID
		}
	}
	return false
}

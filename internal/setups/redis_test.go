package setups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// aclCommands are the commands a dagflow node's Redis user needs:
// EVALSHA, and EVAL when the server lost the cached script (a restart, a
// failover); SUBSCRIBE and PING for the wake-up channel; and every command
// the queue's Lua scripts call, which Redis checks against the user's
// rules too. Found by starting from -@all and adding what the ACL log
// said was denied (the test idles past the pub/sub health check's PING),
// then the commands of script paths a short run may not take (the
// heartbeat's ZSCORE, the release's LPUSH). docs/production.md
// shows this rule.
const aclCommands = "-@all +evalsha +eval +subscribe +ping " +
	"+del +exists +hdel +hget +hincrby +hmget +hset +hsetnx +llen +lpop +lpush +lrange +lrem +pexpire +publish +rpush +sadd +set +smembers +srem " +
	"+zadd +zcard +zrange +zrangebyscore +zrem +zrevrange +zscore"

// TestRedisACL runs the orders as an ACL user limited to its key prefix
// (keys and pub/sub channels) and to aclCommands.
func TestRedisACL(t *testing.T) {
	skipShort(t)
	const prefix = "shop"
	rule := fmt.Sprintf("dagflow on >app-secret resetkeys ~%s:* resetchannels &%s:* %s", prefix, prefix, aclCommands)
	srv := testenv.StartRedisWith(t, testenv.RedisOptions{Users: []string{rule}})
	t.Logf("ACL rule: user %s", rule)
	// From a URL, as the CLI's --redis-url will be given.
	opts, err := redis.ParseURL(srv.URL("dagflow", "app-secret"))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	t.Cleanup(func() { logDenied(t, srv) })
	if err := c.Set(context.Background(), "other:k", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("SET outside the prefix: %v, want NOPERM", err)
	}
	admin := srv.Client(t)
	if err := admin.Do(context.Background(), "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}
	// Idle past go-redis's pub/sub health check (a PING every 3s without
	// messages), which a short run would not reach.
	runOrders(t, setup{store: sharedStore(t), redis: c, prefix: prefix, idle: 4 * time.Second})
}

// TestRedisClusterACL runs the orders on a 3-master Cluster as an ACL
// user limited like TestRedisACL's, plus what a cluster client needs to
// learn the slot map (clusterACLCommands).
func TestRedisClusterACL(t *testing.T) {
	skipShort(t)
	const prefix = "shop"
	rule := fmt.Sprintf("dagflow on >app-secret resetkeys ~%s:* resetchannels &%s:* %s %s", prefix, prefix, aclCommands, clusterACLCommands)
	cl := testenv.StartClusterWith(t, 3, 0, testenv.RedisOptions{Users: []string{rule}})
	for _, n := range cl.Nodes {
		t.Cleanup(func() { logDenied(t, n) })
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, Username: "dagflow", Password: "app-secret"})
	t.Cleanup(func() { c.Close() })
	runOrders(t, setup{store: sharedStore(t), redis: c, prefix: prefix, idle: 4 * time.Second})
}

// clusterACLCommands are what a Cluster user needs beyond aclCommands:
// go-redis's cluster client reads the slot map with CLUSTER SLOTS
// (without it every call fails, the error naming cluster|slots) and the
// commands' key positions with COMMAND (without it the client only logs
// "getting command info: NOPERM", again and again, and falls back to its
// built-in key positions, which serve the queue's commands: nothing fails
// but the log fills, so it is required and queue.Probe checks it), and
// the wake-ups use sharded pub/sub there (SSUBSCRIBE; SPUBLISH in the
// scripts). queue.ClusterCommands lists the same.
const clusterACLCommands = "+cluster|slots +command +ssubscribe +spublish"

// logDenied logs what the ACL log recorded: the commands, keys and
// channels the user was refused.
func logDenied(t *testing.T, srv *testenv.RedisServer) {
	admin := srv.Client(t)
	entries, err := admin.Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil {
		t.Errorf("ACL LOG: %v", err)
		return
	}
	for _, e := range entries {
		m, _ := e.(map[any]any)
		t.Errorf("denied (%v) to %v in %v: %v", m["reason"], m["username"], m["context"], m["object"])
	}
}

// TestRedisACLCoversScripts keeps aclCommands in step with the queue's
// Lua scripts: every command a script calls must be granted, or a path
// the order runs did not take fails with NOPERM in production.
func TestRedisACLCoversScripts(t *testing.T) {
	files, err := filepath.Glob("../../queue/lua/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("queue scripts: %v (%d files)", err, len(files))
	}
	granted := map[string]bool{}
	for _, f := range strings.Fields(aclCommands) {
		granted[strings.TrimPrefix(f, "+")] = true
	}
	// SPUBLISH runs only on a Cluster, where clusterACLCommands grants it.
	granted["spublish"] = strings.Contains(clusterACLCommands, "+spublish")
	call := regexp.MustCompile(`(?:redis\.call|callchunks)\('([A-Z]+)'`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if cmd := strings.ToLower(m[1]); !granted[cmd] {
				t.Errorf("%s calls %s, which aclCommands does not grant", filepath.Base(f), m[1])
			}
		}
	}
}

// TestRedisTLS runs the orders over TLS only, trusting only a private CA
// and presenting a client certificate (tls-auth-clients yes).
func TestRedisTLS(t *testing.T) {
	skipShort(t)
	ca := testenv.NewCA(t)
	srv := testenv.StartRedisWith(t, testenv.RedisOptions{TLS: ca, TLSAuthClients: "yes"})
	runOrders(t, setup{store: sharedStore(t), redis: srv.Client(t)})
}

// TestRedisSentinel runs the orders through Sentinel, as TestRedisACL's
// prefix-limited ACL user, and moves the master while runs are in flight,
// by a SENTINEL FAILOVER and by a SIGKILL of the master (what it had not
// replicated is lost): every run still finishes, each step once, and the
// user needs no command beyond aclCommands.
func TestRedisSentinel(t *testing.T) {
	skipShort(t)
	const prefix = "shop"
	rule := fmt.Sprintf("dagflow on >app-secret resetkeys ~%s:* resetchannels &%s:* %s", prefix, prefix, aclCommands)
	for name, move := range map[string]func(*testenv.RedisSentinel) (string, error){
		"Failover":   (*testenv.RedisSentinel).Failover,
		"MasterKill": (*testenv.RedisSentinel).KillMaster,
	} {
		t.Run(name, func(t *testing.T) {
			s := testenv.StartSentinelWith(t, testenv.RedisOptions{Users: []string{rule}})
			for _, srv := range s.Servers {
				t.Cleanup(func() {
					if srv.Running() {
						logDenied(t, srv)
					}
				})
			}
			opts, err := redis.ParseFailoverURL(s.URL())
			if err != nil {
				t.Fatal(err)
			}
			if opts.MasterName != s.MasterName || len(opts.SentinelAddrs) != 3 {
				t.Fatalf("%s parsed as master %q, sentinels %v", s.URL(), opts.MasterName, opts.SentinelAddrs)
			}
			opts.Username, opts.Password = "dagflow", "app-secret"
			c := redis.NewFailoverClient(opts)
			t.Cleanup(func() { c.Close() })
			// Few slots, so that most steps go through Redis rather than
			// being claimed at creation or release by this node.
			runOrders(t, setup{store: sharedStore(t), redis: c, prefix: prefix, concurrency: 3, midRun: func() {
				start := time.Now()
				addr, err := move(s)
				if err != nil {
					t.Error(err)
					return
				}
				t.Logf("new master %s: the Sentinels agreed after %v", addr, time.Since(start).Round(time.Millisecond))
			}})
		})
	}
}

// TestRedisCluster runs the orders on a Redis Cluster of 3 masters, each
// with a replica.
func TestRedisCluster(t *testing.T) {
	skipShort(t)
	cl := testenv.StartCluster(t, 3, 1)
	opts, err := redis.ParseClusterURL(cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Addrs) != 6 {
		t.Fatalf("%s parsed as %v, want the 6 nodes", cl.URL(), opts.Addrs)
	}
	c := redis.NewClusterClient(opts)
	t.Cleanup(func() { c.Close() })
	runOrders(t, setup{store: sharedStore(t), redis: c})
}

package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// TestNodesListsLiveAndDeadNodes: `dagflow nodes` lists a live node with
// its host, pid, version and counts, and a node whose heartbeat is older
// than the node timeout as DEAD.
func TestNodesListsLiveAndDeadNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	addr := testenv.RequireRedis(t)
	dsn := testenv.MySQLDatabase(t)
	prefix := testenv.KeyPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	testenv.DeleteKeys(t, rdb, prefix)
	live, err := engine.New(engine.Config{Store: store, Redis: rdb, Prefix: prefix, NodeID: "cli-live", Concurrency: 3, Queues: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer live.Stop(context.Background())
	old := time.Now().Add(-time.Hour)
	if err := store.NodeHeartbeat(ctx, persistence.Node{ID: "cli-gone", StartedAt: old.Add(-time.Hour), HeartbeatAt: old,
		Info: []byte(`{"host":"elsewhere","pid":4242,"version":"dagflow old","concurrency":5,"queues":["q1"],"steps_done":7,"failures":2}`)}); err != nil {
		t.Fatal(err)
	}
	code, out, errb := runCLI(t, ctx, "nodes", "--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", prefix)
	if code != 0 {
		t.Fatalf("nodes exited %d: %s", code, errb)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NODE") {
		t.Fatalf("nodes printed %d lines, want a header and 2 nodes:\n%s", len(lines), out)
	}
	host, _ := os.Hostname()
	gone, self := strings.Fields(lines[1]), strings.Fields(lines[2])
	wantGone := []string{"cli-gone", "DEAD", "elsewhere", "4242"}
	wantSelf := []string{"cli-live", "live", host, strconv.Itoa(os.Getpid())}
	for i := range wantGone {
		if gone[i] != wantGone[i] || self[i] != wantSelf[i] {
			t.Fatalf("nodes:\n%s\nwant rows starting %v and %v", out, wantGone, wantSelf)
		}
	}
	for _, want := range []string{" 7 ", " 2 ", " 5 ", " q1 ", "dagflow old", "default", "dagflow github.com/"} {
		if !strings.Contains(out, want) {
			t.Errorf("nodes does not show %q:\n%s", want, out)
		}
	}
	// With a node timeout over an hour and a half, the old node is live.
	_, out, _ = runCLI(t, ctx, "nodes", "--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", prefix, "--node-timeout", "90m")
	if strings.Contains(out, "DEAD") {
		t.Errorf("nodes --node-timeout 90m lists a node dead:\n%s", out)
	}
	code, _, errb = runCLI(t, ctx, "nodes", "--node-timeout", "0s", "--mysql-dsn", dsn)
	if code != 2 || !strings.Contains(errb, "--node-timeout 0s") {
		t.Errorf("nodes --node-timeout 0s exited %d: %s; want a usage error naming it", code, errb)
	}
}

// TestWorkerRejectsNodeTimeoutUnderHeartbeat: a node timeout no longer
// than the heartbeat would count live nodes dead; the worker refuses it,
// naming both.
func TestWorkerRejectsNodeTimeoutUnderHeartbeat(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	addr := testenv.RequireRedis(t)
	dsn := testenv.MySQLDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// a migrated database: on an unmigrated one the worker stops earlier,
	// at its schema check
	if code, out, errb := runCLI(t, ctx, "migrate", "--mysql-dsn", dsn); code != 0 {
		t.Fatalf("migrate exited %d: %s %s", code, out, errb)
	}
	code, out, errb := runCLI(t, ctx, "worker", "--node-heartbeat", "2s", "--node-timeout", "1s",
		"--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", testenv.KeyPrefix(t))
	if code == 0 || !strings.Contains(errb, "NodeTimeout 1s") || !strings.Contains(errb, "NodeHeartbeat 2s") {
		t.Errorf("worker --node-heartbeat 2s --node-timeout 1s exited %d with %q %q; want an error naming both", code, out, errb)
	}
}

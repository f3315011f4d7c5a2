package redisconn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestOpenSentinel: a master with a password behind a sentinel with a
// password of its own; the URL names the sentinel, the master and both
// passwords.
func TestOpenSentinel(t *testing.T) {
	const masterPass, sentinelPass = "master-pass-1", "sentinel-pass-2"
	master := startRedis(t, false, "--requirepass", masterPass)
	sport := freePort(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	writeFile(t, conf, fmt.Sprintf("port %d\nbind 127.0.0.1\nrequirepass %s\n"+
		"sentinel monitor mymaster 127.0.0.1 %d 1\nsentinel auth-pass mymaster %s\n",
		sport, sentinelPass, master, masterPass))
	startProcess(t, sport, "redis-server", conf, "--sentinel")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	u := fmt.Sprintf("redis+sentinel://:%s@127.0.0.1:%d/mymaster/2?sentinel_password=%s", masterPass, sport, sentinelPass)
	c, err := Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	client, err := Open(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", Redact(u), err)
	}
	defer client.Close()
	if err := client.Set(ctx, "redisconn-sentinel", "ok", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// The key is on the master, in database 2.
	direct := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(master), Password: masterPass, DB: 2})
	defer direct.Close()
	if v, err := direct.Get(ctx, "redisconn-sentinel").Result(); err != nil || v != "ok" {
		t.Errorf("the master's db 2 holds %q, %v", v, err)
	}

	// A wrong sentinel password: the error names the sentinel and the
	// master, not the passwords.
	c, _ = Parse(fmt.Sprintf("redis+sentinel://:%s@127.0.0.1:%d/mymaster?sentinel_password=wrong-sentinel-pw", masterPass, sport))
	_, err = Open(ctx, c)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d master mymaster (user default, sentinel user default): authentication failed", sport)) ||
		strings.Contains(err.Error(), "wrong-sentinel-pw") || strings.Contains(err.Error(), masterPass) {
		t.Errorf("a wrong sentinel password: %v", err)
	}
	t.Logf("a wrong sentinel password: %v", err)
}

// TestOpenCluster: three masters sharing the slots; the URL names two of
// them, and keys of every slot range are written and read.
func TestOpenCluster(t *testing.T) {
	dir := t.TempDir()
	var ports []int
	for i := range 3 {
		p := freePort(t)
		ports = append(ports, p)
		startProcess(t, p, "redis-server", "--port", strconv.Itoa(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)),
			"--cluster-node-timeout", "5000", "--loglevel", "warning")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	formCluster(t, ctx, ports)

	u := fmt.Sprintf("redis+cluster://127.0.0.1:%d,127.0.0.1:%d", ports[0], ports[1])
	c, err := Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	client, err := Open(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	defer client.Close()
	if _, ok := client.(*redis.ClusterClient); !ok {
		t.Fatalf("Open(%s) made a %T, want a cluster client", u, client)
	}
	for i := range 30 {
		k := fmt.Sprintf("redisconn-cluster-%d", i)
		if err := client.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if v, err := client.Get(ctx, k).Int(); err != nil || v != i {
			t.Fatalf("GET %s = %d, %v", k, v, err)
		}
	}
}

// formCluster gives each node a third of the slots, introduces them and
// waits until every node says the cluster is ok.
func formCluster(t *testing.T, ctx context.Context, ports []int) {
	t.Helper()
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	var nodes []*redis.Client
	for i, p := range ports {
		n := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p)})
		defer n.Close()
		nodes = append(nodes, n)
		if err := n.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", ranges[i][0], ranges[i][1]).Err(); err != nil {
			t.Fatalf("ADDSLOTSRANGE on %d: %v", p, err)
		}
	}
	for _, p := range ports[1:] {
		if err := nodes[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(p)).Err(); err != nil {
			t.Fatalf("CLUSTER MEET %d: %v", p, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range nodes {
		for {
			info, err := n.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cluster did not form: %s %v", info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// startProcess starts a server listening on port, killed with the test.
func startProcess(t *testing.T, port int, name string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListen(t, port)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

package queue

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// nodeID is the cluster node id of s.
func nodeID(t *testing.T, s *testenv.RedisServer) string {
	t.Helper()
	rc := redis.NewClient(s.ClientOptions())
	defer rc.Close()
	id, err := rc.Do(context.Background(), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("CLUSTER MYID on %s: %v", s.Addr, err)
	}
	return id
}

func nodeByAddr(t *testing.T, cl *testenv.RedisCluster, addr string) *testenv.RedisServer {
	t.Helper()
	for _, n := range cl.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	t.Fatalf("no node of the cluster listens on %s", addr)
	return nil
}

// moveEmptySlot gives slot (which holds no keys) from src to dst on every
// node, and waits until every node's CLUSTER SLOTS says so.
func moveEmptySlot(t *testing.T, cl *testenv.RedisCluster, slot int64, src, dst *testenv.RedisServer) {
	t.Helper()
	ctx := context.Background()
	dstID := nodeID(t, dst)
	order := []*testenv.RedisServer{dst, src}
	for _, n := range cl.Nodes {
		if n != dst && n != src {
			order = append(order, n)
		}
	}
	for _, n := range order {
		rc := redis.NewClient(n.ClientOptions())
		err := rc.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err()
		rc.Close()
		if err != nil {
			t.Fatalf("CLUSTER SETSLOT on %s: %v", n.Addr, err)
		}
	}
	slotOwnedEverywhere(t, cl, slot, dst, 10*time.Second)
}

// slotOwnedEverywhere waits, up to timeout, until the CLUSTER SLOTS of
// every running node names owner as slot's master, and returns how long
// that took.
func slotOwnedEverywhere(t *testing.T, cl *testenv.RedisCluster, slot int64, owner *testenv.RedisServer, timeout time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	testenv.Eventually(t, timeout, func() bool {
		for _, n := range cl.Nodes {
			if !n.Running() {
				continue
			}
			rc := redis.NewClient(n.ClientOptions())
			//lint:ignore SA1019 CLUSTER SLOTS is what go-redis reads the slot map with
			s, err := rc.ClusterSlots(ctx).Result()
			rc.Close()
			if err != nil {
				return false
			}
			ok := false
			for _, r := range s {
				if int64(r.Start) <= slot && slot <= int64(r.End) && r.Nodes[0].Addr == owner.Addr {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
		return true
	}, "slot %d owned by %s on every node", slot, owner.Addr)
	return time.Since(start)
}

// dequeueAsync runs one Dequeue of queue in the background and sends the
// time it returned, failing the test if it returned without an item.
func dequeueAsync(t *testing.T, q *Queue, queue string, timeout time.Duration) <-chan time.Time {
	got := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := q.Dequeue(ctx, DequeueParams{Queues: []string{queue}, Lease: time.Minute})
		if err != nil {
			t.Errorf("dequeue of %s: %v", queue, err)
		}
		got <- time.Now()
	}()
	return got
}

// A client whose slot map is stale when a consumer first waits on a
// queue sends its SSUBSCRIBE to the slot's old owner, which answers
// MOVED. The notifier must notice (no confirmation), reload the map and
// subscribe on the new owner, or the queue's consumers are woken only by
// the poll timer.
func TestClusterSubscribeWithStaleSlotMap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped under -short")
	}
	cl := testenv.StartCluster(t, 3, 0)
	ctx := context.Background()
	c := cl.Client(t)
	prefix := testenv.KeyPrefix(t)
	q := newTestQueue(t, c, Config{Prefix: prefix, PollInterval: time.Minute})
	producer := newTestQueue(t, c, Config{Prefix: prefix})
	if _, err := q.Stats(ctx, "other"); err != nil { // loads the slot map
		t.Fatal(err)
	}
	k := q.keys("jobs")
	slot, err := c.ClusterKeySlot(ctx, k.ready).Result()
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.MasterForKey(ctx, k.ready)
	if err != nil {
		t.Fatal(err)
	}
	src := nodeByAddr(t, cl, m.Options().Addr)
	var dst *testenv.RedisServer
	for _, n := range cl.Nodes {
		if n != src {
			dst = n
			break
		}
	}
	moveEmptySlot(t, cl, slot, src, dst)
	if m, _ := c.MasterForKey(ctx, k.ready); m == nil || m.Options().Addr != src.Addr {
		t.Fatalf("the client's slot map was reloaded already; the test needs it stale")
	}

	got := dequeueAsync(t, q, "jobs", 30*time.Second)
	waitWaiting(t, c, k.waiting)
	// The subscription reaches the new owner (after the watchdog noticed
	// the missing confirmation).
	testenv.Eventually(t, 15*time.Second, func() bool {
		return len(channelsOn(t, dst.Addr, k.channel, true)) == 1
	}, "a shard subscription to %s on %s", k.channel, dst.Addr)
	start := time.Now()
	if _, err := producer.Enqueue(ctx, "jobs", Item{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case end := <-got:
		if d := end.Sub(start); d > 5*time.Second {
			t.Errorf("consumer woken %v after the enqueue; PollInterval is 1m, so the wake-up was lost", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("consumer not woken 20s after the enqueue; the wake-up was lost")
	}
}

// A master that hangs (SIGSTOP) must not delay the wake-ups of queues on
// healthy masters, even while a consumer subscribes to a queue on the
// hung one (go-redis dials it).
func TestClusterHungMasterDoesNotBlockOtherQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped under -short")
	}
	cl := testenv.StartCluster(t, 3, 0)
	ctx := context.Background()
	c := cl.Client(t)
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
	for i := 0; i < 100 && b == ""; i++ {
		if n := "q" + strconv.Itoa(i); master(n) != master(a) {
			b = n
		}
	}
	if b == "" {
		t.Fatal("no queue name on another master than jobs")
	}
	got := dequeueAsync(t, q, a, 30*time.Second)
	waitWaiting(t, c, q.keys(a).waiting)

	bs := nodeByAddr(t, cl, master(b))
	rc := redis.NewClient(bs.ClientOptions())
	info, err := rc.Info(ctx, "server").Result()
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid == 0 {
		t.Fatalf("no process_id in INFO of %s", bs.Addr)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	// Another consumer waits on b, on the stopped master, for the first time.
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		q.Dequeue(dctx, DequeueParams{Queues: []string{b}, Lease: time.Minute})
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if _, err := producer.Enqueue(ctx, a, Item{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case end := <-got:
		if d := end.Sub(start); d > time.Second {
			t.Errorf("consumer of %s (healthy master) woken %v after the enqueue; the hung master of %s delayed it", a, d, b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("consumer of the healthy master not woken 20s after the enqueue")
	}
	syscall.Kill(pid, syscall.SIGCONT)
	<-bDone
}

// On a Cluster, Probe names the operation and command a user lacks
// among those only a Cluster needs.
func TestClusterProbeACL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped under -short")
	}
	var all []string
	for _, c := range append(append([]string{}, Commands...), ClusterCommands...) {
		all = append(all, strings.ToLower(c))
	}
	cases := []struct{ missing, op, needs string }{
		{"", "", ""},
		{"spublish", "the enqueue script", "SPUBLISH"},
		{"ssubscribe", "SSUBSCRIBE", "SSUBSCRIBE"},
		{"cluster|slots", "CLUSTER SLOTS", "CLUSTER|SLOTS"},
		{"command", "COMMAND", "COMMAND"},
	}
	var users []string
	for i, c := range cases {
		rule := "u" + strconv.Itoa(i) + " on >pw resetkeys ~shop:* resetchannels &shop:* -@all"
		for _, cmd := range all {
			if cmd != c.missing {
				rule += " +" + cmd
			}
		}
		users = append(users, rule)
	}
	cl := testenv.StartClusterWith(t, 3, 0, testenv.RedisOptions{Users: users})
	for i, c := range cases {
		t.Run("without+"+c.missing, func(t *testing.T) {
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, Username: "u" + strconv.Itoa(i), Password: "pw"})
			defer cc.Close()
			q, err := New(Config{Client: cc, Prefix: "shop"})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err = q.Probe(ctx)
			t.Logf("Probe after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if c.missing == "" {
				if err != nil {
					t.Fatalf("Probe with every command: %v", err)
				}
				return
			}
			var pe *ProbeError
			if !errors.As(err, &pe) || !errors.Is(err, ErrRedisDenied) {
				t.Fatalf("Probe: %v; want a *ProbeError wrapping ErrRedisDenied", err)
			}
			if !strings.Contains(pe.Op, c.op) || !slices.Contains(pe.Commands, c.needs) {
				t.Errorf("Probe names op %q needing %v; want %q needing %s", pe.Op, pe.Commands, c.op, c.needs)
			}
		})
	}
}

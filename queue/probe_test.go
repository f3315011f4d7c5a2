package queue

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// TestProbe: on a Redis that allows everything (the shared one, and
// miniredis), Probe succeeds and leaves no key behind.
func TestProbe(t *testing.T) {
	for name, newClient := range map[string]func(testing.TB) redis.UniversalClient{
		"redis": newRealRedis, "miniredis": newMiniredis,
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t)
			q := newTestQueue(t, c, Config{})
			if err := q.Probe(context.Background()); err != nil {
				t.Fatalf("Probe: %v", err)
			}
			keys, err := c.Keys(context.Background(), q.prefix+":*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) > 0 {
				t.Errorf("Probe left keys %v", keys)
			}
		})
	}
}

// TestCommandsListed: every command a script calls is in Commands, the
// list the minimal ACL of docs/production.md is made from, or for the Cluster-only
// SPUBLISH in ClusterCommands.
func TestCommandsListed(t *testing.T) {
	call := regexp.MustCompile(`(?:redis\.call|callchunks)\('([A-Z]+)'`)
	entries, err := luaFS.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, err := luaFS.ReadFile("lua/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if !slices.Contains(Commands, m[1]) && !slices.Contains(ClusterCommands, m[1]) {
				t.Errorf("lua/%s calls %s, which Commands does not list", e.Name(), m[1])
			}
		}
	}
}

// TestWakeWithoutGet: a user whose ACL predates the Cluster support (no
// +get) can still run the queue and be woken: the scripts do not read the
// waiting flag's value, the producer says how to publish.
func TestWakeWithoutGet(t *testing.T) {
	var rule strings.Builder
	rule.WriteString("app on >pw resetkeys ~shop:* resetchannels &shop:* -@all")
	for _, c := range Commands {
		if c != "GET" {
			rule.WriteString(" +" + strings.ToLower(c))
		}
	}
	srv := testenv.StartRedisWith(t, testenv.RedisOptions{Users: []string{rule.String()}})
	c := redis.NewClient(srv.UserOptions("app", "pw"))
	t.Cleanup(func() { c.Close() })
	// A private server: nothing to delete afterwards (the user may not SCAN).
	q, err := New(Config{Client: c, Prefix: "shop", PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	ctx := context.Background()
	if err := q.Probe(ctx); err != nil {
		t.Fatalf("Probe without +get: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		tasks, err := q.Dequeue(dctx, DequeueParams{Queues: []string{"jobs"}, Lease: time.Minute})
		if err == nil && len(tasks) != 1 {
			err = fmt.Errorf("dequeued %v, want one task", tasks)
		}
		got <- err
	}()
	admin := redis.NewClient(srv.ClientOptions())
	t.Cleanup(func() { admin.Close() })
	waitWaiting(t, admin, q.keys("jobs").waiting)
	start := time.Now()
	if _, err := q.Enqueue(ctx, "jobs", Item{ID: "t1"}); err != nil {
		t.Fatalf("enqueue without +get: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("woken %v after the enqueue (PollInterval 1m): the wake-up was lost", d)
	}
}

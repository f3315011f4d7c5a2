package queue

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
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
// list the README's minimal ACL is made from, or for the Cluster-only
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

package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/engine"
)

// TestNewRejectsBadConfig: a configuration the node could start with but
// never work correctly (a queue name no store or Redis key accepts, an
// empty one, a prefix that breaks the keys' hash tag) is refused by New
// with an error naming the field and the value.
func TestNewRejectsBadConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	st := sqliteStore(t)
	tests := []struct {
		name string
		set  func(c *engine.Config)
		want string
	}{
		{"empty queue", func(c *engine.Config) { c.Queues = []string{"default", ""} }, `Config.Queues[1] is empty`},
		{"malformed queue", func(c *engine.Config) { c.Queues = []string{"mail queue"} }, `Config.Queues[0] "mail queue" is not a valid queue name`},
		{"queue with a brace", func(c *engine.Config) { c.Queues = []string{"a}b"} }, `Config.Queues[0] "a}b" is not a valid queue name`},
		{"queue twice", func(c *engine.Config) { c.Queues = []string{"mail", "default", "mail"} }, `Config.Queues lists "mail" twice`},
		{"prefix with a brace", func(c *engine.Config) { c.Prefix = "app{1}" }, `Config.Prefix "app{1}" has a brace`},
		{"prefix with a space", func(c *engine.Config) { c.Prefix = "my app" }, `Config.Prefix "my app" has a brace, space or control character at byte 2`},
		{"long prefix", func(c *engine.Config) { c.Prefix = strings.Repeat("p", 101) }, `Config.Prefix is 101 bytes, over 100`},
		{"node id with a newline", func(c *engine.Config) { c.NodeID = "node\n1" }, `Config.NodeID "node\n1" has a control character at byte 4`},
		{"negative poll", func(c *engine.Config) { c.PollInterval = -time.Second }, `Config.PollInterval -1s is negative`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := engine.Config{Store: st, Redis: rdb}
			tc.set(&cfg)
			_, err := engine.New(cfg)
			if err == nil || !strings.Contains(err.Error(), "engine: "+tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, "engine: "+tc.want)
			}
		})
	}
	ok := engine.Config{Store: st, Redis: rdb, Queues: []string{"mail", "default"}, Prefix: "app:v2", NodeID: "web-1"}
	if _, err := engine.New(ok); err != nil {
		t.Fatalf("New with a good config: %v", err)
	}
}

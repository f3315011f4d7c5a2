//go:build linux

package queue

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// minimalACL is the least a dagflow user needs under prefix: the
// commands of Commands, on the prefix's keys and channels (docs/production.md
// shows the same rule).
func minimalACL(user, password, prefix string) []string {
	rule := []string{"--user", user, "on", ">" + password, "resetkeys", "~" + prefix + ":*", "resetchannels", "&" + prefix + ":*", "-@all"}
	for _, c := range Commands {
		rule = append(rule, "+"+strings.ToLower(c))
	}
	return rule
}

// TestProbeRefusals: Probe against a private redis-server with ACL users
// that lack one thing each names what was refused (the command, the key
// pattern or the channel), wraps ErrRedisAuth or ErrRedisDenied, and
// never shows the password; the minimal user passes.
func TestProbeRefusals(t *testing.T) {
	const pw = "s3cret-Pa55"
	prefix := "app"
	args := []string{"--user", "default", "on", ">" + pw, "~*", "&*", "+@all"}
	args = append(args, minimalACL("minimal", pw, prefix)...)
	user := func(name string, rules ...string) {
		args = append(append(args, "--user", name, "on", ">"+pw), rules...)
	}
	user("nopublish", "~app:*", "&app:*", "+@all", "-publish")
	user("nolpop", "~app:*", "&app:*", "+@all", "-lpop")
	user("noevalsha", "~app:*", "&app:*", "+@all", "-evalsha")
	user("otherkeys", "~other:*", "&app:*", "+@all")
	user("nochannels", "~app:*", "resetchannels", "+@all")
	addr := testenv.StartRedisArgs(t, args...)

	tests := []struct {
		name, user, password string
		kind                 error
		want                 []string // in the message
	}{
		{"minimal user", "minimal", pw, nil, nil},
		{"wrong password", "minimal", "wrong-" + pw, ErrRedisAuth, []string{"refused the credentials", "WRONGPASS"}},
		{"no password", "", "", ErrRedisAuth, []string{"refused the credentials", "NOAUTH"}},
		{"no PUBLISH", "nopublish", pw, ErrRedisDenied, []string{"denied the enqueue script", "PUBLISH", `channel "app:{probe-`}},
		{"no LPOP", "nolpop", pw, ErrRedisDenied, []string{"denied the dequeue script", "LPOP", `on keys "app:{probe-`}},
		{"no EVALSHA", "noevalsha", pw, ErrRedisDenied, []string{"denied EVALSHA", "NOPERM"}},
		{"keys outside the prefix", "otherkeys", pw, ErrRedisDenied, []string{"denied the dequeue script", `on keys "app:{probe-`}},
		{"no channels", "nochannels", pw, ErrRedisDenied, []string{"denied SUBSCRIBE", `channel "app:{probe-`, "NOPERM"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr, Username: tc.user, Password: tc.password, MaxRetries: -1})
			t.Cleanup(func() { c.Close() })
			q, err := New(Config{Client: c, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			err = q.Probe(context.Background())
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("Probe: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("Probe = %v, want %v", err, tc.kind)
			}
			var pe *ProbeError
			if !errors.As(err, &pe) {
				t.Fatalf("Probe = %T, want *ProbeError", err)
			}
			msg := err.Error()
			t.Logf("Probe: %s", msg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Probe = %q, want it to contain %q", msg, w)
				}
			}
			if strings.Contains(msg, pw) {
				t.Errorf("Probe's error shows the password: %q", msg)
			}
		})
	}
}

//go:build linux

package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// TestStartChecksRedisAccess runs nodes against a private redis-server
// with passwords and ACL users. A wrong or missing password, and a user
// that lacks a command the queue needs, make Start fail at once with the
// reason (never the password); a user with just queue.Commands on the
// prefix's keys and channels (the minimal ACL of docs/production.md) runs a workflow.
func TestStartChecksRedisAccess(t *testing.T) {
	const pw = "Start-s3cret"
	const prefix = "app"
	args := []string{"--user", "default", "on", ">" + pw, "~*", "&*", "+@all",
		"--user", "nopublish", "on", ">" + pw, "~app:*", "&app:*", "+@all", "-publish",
		"--user", "minimal", "on", ">" + pw, "resetkeys", "~app:*", "resetchannels", "&app:*", "-@all"}
	for _, c := range queue.Commands {
		args = append(args, "+"+strings.ToLower(c))
	}
	addr := testenv.StartRedisArgs(t, args...)
	client := func(t *testing.T, user, password string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	st := sqliteStore(t)
	for _, tc := range []struct {
		name, user, password string
		kind                 error
		want                 string
	}{
		{"wrong password", "minimal", "not-" + pw, queue.ErrRedisAuth, "WRONGPASS"},
		{"no password", "", "", queue.ErrRedisAuth, "NOAUTH"},
		{"no PUBLISH", "nopublish", pw, queue.ErrRedisDenied, "PUBLISH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := startErr(t, engine.Config{Store: st, Redis: client(t, tc.user, tc.password), Prefix: prefix})
			if !errors.Is(err, tc.kind) {
				t.Fatalf("Start = %v, want %v", err, tc.kind)
			}
			msg := err.Error()
			if !strings.Contains(msg, `engine: Redis (key prefix "app")`) || !strings.Contains(msg, tc.want) {
				t.Errorf("Start = %q, want it to name the prefix and %q", msg, tc.want)
			}
			if strings.Contains(msg, pw) {
				t.Errorf("Start's error shows the password: %q", msg)
			}
		})
	}
	t.Run("minimal ACL", func(t *testing.T) {
		wf, err := dag.New("acl").
			Step("a", stepsFunc(func(context.Context) error { return nil })).
			Step("b", stepsFunc(func(context.Context) error { return nil }), dag.After("a"), dag.Queue("mail")).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		env := enginetest.New(t, enginetest.Options{Store: st, Redis: client(t, "minimal", pw), Prefix: prefix, Workflows: []*dag.Workflow{wf}})
		info := env.Wait(t, env.Trigger(t, "acl", nil))
		if info.Run.Status != persistence.RunSucceeded {
			t.Fatalf("run on the minimal ACL user: %s", info.Run.Status)
		}
	})
}

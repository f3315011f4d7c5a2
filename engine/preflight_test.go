package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
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
		{"node id ending in a space", func(c *engine.Config) { c.NodeID = "web-1 " }, `Config.NodeID "web-1 " begins or ends with a space`},
		{"node id starting with a space", func(c *engine.Config) { c.NodeID = " web-1" }, `Config.NodeID " web-1" begins or ends with a space`},
		{"negative poll", func(c *engine.Config) { c.PollInterval = -time.Second }, `Config.PollInterval -1s is negative`},
		{"reconcile without a unit", func(c *engine.Config) { c.ReconcileInterval = 2 }, `Config.ReconcileInterval 2ns is under 1ms`},
		{"schedule without a unit", func(c *engine.Config) { c.ScheduleInterval = 1 }, `Config.ScheduleInterval 1ns is under 1ms`},
		{"retention share as a percentage", func(c *engine.Config) { c.Retention.Share = 10 }, `Config.Retention.Share 10 must be above 0 and at most 1`},
		{"negative retention share", func(c *engine.Config) { c.Retention.Share = -0.1 }, `Config.Retention.Share -0.1 must be above 0 and at most 1`},
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

// startErr makes an engine on st and rdb, starts it, and returns Start's
// error; the engine is stopped when the test ends.
func startErr(t *testing.T, cfg engine.Config) error {
	t.Helper()
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return e.Start(context.Background())
}

// TestStartRefusesUnmigratedDatabase: Start on a database without this
// binary's migrations (a fresh SQLite file, a fresh MySQL database, one
// migration short) fails at once with the two versions and how to
// migrate, instead of starting a node whose every query fails.
func TestStartRefusesUnmigratedDatabase(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	latest := func(t *testing.T, st persistence.Store) int64 {
		v, err := st.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v.Binary
	}
	check := func(t *testing.T, st persistence.Store, want string) {
		t.Helper()
		err := startErr(t, engine.Config{Store: st, Redis: rdb, Prefix: testenv.KeyPrefix(t)})
		if !errors.Is(err, persistence.ErrSchemaBehind) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "dagflow migrate") {
			t.Fatalf("Start = %v, want ErrSchemaBehind saying %q and how to migrate", err, want)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "fresh.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		check(t, st, fmt.Sprintf("no dagflow schema (version 0), this binary needs version %d", latest(t, st)))
	})
	t.Run("mysql", func(t *testing.T) {
		st, err := mysql.Open(ctx, mysql.Config{DSN: testenv.MySQLDatabase(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		n := latest(t, st)
		check(t, st, fmt.Sprintf("no dagflow schema (version 0), this binary needs version %d", n))
		// One migration short: as if the binary shipped a newer one.
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().ExecContext(ctx, "DELETE FROM "+mysql.MigrationTable+" WHERE version_id = ?", n); err != nil {
			t.Fatal(err)
		}
		// Migration numbers may have gaps (reserved for other changes):
		// the database is at the newest one left.
		v, err := st.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v.Database <= 0 || v.Database >= n {
			t.Fatalf("after removing migration %d the database is at %d", n, v.Database)
		}
		check(t, st, fmt.Sprintf("database is at schema version %d, this binary needs %d", v.Database, n))
	})
}

// TestStartAcceptsSchemaAhead: a database migrated by a newer release
// (a rolling deploy migrates first) does not stop an older node; it
// starts and says so in its log.
func TestStartAcceptsSchemaAhead(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	st := sqliteStore(t)
	v, err := st.SchemaVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec("INSERT INTO "+sqlite.MigrationTable+" (version_id, is_applied) VALUES (?, 1)", v.Binary+1); err != nil {
		t.Fatal(err)
	}
	logs := &logLines{level: slog.LevelWarn}
	if err := startErr(t, engine.Config{Store: st, Redis: rdb, Logger: slog.New(logs)}); err != nil {
		t.Fatalf("Start on a schema ahead of the binary: %v", err)
	}
	want := fmt.Sprintf("database_version=%d binary_version=%d", v.Binary+1, v.Binary)
	if got := logs.matching("schema is ahead"); len(got) != 1 || !strings.Contains(got[0], want) {
		t.Errorf("warnings = %q, want one saying %s", got, want)
	}
}

// TestStartWarnsOfUnworkedQueues: a node whose Config.Queues leaves out
// a queue of its registered workflows says so at Start: that queue's
// steps wait for another node.
func TestStartWarnsOfUnworkedQueues(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	wf, err := dag.New("order").
		Step("charge", stepsFunc(func(context.Context) error { return nil })).
		Step("mail", stepsFunc(func(context.Context) error { return nil }), dag.After("charge"), dag.Queue("mail")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{level: slog.LevelWarn}
	e, err := engine.New(engine.Config{Store: sqliteStore(t), Redis: rdb, Queues: []string{"default"}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(wf); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	if got := logs.matching("queues this node does not work"); len(got) != 1 || !strings.Contains(got[0], "queues=[mail]") {
		t.Errorf("warnings = %q, want one naming queue mail", got)
	}
}

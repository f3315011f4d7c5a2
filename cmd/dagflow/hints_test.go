//go:build !nodev

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
)

// The tests of this file check what the CLI tells its user when a
// command meets a database or an input it cannot work with.

// hintBackend is one store for a test: the flags that select it and,
// for MySQL, its DSN. migrate says whether it is migrated.
type hintBackend struct {
	name  string
	flags []string
	open  func(t *testing.T) persistence.Store
}

// hintBackends are a fresh MySQL database and a fresh SQLite file, not
// migrated, each with its own Redis prefix.
func hintBackends(t *testing.T) []hintBackend {
	t.Helper()
	addr := testenv.RequireRedis(t)
	redisFlags := []string{"--redis-addr", addr, "--prefix", testenv.KeyPrefix(t)}
	dsn := testenv.MySQLDatabase(t)
	file := filepath.Join(t.TempDir(), "dagflow.db")
	return []hintBackend{
		{name: "mysql", flags: append([]string{"--mysql-dsn", dsn}, redisFlags...), open: func(t *testing.T) persistence.Store {
			st, err := mysql.Open(context.Background(), mysql.Config{DSN: dsn, AutoMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{name: "sqlite", flags: append([]string{"--sqlite", file}, redisFlags...), open: func(t *testing.T) persistence.Store {
			st, err := sqlite.Open(context.Background(), sqlite.Config{Path: file, AutoMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
	}
}

// TestNodesRefuseUnmigratedDatabase: serve and worker on a database
// without the schema say to run `dagflow migrate`, not which table is
// missing; migrate then says the version it reached, and serve starts.
func TestNodesRefuseUnmigratedDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, b := range hintBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			for _, cmd := range [][]string{{"serve", "--listen", "127.0.0.1:0"}, {"worker"}} {
				code, out, errb := runCLI(t, ctx, append(cmd, b.flags...)...)
				if code != 1 || !strings.Contains(errb, "the database has no dagflow schema") ||
					!strings.Contains(errb, "run `dagflow migrate`") || strings.Contains(errb, "doesn't exist") || strings.Contains(errb, "no such table") {
					t.Errorf("%s on an unmigrated database exited %d:\n%s%s\nwant 1 and a hint to run `dagflow migrate`", cmd[0], code, out, errb)
				}
			}
			code, out, errb := runCLI(t, ctx, append([]string{"migrate"}, b.flags...)...)
			st := b.open(t)
			v, err := st.SchemaVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("schema at version %d", v.Binary); code != 0 || !strings.Contains(out, want) || v.Database != v.Binary {
				t.Errorf("migrate exited %d: %q %q; want %q (database at %d)", code, out, errb, want, v.Database)
			}
		})
	}
}

// TestUnknownDatabaseHint: a DSN naming a database the server does not
// have says how to create it, or to use SQLite instead.
func TestUnknownDatabaseHint(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB")
	}
	testenv.MySQLDatabase(t) // skips without a server
	name := "dftest_missing_" + testenv.RandomSuffix(8)
	dsn := "root@tcp(" + mysqlAddr(t) + ")/" + name
	for _, cmd := range []string{"migrate", "runs"} {
		code, _, errb := runCLI(t, context.Background(), cmd, "--mysql-dsn", dsn)
		if code != 1 || !strings.Contains(errb, "CREATE DATABASE `"+name+"`") || !strings.Contains(errb, "--sqlite FILE") {
			t.Errorf("%s on an unknown database exited %d: %q; want a hint to create it or use --sqlite FILE", cmd, code, errb)
		}
	}
}

// mysqlAddr is the host:port of the test MySQL server.
func mysqlAddr(t *testing.T) string {
	m := regexp.MustCompile(`tcp\(([^)]+)\)`).FindStringSubmatch(testenv.MySQLDSN())
	if m == nil {
		t.Fatalf("no tcp(host:port) in %q", testenv.MySQLDSN())
	}
	return m[1]
}

// storeWorkflow stores the definition of a one-step workflow, name,
// subscribed to event (when not ""), through an engine that starts and
// stops at once.
func storeWorkflow(t *testing.T, ctx context.Context, st persistence.Store, rdb redis.UniversalClient, prefix, name, event string) {
	t.Helper()
	var opts []dag.WorkflowOption
	if event != "" {
		opts = append(opts, dag.OnEvent(event))
	}
	w, err := dag.New(name, opts...).Step("a", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })).Build()
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: st, Redis: rdb, Prefix: prefix, NoWorkers: true, ReconcileInterval: -1, ScheduleInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(w); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCLIInputsAndRefusals: trigger without --input gives the run {};
// --status lists the valid statuses; a schedule of an unknown workflow
// names it once with one prefix; an event nobody subscribes to warns.
func TestCLIInputsAndRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := testenv.RequireRedis(t)
	prefix := testenv.KeyPrefix(t)
	file := filepath.Join(t.TempDir(), "dagflow.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: file, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	testenv.DeleteKeys(t, rdb, prefix)
	storeWorkflow(t, ctx, st, rdb, prefix, "echo", "ping")
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, ctx, append(args, "--sqlite", file, "--redis-addr", addr, "--prefix", prefix)...)
	}

	code, out, errb := cli("trigger", "echo")
	if code != 0 {
		t.Fatalf("trigger exited %d: %s", code, errb)
	}
	run, err := st.RunGet(ctx, strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	if string(run.Input) != "{}" {
		t.Errorf("trigger without --input: the run's input is %q, want {}", run.Input)
	}

	var names []string
	for _, s := range persistence.RunStatuses() {
		names = append(names, string(s))
	}
	want := `--status "bogus" is not a run status (want one of: ` + strings.Join(names, ", ") + ")"
	if code, _, errb := cli("runs", "--status", "bogus"); code != 2 || !strings.Contains(errb, want) {
		t.Errorf("runs --status bogus exited %d: %q; want 2 and %q", code, errb, want)
	}

	code, _, errb = cli("schedules", "create", "s1", "--spec", "@daily", "--workflow", "nosuch")
	if want := "dagflow schedules create: engine: schedule \"s1\": unknown workflow: \"nosuch\"\n"; code != 1 || errb != want {
		t.Errorf("schedule of an unknown workflow exited %d:\n got %q\nwant %q", code, errb, want)
	}

	code, out, errb = cli("events", "publish", "nobody.listens")
	if code != 0 || !strings.Contains(out, "published, 0 runs") ||
		!strings.Contains(errb, `warning: no workflow subscribes to event "nobody.listens"`) {
		t.Errorf("publish of an event nobody subscribes to exited %d: %q %q; want a warning", code, out, errb)
	}
	code, out, errb = cli("events", "publish", "ping")
	if code != 0 || !strings.Contains(out, "published, 1 runs") || strings.Contains(errb, "warning") {
		t.Errorf("publish of a subscribed event exited %d: %q %q; want 1 run and no warning", code, out, errb)
	}
}

// TestAdminCommandsLogLikeNodes: an admin command's logs go to its
// stderr in the nodes' format (slog's text handler), not to the
// process's default logger.
func TestAdminCommandsLogLikeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	id := triggerOrder(t, ctx, env.store, env.rdb, env.prefix)
	now := time.Now()
	if _, err := env.store.StepClaim(ctx, persistence.StepClaimParams{RunID: id, Step: "reserve", Fence: "f1", Worker: "w",
		LeaseUntil: now.Add(time.Minute), Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.store.StepFail(ctx, persistence.StepFailParams{RunID: id, Step: "reserve", Fence: "f1", Error: "out of stock",
		DeadRunStatus: persistence.RunFailed, Now: now}); err != nil {
		t.Fatal(err)
	}
	code, out, errb := runCLI(t, ctx, append([]string{"runs", "skip", id, "reserve", "--output", `{}`}, env.flags...)...)
	if code != 0 {
		t.Fatalf("runs skip exited %d: %s %s", code, out, errb)
	}
	if !regexp.MustCompile(`(?m)^time=\S+ level=INFO msg="run resumed by an operator" .*run_id=` + id).MatchString(errb) {
		t.Errorf("runs skip logged, on its stderr, not in the nodes' format:\n%s", errb)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/codec/aesgcm"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/internal/redisconn"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// The tests in this file drive the CLI only through run, as a user would.

// runCLI runs dagflow with args and returns the exit code, stdout and
// stderr.
func runCLI(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// A DSN whose server refuses connections at once, with a password that
// must never be printed.
const (
	secretPassword = "s3cr3t-Pa55word"
	refusingDSN    = "app:" + secretPassword + "@tcp(127.0.0.1:1)/dagflow"
)

func TestFlagsAfterPositionalArgumentsAreUsed(t *testing.T) {
	ctx := context.Background()
	// The DSN after the run id must be the one used: its server (port 1)
	// refuses, so the command fails naming it. Were it ignored, the
	// command would read the default database instead.
	code, out, errb := runCLI(t, ctx, "runs", "show", "some-run-id", "--mysql-dsn", refusingDSN)
	if code == 0 || !strings.Contains(errb, "127.0.0.1:1") {
		t.Errorf("runs show ID --mysql-dsn X exited %d, stdout %q, stderr %q; want a failure naming 127.0.0.1:1", code, out, errb)
	}
	if strings.Contains(out+errb, secretPassword) {
		t.Errorf("the password was printed:\n%s\n%s", out, errb)
	}
}

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "show"}, "RUN_ID"},
		{[]string{"runs", "list", "extra"}, `"extra"`},
		{[]string{"runs", "frob"}, `"frob"`},
		{[]string{"runs", "purge"}, "--before is required"},
		{[]string{"runs", "purge", "--before", "last tuesday"}, `--before "last tuesday" is not a date`},
		{[]string{"runs", "purge", "--before", "2999-01-01"}, "in the future"},
		{[]string{"runs", "purge", "--before", "2020-01-01", "--share", "0"}, "--share 0 must be above 0 and at most 1"},
		{[]string{"runs", "purge", "--before", "2020-01-01", "--share", "2"}, "--share 2 must be above 0 and at most 1"},
		{[]string{"runs", "purge", "--before", "2020-01-01", "extra"}, `"extra"`},
		{[]string{"dlq", "retry", "only-run-id"}, "STEP"},
		{[]string{"dlq", "list", "extra"}, `"extra"`},
		{[]string{"migrate", "extra"}, `"extra"`},
		{[]string{"worker", "extra"}, `"extra"`},
		{[]string{"worker", "--no-such-flag"}, "no-such-flag"},
		{[]string{"worker", "--sqlite", filepath.Join(t.TempDir(), "x.db"), "--mysql-read-dsn", refusingDSN}, "--mysql-read-dsn is a MySQL read replica; it cannot go with SQLite"},
		{[]string{"serve", "extra"}, `"extra"`},
		{[]string{"workflows", "show"}, "NAME"},
		{[]string{"workflows", "frob"}, `"frob"`},
		{[]string{"trigger"}, "WORKFLOW"},
		{[]string{"trigger", "order", "--input", "{", "--mysql-dsn", refusingDSN}, "not valid JSON"},
		// Reserved and whitespace-only keys are refused before anything
		// is reached: a schedule tick's key would take the tick's run.
		{[]string{"trigger", "order", "--key", "schedule:nightly:1900000000", "--mysql-dsn", refusingDSN}, `--key: engine: idempotency key "schedule:nightly:1900000000" starts with "schedule:"`},
		{[]string{"trigger", "order", "--key", "child:x", "--mysql-dsn", refusingDSN}, `starts with "child:", which is reserved for child runs (reserved prefixes: "child:", "event:", "schedule:")`},
		{[]string{"trigger", "order", "--key", "event:E:order", "--mysql-dsn", refusingDSN}, `"event:"`},
		{[]string{"trigger", "order", "--key", " \t ", "--mysql-dsn", refusingDSN}, "only whitespace"},
		{[]string{"schedules", "trigger"}, "NAME"},
		{[]string{"apikeys", "revoke"}, "ID|NAME"},
		{[]string{"apikeys", "create", "--scope", "root", "--name", "x", "--mysql-dsn", refusingDSN}, `--scope "root"`},
		{[]string{"completion", "tcsh"}, "tcsh"},
		{[]string{"frobnicate"}, `"frobnicate"`},
	} {
		code, out, errb := runCLI(t, ctx, tc.args...)
		if code != 2 || !strings.Contains(errb, tc.want) {
			t.Errorf("dagflow %s exited %d with stderr %q (stdout %q); want exit 2 and a message naming %s",
				strings.Join(tc.args, " "), code, errb, out, tc.want)
		}
	}
}

// TestHelpAndCompletion: every command has generated help, and the
// completion command writes a script for each shell.
func TestHelpAndCompletion(t *testing.T) {
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			path := strings.Fields(sub.CommandPath())[1:]
			paths = append(paths, append(path, "-h"))
			walk(sub)
		}
	}
	walk(newRoot(&secrets{}))
	if len(paths) < 20 {
		t.Fatalf("only %d commands: %q", len(paths), paths)
	}
	for _, args := range paths {
		code, out, errb := runCLI(t, context.Background(), args...)
		if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "dagflow "+args[0]) {
			t.Errorf("dagflow %s exited %d with %q %q; want its usage", strings.Join(args, " "), code, out, errb)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errb := runCLI(t, context.Background(), "completion", shell)
		if code != 0 || !strings.Contains(out, "dagflow") || len(out) < 1000 {
			t.Errorf("completion %s exited %d with %d bytes, %q", shell, code, len(out), errb)
		}
	}
	// Completion of a command line, as the shells ask for it.
	code, out, _ := runCLI(t, context.Background(), "__complete", "sched")
	if code != 0 || !strings.Contains(out, "schedules") {
		t.Errorf("__complete sched exited %d with %q; want schedules", code, out)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, errb := runCLI(t, context.Background(), args...)
		if code != 0 || !strings.Contains(out, "dagflow") || !strings.Contains(out, "github.com/dagflow/dagflow") {
			t.Errorf("dagflow %s exited %d with %q %q; want the module and its version", args[0], code, out, errb)
		}
	}
}

// TestHelpHidesEnvironmentSecrets: -h must not print the DSN or URL of the
// environment (with its password) as a flag default.
func TestHelpHidesEnvironmentSecrets(t *testing.T) {
	t.Setenv("DAGFLOW_MYSQL_DSN", refusingDSN)
	t.Setenv("DAGFLOW_REDIS_URL", "redis://app:"+secretPassword+"@127.0.0.1:1/0")
	var cmds [][]string
	for _, c := range newRoot(&secrets{}).Commands() {
		if c.Flags().Lookup("mysql-dsn") != nil {
			cmds = append(cmds, []string{c.Name(), "-h"})
		}
	}
	if len(cmds) < 4 {
		t.Fatalf("only %d commands take --mysql-dsn", len(cmds))
	}
	cmds = append(cmds, []string{"runs", "show", "-h"}, []string{"dlq", "retry", "-h"})
	for _, args := range cmds {
		cmd := strings.Join(args, " ")
		code, out, errb := runCLI(t, context.Background(), args...)
		if code != 0 || !strings.Contains(out+errb, "DAGFLOW_MYSQL_DSN") {
			t.Errorf("%s -h exited %d, printed %q %q", cmd, code, out, errb)
		}
		if strings.Contains(out+errb, secretPassword) || strings.Contains(out+errb, "127.0.0.1:1") {
			t.Errorf("%s -h printed the environment's DSN or URL:\n%s%s", cmd, out, errb)
		}
	}
}

// TestErrorsHideSecrets: a bad DSN, a bad URL or an unreachable server
// with a password in it: the password is not printed, the server is.
func TestErrorsHideSecrets(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQLDatabase(t)
	for _, args := range [][]string{
		{"runs", "--mysql-dsn", refusingDSN},
		{"runs", "--mysql-dsn", "app:" + secretPassword + "@tcp(127.0.0.1:1)/dagflow?badparam"},
		{"migrate", "--mysql-dsn", "app:" + secretPassword + "@tcp(127.0.0.1:1)"},
		{"worker", "--mysql-dsn", dsn, "--mysql-read-dsn", "app:" + secretPassword + "@tcp(127.0.0.1:1)/dagflow"},
		{"dlq", "retry", "r", "s", "--mysql-dsn", dsn, "--redis-url", "redis://app:" + secretPassword + "@127.0.0.1:1/0"},
		{"dlq", "retry", "r", "s", "--redis-url", "redis://app:" + secretPassword + "@127.0.0.1:1/0?frob=1"},
		{"dlq", "retry", "r", "s", "--redis-url", "rediss+sentinel://app:" + secretPassword + "@127.0.0.1:1/?sentinel_password=" + secretPassword},
	} {
		code, out, errb := runCLI(t, ctx, args...)
		if code == 0 {
			t.Errorf("dagflow %q exited 0", args)
		}
		if strings.Contains(out+errb, secretPassword) {
			t.Errorf("dagflow %q printed the password:\n%s%s", args, out, errb)
		}
		if !strings.Contains(errb, "127.0.0.1:1") {
			t.Errorf("dagflow %q: the error %q does not name the server", args, errb)
		}
		if last := args[len(args)-1]; strings.HasPrefix(last, "redis://") && strings.HasSuffix(last, "/0") && !strings.Contains(errb, "redis: connection pool") {
			t.Errorf("dagflow %q: go-redis's own log did not come through the command's stderr: %q", args, errb)
		}
	}
}

// TestSecretsFromFiles: --mysql-dsn-file and DAGFLOW_MYSQL_DSN_FILE read
// the DSN from a file (trimmed), so it is not on the command line.
func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dsn")
	if err := os.WriteFile(file, []byte(refusingDSN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errb := runCLI(t, context.Background(), "runs", "--mysql-dsn-file", file)
	if code == 0 || !strings.Contains(errb, "127.0.0.1:1") || strings.Contains(out+errb, secretPassword) {
		t.Errorf("--mysql-dsn-file: exited %d with %q %q; want the file's server named, not its password", code, out, errb)
	}
	t.Setenv("DAGFLOW_MYSQL_DSN_FILE", file)
	code, out, errb = runCLI(t, context.Background(), "runs")
	if code == 0 || !strings.Contains(errb, "127.0.0.1:1") || strings.Contains(out+errb, secretPassword) {
		t.Errorf("DAGFLOW_MYSQL_DSN_FILE: exited %d with %q %q; want the file's server named", code, out, errb)
	}
	code, _, errb = runCLI(t, context.Background(), "runs", "--mysql-dsn-file", filepath.Join(dir, "missing"))
	if code == 0 || !strings.Contains(errb, "missing") {
		t.Errorf("a missing --mysql-dsn-file exited %d with %q; want the file named", code, errb)
	}
}

// TestWorkerWorksEveryQueueByDefault: the order workflow's notify step is
// on the "mail" queue; a worker started without --queues must run it.
func TestWorkerWorksEveryQueueByDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	addr := testenv.RequireRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	runOrderOnWorker(t, rdb, "--redis-addr", addr)
}

// runOrderOnWorker triggers an order run (through rdb) and runs `dagflow
// worker` with redisArgs until it finishes, on a private database and key
// prefix; the run must succeed and the worker stop cleanly.
func runOrderOnWorker(t *testing.T, rdb redis.UniversalClient, redisArgs ...string) {
	t.Helper()
	dsn := testenv.MySQLDatabase(t)
	prefix := testenv.KeyPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if code, out, errb := runCLI(t, ctx, "migrate", "--mysql-dsn", dsn); code != 0 {
		t.Fatalf("migrate exited %d: %s %s", code, out, errb)
	}
	testenv.DeleteKeys(t, rdb, prefix)
	store, err := mysql.Open(ctx, mysql.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	id := triggerOrder(t, ctx, store, rdb, prefix)

	wctx, stop := context.WithCancel(ctx)
	done := make(chan string)
	go func() {
		code, out, errb := runCLI(t, wctx, append([]string{"worker", "--demo", "--mysql-dsn", dsn, "--prefix", prefix}, redisArgs...)...)
		done <- fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
	}()
	var last persistence.Run
	testenv.Eventually(t, 30*time.Second, func() bool {
		last, err = store.RunGet(ctx, id)
		return err == nil && last.Status.Terminal()
	}, "the order run did not finish")
	stop()
	result := <-done
	if last.Status != persistence.RunSucceeded {
		t.Errorf("run %s ended %s, want succeeded\n%s", id, last.Status, result)
	}
	if !strings.HasPrefix(result, "exit 0") {
		t.Errorf("the worker did not stop cleanly: %s", result)
	}
}

// TestWorkerOverTLSRedis: the worker runs the order workflow on a Redis
// that speaks only TLS, with a certificate of a private CA, reached with a
// rediss:// URL naming the CA and a client certificate.
func TestWorkerOverTLSRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and redis-server")
	}
	ca := testenv.NewCA(t)
	addr := testenv.StartRedisWith(t, testenv.RedisOptions{TLS: ca, TLSAuthClients: "optional"}).Addr
	u := "rediss://" + addr + "/0?ca=" + ca.CertFile
	c, err := redisconn.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := redisconn.Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	runOrderOnWorker(t, rdb, "--redis-url", u)
}

// triggerOrder starts one order run through an engine that runs no steps.
func triggerOrder(t *testing.T, ctx context.Context, st persistence.Store, rdb redis.UniversalClient, prefix string) string {
	t.Helper()
	return triggerOrderWith(t, ctx, st, rdb, prefix, nil)
}

// triggerOrderWith is triggerOrder with a payload codec.
func triggerOrderWith(t *testing.T, ctx context.Context, st persistence.Store, rdb redis.UniversalClient, prefix string, c codec.Codec) string {
	t.Helper()
	reg := steps.NewRegistry()
	if err := orderflow.NewServices().Register(reg); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: st, Redis: rdb, Prefix: prefix, NoWorkers: true, ReconcileInterval: -1, ScheduleInterval: -1, Codec: c})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadWorkflows(workflows.FS, reg); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	id, err := e.Trigger(ctx, "order", orderflow.Order{OrderID: "o-1", Customer: "c@example.com", SKU: "SKU-1", Quantity: 1, Total: 150})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestWorkerRejectsBadQueues: an explicit --queues that is empty, has an
// empty element or names a queue no registered workflow uses is refused
// before the worker connects to anything.
func TestWorkerRejectsBadQueues(t *testing.T) {
	for _, tc := range []struct{ queues, want string }{
		{"", "empty"},
		{"default,,mail", "empty"},
		{"mial", `"mial"`},
	} {
		code, out, errb := runCLI(t, context.Background(), "worker", "--demo", "--queues", tc.queues, "--mysql-dsn", refusingDSN)
		if code == 0 || !strings.Contains(errb, tc.want) || !strings.Contains(errb, "--queues") {
			t.Errorf("worker --queues %q exited %d with %q %q; want an error about --queues naming %s", tc.queues, code, out, errb, tc.want)
		}
	}
}

// TestOutputEscapesControlCharacters: a step error holding terminal
// escape sequences is printed escaped by runs show, runs list and dlq.
func TestOutputEscapesControlCharacters(t *testing.T) {
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
	id := hostileRun(t, ctx, store, rdb, prefix)
	for _, args := range [][]string{
		{"runs", "--mysql-dsn", dsn, "show", id},
		{"runs", "--mysql-dsn", dsn, "list"},
		{"dlq", "--mysql-dsn", dsn, "list"},
	} {
		code, out, errb := runCLI(t, ctx, args...)
		if code != 0 {
			t.Fatalf("%q exited %d: %s", args, code, errb)
		}
		if strings.ContainsAny(out, "\x1b\x07\u009b") {
			t.Errorf("%q printed raw control characters: %q", args, out)
		}
		if !strings.Contains(out, `\x1b]0;pwned`) {
			t.Errorf("%q does not show the escaped error: %q", args, out)
		}
	}
}

// hostileRun makes a run whose step is dead-lettered with an error full of
// terminal escape sequences.
func hostileRun(t *testing.T, ctx context.Context, st persistence.Store, rdb redis.UniversalClient, prefix string) string {
	t.Helper()
	hostile := "\x1b]0;pwned\x07\x1b[2J\u009b31m boom"
	reg := steps.NewRegistry()
	for _, name := range []string{"order.reserve", "order.release", "order.notify", "order.points", "order.revoke_points", "order.ship"} {
		h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			return nil, steps.Permanent(errors.New(hostile))
		})
		if err := reg.Register(name, h); err != nil {
			t.Fatal(err)
		}
	}
	e, err := engine.New(engine.Config{Store: st, Redis: rdb, Prefix: prefix, ReconcileInterval: 100 * time.Millisecond, ScheduleInterval: -1, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadWorkflows(workflows.FS, reg); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	id, err := e.Trigger(ctx, "order", orderflow.Order{OrderID: "o-1", Customer: "c@example.com", SKU: "SKU-1", Quantity: 1, Total: 150})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestWorkerChecksRedisCredentials: against a Redis with requirepass, a
// worker with a wrong password exits non-zero at once with an
// authentication error naming the server and the user, not the password;
// with the right one, read from --redis-url-file, it runs.
func TestWorkerChecksRedisCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and redis-server")
	}
	const pass = "Right-Pa55word-9"
	addr := testenv.StartRedisWith(t, testenv.RedisOptions{Password: pass}).Addr
	dsn := testenv.MySQLDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, out, errb := runCLI(t, ctx, "worker", "--mysql-dsn", dsn, "--migrate", "--redis-url", "redis://app:"+secretPassword+"@"+addr+"/0")
	if code != 1 || !strings.Contains(errb, "redis "+addr+" (user app): authentication failed: WRONGPASS") {
		t.Errorf("a wrong password: exit %d, stderr %q; want 1 and an authentication error naming %s and user app", code, errb, addr)
	}
	if strings.Contains(out+errb, secretPassword) {
		t.Errorf("the password was printed:\n%s%s", out, errb)
	}

	file := filepath.Join(t.TempDir(), "redis-url")
	if err := os.WriteFile(file, []byte("redis://:"+pass+"@"+addr+"/0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	var wout, werr syncBuffer
	done := make(chan int)
	go func() {
		done <- run(wctx, []string{"worker", "--demo", "--mysql-dsn", dsn, "--redis-url-file", file, "--queues", "default"}, &wout, &werr)
	}()
	testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(wout.String(), "running") },
		"the worker with the right password did not start: %s", &werr)
	stop()
	if code := <-done; code != 0 {
		t.Errorf("the worker exited %d: %s", code, werr.String())
	}
	if !strings.Contains(werr.String(), "queue not worked by this node") || !strings.Contains(werr.String(), "steps=order/notify") {
		t.Errorf("--queues default: no warning naming the mail queue's steps:\n%s", werr.String())
	}
	if strings.Contains(wout.String()+werr.String(), pass) {
		t.Errorf("the password was printed:\n%s%s", wout.String(), werr.String())
	}
}

// syncBuffer is a log sink for concurrent writers.
type syncBuffer = testenv.SyncBuffer

// TestBinaryStopsOnSignal builds dagflow and stops a worker with SIGTERM:
// the signal wiring of main stops it gracefully, exit status 0.
func TestBinaryStopsOnSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; needs Redis and MariaDB")
	}
	addr := testenv.RequireRedis(t)
	dsn := testenv.MySQLDatabase(t)
	prefix := testenv.KeyPrefix(t)
	bin := filepath.Join(t.TempDir(), "dagflow")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "worker", "--migrate", "--prefix", prefix, "--redis-addr", addr, "--shutdown-timeout", "5s")
	cmd.Env = append(os.Environ(), "DAGFLOW_MYSQL_DSN="+dsn)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "running") },
		"the worker did not start: %s", &errb)
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the worker exited with %v after SIGTERM:\n%s", err, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop within 20s of SIGTERM:\n%s", errb.String())
	}
	if !strings.Contains(errb.String(), "a second signal exits at once") {
		t.Errorf("stderr does not say what a second signal does:\n%s", errb.String())
	}
}

// TestBinarySecondSignalExitsAtOnce: a worker blocked on a Redis that
// accepts but never answers (read timeout 60s) gets SIGTERM, says it is
// stopping, and on a second SIGTERM exits at once with status 143.
func TestBinarySecondSignalExitsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; needs MariaDB")
	}
	dsn := testenv.MySQLDatabase(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	talked := make(chan struct{})
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		if n, _ := c.Read(buf); n > 0 {
			close(talked)
		}
		c.Read(buf) // hold the connection, answer nothing
	}()
	bin := filepath.Join(t.TempDir(), "dagflow")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "worker", "--mysql-dsn", dsn, "--redis-url", "redis://"+l.Addr().String()+"/0?read_timeout=60s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var errb syncBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-talked: // the worker is in its Redis check, long past installing its signal handling
	case err := <-exited:
		t.Fatalf("the worker exited early: %v\n%s", err, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker never reached the Redis:\n%s", errb.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	testenv.Eventually(t, 10*time.Second, func() bool { return strings.Contains(errb.String(), "a second signal exits at once") },
		"no word of the first signal: %s", &errb)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 143 {
			t.Errorf("after the second SIGTERM the worker ended with %v, want exit status 143\n%s", err, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the worker did not exit within 10s of the second SIGTERM:\n%s", errb.String())
	}
}

// TestRunsShowSaysWhyStepsWait: runs show tells, for each step still to
// run, why it waits — here no live node works the order workflow, and
// the later steps wait for the first.
func TestRunsShowSaysWhyStepsWait(t *testing.T) {
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
	id := triggerOrder(t, ctx, store, rdb, prefix)
	code, out, errb := runCLI(t, ctx, "runs", "show", id, "--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", prefix)
	if code != 0 {
		t.Fatalf("runs show exited %d: %s", code, errb)
	}
	for _, want := range []string{"WAITING", "no_node", "no live node can run it", "dependencies", "waiting for reserve (queued)"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show does not say %q:\n%s", want, out)
		}
	}
}

// TestCodecKeyringFile: with --codec-keyring-file the worker encrypts
// payloads at rest and runs show decodes them; without it, runs show
// shows only the sealed envelopes.
func TestCodecKeyringFile(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	addr := testenv.RequireRedis(t)
	dsn := testenv.MySQLDatabase(t)
	prefix := testenv.KeyPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	keyring := filepath.Join(t.TempDir(), "keys")
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	if err := os.WriteFile(keyring, []byte("k1="+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := aesgcm.ParseKeyring([]byte("k1=" + key))
	if err != nil {
		t.Fatal(err)
	}
	store, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	testenv.DeleteKeys(t, rdb, prefix)
	id := triggerOrderWith(t, ctx, store, rdb, prefix, c)
	base := []string{"--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", prefix}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan int)
	go func() {
		code, _, _ := runCLI(t, wctx, append([]string{"worker", "--demo", "--codec-keyring-file", keyring}, base...)...)
		done <- code
	}()
	testenv.Eventually(t, 30*time.Second, func() bool {
		r, err := store.RunGet(ctx, id)
		return err == nil && r.Status.Terminal()
	}, "the order run did not finish")
	stop()
	if code := <-done; code != 0 {
		t.Errorf("worker exited %d", code)
	}
	raw, err := store.RunGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Status != persistence.RunSucceeded || strings.Contains(string(raw.Input), "o-1") {
		t.Errorf("stored run: %s, input %s; want succeeded with a sealed input", raw.Status, raw.Input)
	}
	_, plain, errb := runCLI(t, ctx, append([]string{"runs", "show", id, "--codec-keyring-file", keyring}, base...)...)
	if !strings.Contains(plain, `"order_id":"o-1"`) {
		t.Errorf("runs show with the keyring does not show the input: %s %s", plain, errb)
	}
	_, sealed, _ := runCLI(t, ctx, append([]string{"runs", "show", id}, base...)...)
	if strings.Contains(sealed, "o-1") || !strings.Contains(sealed, "dagflow-aesgcm:v1:k1:") {
		t.Errorf("runs show without the keyring: %s", sealed)
	}
}

// TestRunsRetryAndSkip: runs skip gives a dead step an output, runs show
// lists the action as the CLI's, and runs retry refuses bad modes.
func TestRunsRetryAndSkip(t *testing.T) {
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
	id := triggerOrder(t, ctx, store, rdb, prefix)
	now := time.Now()
	if _, err := store.StepClaim(ctx, persistence.StepClaimParams{RunID: id, Step: "reserve", Fence: "f1", Worker: "w",
		LeaseUntil: now.Add(time.Minute), Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.StepFail(ctx, persistence.StepFailParams{RunID: id, Step: "reserve", Fence: "f1", Error: "out of stock",
		DeadRunStatus: persistence.RunFailed, Now: now}); err != nil {
		t.Fatal(err)
	}
	base := []string{"--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", prefix}
	for _, args := range [][]string{
		{"runs", "retry", id, "--mode", "everything"},
		{"runs", "retry", id, "--mode", "from_step"},
		{"runs", "skip", id, "reserve", "--output", "{"},
	} {
		if code, _, errb := runCLI(t, ctx, append(args, base...)...); code != 2 {
			t.Errorf("%v exited %d, want 2 (usage): %s", args, code, errb)
		}
	}
	code, out, errb := runCLI(t, ctx, append([]string{"runs", "skip", id, "reserve", "--output", `{"reserved":"by hand"}`}, base...)...)
	if code != 0 || !strings.Contains(out, "skipped") {
		t.Fatalf("runs skip exited %d: %s %s", code, out, errb)
	}
	code, out, errb = runCLI(t, ctx, append([]string{"runs", "show", id}, base...)...)
	if code != 0 {
		t.Fatalf("runs show exited %d: %s", code, errb)
	}
	for _, want := range []string{"ACTION", "skip", "cli", `{"reserved":"by hand"}`} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show does not say %q:\n%s", want, out)
		}
	}
	if code, _, errb := runCLI(t, ctx, append([]string{"runs", "retry", id}, base...)...); code == 0 || !strings.Contains(errb, "retry refused") {
		t.Errorf("runs retry of a running run exited %d: %s", code, errb)
	}
}

package setups

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// cliRuns is how many order runs each setup gives the dagflow binary.
const cliRuns = 10

// TestCLI runs the order workflow with the built dagflow binary, as an
// operator would: the test triggers the runs through an engine of its
// own that works no steps, then `dagflow worker`, given the setup only
// by flags and files, works them until every run finished, and stops on
// SIGTERM with status 0. Every run must succeed, every step once by the
// store's attempts, and no password may appear in the worker's output.
func TestCLI(t *testing.T) {
	skipShort(t)
	bin := buildDagflow(t)
	t.Run("RedisACL", func(t *testing.T) { testCLIRedisACL(t, bin) })
	t.Run("RedisTLS", func(t *testing.T) { testCLIRedisTLS(t, bin) })
	t.Run("RedisSentinelFailover", func(t *testing.T) { testCLIRedisSentinel(t, bin) })
	t.Run("RedisCluster", func(t *testing.T) { testCLIRedisCluster(t, bin) })
	t.Run("MariaDB", func(t *testing.T) {
		// One server for both subtests: starting one takes seconds.
		ca := testenv.NewCA(t)
		db := testenv.StartMariaDB(t, testenv.MariaDBOptions{TLS: ca})
		t.Run("TLS", func(t *testing.T) { testCLIMariaDBTLS(t, bin, db, ca) })
		t.Run("LeastPrivilege", func(t *testing.T) { testCLIMySQLLeastPrivilege(t, bin, db) })
	})
}

// testCLIRedisACL: the worker is the prefix-limited ACL user of
// TestRedisACL, its URL read from --redis-url-file.
func testCLIRedisACL(t *testing.T, bin string) {
	const prefix = "shop"
	pass := "acl-" + testenv.RandomSuffix(16)
	rule := fmt.Sprintf("dagflow on >%s resetkeys ~%s:* resetchannels &%s:* %s", pass, prefix, prefix, aclCommands)
	srv := testenv.StartRedisWith(t, testenv.RedisOptions{Users: []string{rule}})
	t.Cleanup(func() { logDenied(t, srv) })
	u := srv.URL("dagflow", pass)
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	file := writeSecret(t, "redis-url", u)
	st, dsn := sharedDatabase(t)
	runOrdersOnCLI(t, bin, cliSetup{
		store: st, redis: c, prefix: prefix, secrets: []string{pass}, fromFile: true, idle: 4 * time.Second,
		args: []string{"--mysql-dsn", dsn, "--redis-url-file", file},
	})
}

// testCLIRedisTLS: a TLS-only Redis with a password, trusting only a
// private CA and requiring a client certificate; the rediss:// URL names
// the CA, the certificate and its key. Without the certificate the
// worker refuses to start.
func testCLIRedisTLS(t *testing.T, bin string) {
	ca := testenv.NewCA(t)
	pass := "tls-" + testenv.RandomSuffix(16)
	srv := testenv.StartRedisWith(t, testenv.RedisOptions{TLS: ca, TLSAuthClients: "yes", Password: pass})
	q := url.Values{"ca": {ca.CertFile}, "cert": {ca.ClientCertFile}, "key": {ca.ClientKeyFile}}
	u := srv.URL("", pass) + "/0?" + q.Encode()
	st, dsn := sharedDatabase(t)
	q.Del("cert")
	q.Del("key")
	code, out := runCLIOnce(t, bin, "worker", "--mysql-dsn", dsn, "--redis-url", srv.URL("", pass)+"/0?"+q.Encode())
	if code == 0 || !strings.Contains(out, srv.Addr) {
		t.Errorf("a worker without the client certificate exited %d; want a failure naming %s:\n%s", code, srv.Addr, out)
	}
	if strings.Contains(out, pass) {
		t.Errorf("the worker without the client certificate printed the password:\n%s", out)
	}
	t.Logf("without the client certificate: exit %d, %s", code, strings.TrimSpace(out))
	runOrdersOnCLI(t, bin, cliSetup{
		store: st, redis: srv.Client(t), secrets: []string{pass},
		args: []string{"--mysql-dsn", dsn, "--redis-url", u},
	})
}

// testCLIRedisSentinel: the worker reaches the master through three
// Sentinels (redis+sentinel://), as TestRedisACL's ACL user; while runs
// are triggered, the Sentinels fail the master over to the replica. Every
// run finishes, and the worker's log shows it followed the new master.
func testCLIRedisSentinel(t *testing.T, bin string) {
	const prefix = "shop"
	pass := "sentinel-" + testenv.RandomSuffix(16)
	rule := fmt.Sprintf("dagflow on >%s resetkeys ~%s:* resetchannels &%s:* %s", pass, prefix, prefix, aclCommands)
	s := testenv.StartSentinelWith(t, testenv.RedisOptions{Users: []string{rule}})
	for _, srv := range s.Servers {
		t.Cleanup(func() { logDenied(t, srv) })
	}
	opts := s.FailoverOptions()
	opts.Username, opts.Password = "dagflow", pass
	c := redis.NewFailoverClient(opts)
	t.Cleanup(func() { c.Close() })
	u := fmt.Sprintf("redis+sentinel://%s@%s/%s", url.UserPassword("dagflow", pass), strings.Join(s.SentinelAddrs, ","), s.MasterName)
	var newMaster string
	st, dsn := sharedDatabase(t)
	out := runOrdersOnCLI(t, bin, cliSetup{
		store: st, redis: c, prefix: prefix, secrets: []string{pass},
		// Few slots, as in TestRedisSentinel.
		args: []string{"--mysql-dsn", dsn, "--redis-url", u, "--concurrency", "3"},
		midRun: func() error {
			start := time.Now()
			addr, err := s.Failover()
			if err != nil {
				return err
			}
			newMaster = addr
			t.Logf("new master %s: the Sentinels agreed after %v", addr, time.Since(start).Round(time.Millisecond))
			return nil
		},
	})
	if want := fmt.Sprintf("new master=%q addr=%q", s.MasterName, newMaster); newMaster != "" && !strings.Contains(out, want) {
		t.Errorf("the worker's log does not say it switched to the new master (%s):\n%s", want, out)
	}
}

// testCLIRedisCluster: a Cluster of 3 masters, each with a replica, as a
// prefix-limited ACL user (TestRedisClusterACL's rule), given as
// redis+cluster:// with every node.
func testCLIRedisCluster(t *testing.T, bin string) {
	const prefix = "shop"
	pass := "cluster-" + testenv.RandomSuffix(16)
	rule := fmt.Sprintf("dagflow on >%s resetkeys ~%s:* resetchannels &%s:* %s %s", pass, prefix, prefix, aclCommands, clusterACLCommands)
	cl := testenv.StartClusterWith(t, 3, 1, testenv.RedisOptions{Users: []string{rule}})
	for _, n := range cl.Nodes {
		t.Cleanup(func() { logDenied(t, n) })
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, Username: "dagflow", Password: pass})
	t.Cleanup(func() { c.Close() })
	u := fmt.Sprintf("redis+cluster://%s@%s", url.UserPassword("dagflow", pass), strings.Join(cl.Addrs, ","))
	st, dsn := sharedDatabase(t)
	runOrdersOnCLI(t, bin, cliSetup{
		store: st, redis: c, prefix: prefix, secrets: []string{pass}, idle: 4 * time.Second,
		args: []string{"--mysql-dsn", dsn, "--redis-url", u},
	})
}

// testCLIMariaDBTLS: root migrates the database with `dagflow migrate`
// over TLS (--mysql-tls-ca); the worker's user has only SELECT, INSERT,
// UPDATE and DELETE and must present a client certificate of the CA
// (REQUIRE X509), given with --mysql-tls-cert and --mysql-tls-key.
// Without them the worker refuses to start.
func testCLIMariaDBTLS(t *testing.T, bin string, db *testenv.MariaDB, ca *testenv.CA) {
	name := db.Database(t)
	admin := rootDB(t, db)
	before := sslAccepts(t, admin)
	if code, out := runCLIOnce(t, bin, "migrate", "--mysql-dsn", db.DSN("root", "", name), "--mysql-tls-ca", ca.CertFile); code != 0 {
		t.Fatalf("dagflow migrate as root over TLS exited %d:\n%s", code, out)
	}
	if after := sslAccepts(t, admin); after <= before {
		t.Fatalf("dagflow migrate --mysql-tls-ca made no TLS connection (Ssl_accepts %d, then %d)", before, after)
	}
	pass := "x509-" + testenv.RandomSuffix(16)
	db.CreateUser(t, "app_tls", pass, name, testenv.Grant{Privileges: "SELECT, INSERT, UPDATE, DELETE", RequireX509: true})
	dsn := db.DSN("app_tls", pass, name)
	code, out := runCLIOnce(t, bin, "worker", "--mysql-dsn", dsn, "--mysql-tls-ca", ca.CertFile, "--redis-addr", testenv.RequireRedis(t))
	if code == 0 || !strings.Contains(out, "Access denied") {
		t.Errorf("a worker without the client certificate exited %d; want access denied:\n%s", code, out)
	}
	if strings.Contains(out, pass) {
		t.Errorf("the refused worker printed the password:\n%s", out)
	}
	t.Logf("without the client certificate: exit %d, %s", code, strings.TrimSpace(out))
	s := onSharedRedis(t, openStore(t, mysql.Config{DSN: db.DSN("root", "", name)}))
	runOrdersOnCLI(t, bin, cliSetup{
		store: s.store, redis: s.redis, prefix: s.prefix, secrets: []string{pass},
		args: []string{"--mysql-dsn", dsn, "--mysql-tls-ca", ca.CertFile,
			"--mysql-tls-cert", ca.ClientCertFile, "--mysql-tls-key", ca.ClientKeyFile,
			"--redis-addr", testenv.RequireRedis(t)},
	})
}

// testCLIMySQLLeastPrivilege: root migrates with `dagflow migrate`; the
// worker's user has only SELECT, INSERT, UPDATE and DELETE, its DSN read
// from --mysql-dsn-file.
func testCLIMySQLLeastPrivilege(t *testing.T, bin string, db *testenv.MariaDB) {
	name := db.Database(t)
	if code, out := runCLIOnce(t, bin, "migrate", "--mysql-dsn", db.DSN("root", "", name)); code != 0 {
		t.Fatalf("dagflow migrate as root exited %d:\n%s", code, out)
	}
	pass := "dml-" + testenv.RandomSuffix(16)
	db.CreateUser(t, "app", pass, name, testenv.Grant{Privileges: "SELECT, INSERT, UPDATE, DELETE"})
	file := writeSecret(t, "mysql-dsn", db.DSN("app", pass, name))
	s := onSharedRedis(t, openStore(t, mysql.Config{DSN: db.DSN("root", "", name)}))
	runOrdersOnCLI(t, bin, cliSetup{
		store: s.store, redis: s.redis, prefix: s.prefix, secrets: []string{pass}, fromFile: true,
		args: []string{"--mysql-dsn-file", file, "--redis-addr", testenv.RequireRedis(t)},
	})
}

// cliSetup is what one setup hands runOrdersOnCLI.
type cliSetup struct {
	// store and redis are the test's own connections, with which it
	// triggers the runs and checks them.
	store persistence.Store
	redis redis.UniversalClient
	// prefix is the Redis key prefix; default testenv.KeyPrefix.
	prefix string
	// args are the worker's connection flags (not --prefix).
	args []string
	// secrets must not appear in the worker's output.
	secrets []string
	// fromFile says the secrets come from files: they must not be on the
	// worker's command line either.
	fromFile bool
	// idle keeps the worker running, idle, this long after the runs
	// finished: past go-redis's pub/sub health check (a PING every 3s
	// without messages), which an ACL user must be allowed too.
	idle time.Duration
	// midRun, when set, is called (on another goroutine) once the worker
	// finished a run, while the rest are triggered: a failover.
	midRun func() error
}

// runOrdersOnCLI triggers cliRuns order runs, works them with `dagflow
// worker` and checks them, as TestCLI says. It returns the worker's
// output (stdout and stderr).
func runOrdersOnCLI(t *testing.T, bin string, s cliSetup) string {
	t.Helper()
	start := time.Now()
	if s.prefix == "" {
		s.prefix = testenv.KeyPrefix(t)
	}
	ctx := context.Background()
	e := triggerEngine(t, s)
	ids := make([]string, 0, cliRuns)
	trigger := func() {
		i := len(ids)
		o := orderflow.Order{OrderID: fmt.Sprintf("o-%d", i), Customer: "c@example.com", SKU: "sku-1", Quantity: 1, Total: float64(50 + 10*i)}
		id, err := e.Trigger(ctx, "order", o)
		if err != nil {
			t.Fatalf("trigger %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	first := cliRuns
	if s.midRun != nil {
		first = 3
	}
	for range first {
		trigger()
	}
	w := startWorker(t, bin, append([]string{"worker", "--demo", "--prefix", s.prefix, "--shutdown-timeout", "10s"}, s.args...)...)
	if s.fromFile {
		for _, sec := range s.secrets {
			if strings.Contains(strings.Join(w.cmd.Args, " "), sec) {
				t.Fatal("the worker's command line holds a password its file should give")
			}
		}
	}
	if s.midRun != nil {
		// The worker is under way; the event happens while the rest of
		// the runs are triggered, some during it and some after it.
		waitRuns(t, w, s.store, ids[:1], 60*time.Second)
		done := make(chan error, 1)
		go func() { done <- s.midRun() }()
		for range (cliRuns - first) / 2 {
			time.Sleep(500 * time.Millisecond)
			trigger()
		}
		if err := <-done; err != nil {
			t.Fatalf("the event: %v", err)
		}
		for len(ids) < cliRuns {
			trigger()
		}
	}
	waitRuns(t, w, s.store, ids, 90*time.Second)
	time.Sleep(s.idle)
	code := w.stop(t)
	out := w.out.String()
	if code != 0 {
		t.Errorf("the worker exited %d after SIGTERM, want 0:\n%s", code, out)
	}
	if !strings.Contains(out, "running (queues default,mail)") {
		t.Errorf("the worker did not say it works both queues:\n%s", out)
	}
	for _, sec := range s.secrets {
		if strings.Contains(out, sec) {
			t.Errorf("the worker printed a password:\n%s", out)
		}
	}
	points := 0
	for i, id := range ids {
		run, err := s.store.RunGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != persistence.RunSucceeded {
			t.Errorf("run %d (%s): %s (%s), want succeeded", i, id, run.Status, run.Error)
		}
		if checkSteps(t, s.store, id) {
			points++
		}
	}
	if want := 5; points != want { // totals 50, 60, ..., 140: five of them reach 100
		t.Errorf("%d runs awarded points, want %d", points, want)
	}
	t.Logf("%d runs through the dagflow binary in %v; worker output:\n%s", len(ids), time.Since(start).Round(time.Millisecond), out)
	return out
}

// triggerEngine starts an engine that creates runs and works none, on
// the setup's store, Redis and prefix, stopped when the test ends.
func triggerEngine(t *testing.T, s cliSetup) *engine.Engine {
	t.Helper()
	reg := steps.NewRegistry()
	if err := orderflow.NewServices().Register(reg); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: s.store, Redis: s.redis, Prefix: s.prefix, Logger: testLogger(t),
		NoWorkers: true, ReconcileInterval: -1, ScheduleInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadWorkflows(workflows.FS, reg); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("engine start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("engine stop: %v", err)
		}
	})
	return e
}

// waitRuns waits until every run in ids is terminal, and fails the test
// if the worker exits first or timeout passes.
func waitRuns(t *testing.T, w *worker, st persistence.Store, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, id := range ids {
			r, err := st.RunGet(context.Background(), id)
			if err != nil || !r.Status.Terminal() {
				left++
			}
		}
		switch {
		case left == 0:
			return
		case w.exited():
			t.Fatalf("the worker exited (%d) with %d of %d runs unfinished:\n%s", w.code, left, len(ids), w.out.String())
		case time.Now().After(deadline):
			t.Fatalf("%d of %d runs unfinished after %v; worker output:\n%s", left, len(ids), timeout, w.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildDagflow builds the dagflow binary into the test's temporary
// directory.
func buildDagflow(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dagflow")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, "github.com/dagflow/dagflow/cmd/dagflow")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built dagflow in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// worker is a dagflow process started by a test.
type worker struct {
	cmd  *exec.Cmd
	out  *lockedBuffer // stdout and stderr
	done chan struct{} // closed when the process has exited
	code int           // exit code, once done; -1 when killed by a signal
}

// startWorker starts the binary with args, without the DAGFLOW_*
// variables of the test's environment, and waits until it says it is
// running. It is killed when the test ends and, on Linux, when the test
// process dies.
func startWorker(t *testing.T, bin string, args ...string) *worker {
	t.Helper()
	w := &worker{cmd: command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.code = exitCode(w.cmd.Wait())
		close(w.done)
	}()
	t.Cleanup(func() { w.cmd.Process.Kill(); <-w.done })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w.out.String(), " running ") {
		if w.exited() || time.Now().After(deadline) {
			t.Fatalf("dagflow %s did not start:\n%s", strings.Join(args, " "), w.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return w
}

// stop sends SIGTERM and returns the exit code; the worker must exit
// within 30 seconds.
func (w *worker) stop(t *testing.T) int {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil && !w.exited() {
		t.Fatal(err)
	}
	select {
	case <-w.done:
		return w.code
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not exit within 30s of SIGTERM:\n%s", w.out.String())
		return 0
	}
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// runCLIOnce runs the binary with args until it exits (within a
// minute) and returns its exit code and output.
func runCLIOnce(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := command(bin, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return exitCode(err), out.String()
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("dagflow %s did not exit within a minute:\n%s", strings.Join(args, " "), out.String())
		return 0, ""
	}
}

// command is the binary with args, in an environment without DAGFLOW_*
// variables, killed by the kernel if the test process dies.
func command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DAGFLOW_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// exitCode is the exit code Wait reported: -1 for a death by signal.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// lockedBuffer is a bytes.Buffer written by a process and read by the
// test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeSecret writes a secret into a file of the test's temporary
// directory, readable only by its owner, and returns the path.
func writeSecret(t *testing.T, name, value string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sharedDatabase opens a migrated store on a private database of the
// shared MariaDB, for the Redis setups, and returns it with its DSN.
func sharedDatabase(t *testing.T) (persistence.Store, string) {
	t.Helper()
	dsn := testenv.MySQLDatabase(t)
	return openStore(t, mysql.Config{DSN: dsn, AutoMigrate: true}), dsn
}

// rootDB is a root connection to db, closed when the test ends.
func rootDB(t *testing.T, db *testenv.MariaDB) *sql.DB {
	t.Helper()
	c, err := sql.Open("mysql", db.DSN("root", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sslAccepts is how many TLS handshakes the server has accepted.
func sslAccepts(t *testing.T, db *sql.DB) int {
	t.Helper()
	var name, v string
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'").Scan(&name, &v); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("Ssl_accepts %q: %v", v, err)
	}
	return n
}

package faults

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// childEnv carries a worker process's childConfig as JSON.
const childEnv = "DAGFLOW_FAULTS_CHILD"

// childConfig is what a worker process is told.
type childConfig struct {
	Name          string // for logs
	StoreDSN      string // dagflow's store, possibly through a proxy
	EffectsDSN    string // the test's effects tables, direct
	RedisAddr     string
	RedisCluster  []string // a Redis Cluster's nodes; when set, RedisAddr is unused
	Prefix        string
	Concurrency   int
	Lease         time.Duration
	Heartbeat     time.Duration
	Reconcile     time.Duration
	DeliveryLimit int
	Shutdown      time.Duration // Stop's deadline after SIGTERM
	// NodeHeartbeat and NodeTimeout configure the node registry (zero:
	// the engine's defaults).
	NodeHeartbeat time.Duration
	NodeTimeout   time.Duration
	// TraceFile, when set, makes the worker trace (Config.TracerProvider)
	// and write every span to this file as it ends (spanfile_test.go).
	TraceFile string
	// QueueLimits is the engine's Config.QueueLimits.
	QueueLimits map[string]engine.QueueLimit
}

// TestWorkerProcess is not a test: it is the body of a worker process
// that the fault tests start by re-executing the test binary. It runs an
// engine node until SIGTERM, then stops it within cfg.Shutdown and prints
// its Stats.
func TestWorkerProcess(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("the body of a worker process started by the fault tests")
	}
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("worker config: %v", err)
	}
	if err := runWorker(cfg); err != nil {
		t.Fatalf("worker %s: %v", cfg.Name, err)
	}
}

// stdoutLine writes one protocol line for the parent ("faults <event>").
var stdoutMu sync.Mutex

func stdoutLine(s string) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.WriteString("faults " + s + "\n")
}

func runWorker(cfg childConfig) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := mysql.Open(ctx, mysql.Config{DSN: cfg.StoreDSN, MaxOpenConns: 16})
	if err != nil {
		return err
	}
	defer st.Close()
	edb, err := sql.Open("mysql", cfg.EffectsDSN)
	if err != nil {
		return err
	}
	defer edb.Close()
	rdb := newRedis(cfg.RedisAddr, cfg.RedisCluster, 32)
	defer rdb.Close()
	h := &handlers{db: edb, pid: os.Getpid(), out: stdoutLine}
	wfs, err := workflows(h)
	if err != nil {
		return err
	}
	ecfg := engine.Config{
		Store: st, Redis: rdb, Prefix: cfg.Prefix, Logger: logger, NodeID: cfg.Name + "-" + strconv.Itoa(os.Getpid()),
		Concurrency: cfg.Concurrency, Lease: cfg.Lease, Heartbeat: cfg.Heartbeat,
		ReconcileInterval: cfg.Reconcile, PollInterval: 200 * time.Millisecond, DeliveryLimit: cfg.DeliveryLimit,
		NodeHeartbeat: cfg.NodeHeartbeat, NodeTimeout: cfg.NodeTimeout,
		QueueLimits: cfg.QueueLimits,
	}
	if cfg.TraceFile != "" {
		tp, err := fileTracerProvider(cfg.TraceFile)
		if err != nil {
			return err
		}
		defer tp.Shutdown(context.Background())
		ecfg.TracerProvider = tp
	}
	e, err := engine.New(ecfg)
	if err != nil {
		return err
	}
	if err := e.Register(wfs...); err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	stdoutLine(fmt.Sprintf("ready %d", os.Getpid()))
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Shutdown)
	defer cancel()
	serr := e.Stop(sctx)
	b, _ := json.Marshal(e.Stats())
	stdoutLine("stats " + string(b))
	if serr != nil {
		logger.Warn("stop past its deadline: running steps were released", "err", serr)
	}
	return nil
}

// newRedis returns a client of the Redis at addr, or of the Redis
// Cluster of nodes when there are any.
func newRedis(addr string, nodes []string, pool int) redis.UniversalClient {
	if len(nodes) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, PoolSize: pool})
	}
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: pool})
}

// event is one line a worker printed: "hold <run> <step> <kind> <attempt>",
// "kill <run> <step> <attempt>", "ready <pid>" or "stats <json>".
type event struct {
	Worker *worker
	Kind   string
	Fields []string
}

// worker is a running worker process.
type worker struct {
	name   string
	cmd    *exec.Cmd
	pid    int
	log    string // its stderr
	exited chan struct{}
	stats  chan engine.Stats
	ready  chan struct{}
	err    error // from Wait, once exited
	// expected is set when the test itself ends the process.
	mu       sync.Mutex
	expected bool
}

func (w *worker) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(w.pid, sig); err != nil {
		t.Fatalf("signal %v to worker %s (pid %d): %v", sig, w.name, w.pid, err)
	}
}

// kill SIGKILLs the worker and waits until it is gone.
func (w *worker) kill(t testing.TB) {
	t.Helper()
	w.mu.Lock()
	w.expected = true
	w.mu.Unlock()
	syscall.Kill(w.pid, syscall.SIGCONT)
	w.signal(t, syscall.SIGKILL)
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("worker %s did not die after SIGKILL", w.name)
	}
}

// alive reports whether the process is still running.
func (w *worker) alive() bool {
	select {
	case <-w.exited:
		return false
	default:
		return true
	}
}

// cluster is one scenario's world: a database, a Redis namespace, a
// triggering engine in the test process, and worker processes.
type cluster struct {
	t      *testing.T
	dsn    string // direct DSN of the scenario's database
	db     *sql.DB
	store  *mysql.Store // the test process's store (direct)
	rdb    redis.UniversalClient
	prefix string
	logDir string
	eng    *engine.Engine // triggers runs; runs no steps
	base   childConfig
	events chan event

	mu      sync.Mutex
	workers []*worker
	respawn bool
	closing bool
	n       int
}

type clusterOptions struct {
	// Redis is the address to use; empty means the shared Redis with a
	// private key prefix.
	Redis string
	// RedisCluster, when set, are the nodes of a Redis Cluster to use
	// instead of Redis.
	RedisCluster []string
	// StoreDSN rewrites the DSN workers use for the store (e.g. through a
	// proxy); nil means direct.
	StoreDSN func(dsn string) string
	// TriggerDSN, like StoreDSN, for the test process's triggering engine.
	TriggerDSN func(dsn string) string
	Configure  func(c *childConfig)
	// TracerProvider, when set, traces the test process's triggering
	// engine.
	TracerProvider trace.TracerProvider
	// NodeHeartbeat and NodeTimeout configure the triggering engine's
	// node registry (zero: the defaults); its Nodes and AllNodes count
	// nodes alive by its NodeTimeout.
	NodeHeartbeat, NodeTimeout time.Duration
}

func newCluster(t *testing.T, o clusterOptions) *cluster {
	t.Helper()
	dsn := testenv.MySQLDatabase(t)
	ctx := context.Background()
	st, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range schemaSQL {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("effects schema: %v", err)
		}
	}
	addr := o.Redis
	if addr == "" && len(o.RedisCluster) == 0 {
		addr = testenv.RequireRedis(t)
	}
	rdb := newRedis(addr, o.RedisCluster, 16)
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.KeyPrefix(t)
	if o.Redis == "" && len(o.RedisCluster) == 0 {
		testenv.DeleteKeys(t, rdb, prefix)
	}
	c := &cluster{
		t: t, dsn: dsn, logDir: t.TempDir(), db: db, store: st, rdb: rdb, prefix: prefix,
		events: make(chan event, 1024),
		base: childConfig{
			StoreDSN: dsn, EffectsDSN: dsn, RedisAddr: addr, RedisCluster: o.RedisCluster, Prefix: prefix,
			Concurrency: 8, Lease: 1500 * time.Millisecond, Heartbeat: 300 * time.Millisecond,
			Reconcile: 300 * time.Millisecond, DeliveryLimit: 3, Shutdown: 5 * time.Second,
		},
	}
	if o.StoreDSN != nil {
		c.base.StoreDSN = o.StoreDSN(dsn)
	}
	if o.Configure != nil {
		o.Configure(&c.base)
	}
	tst := st
	if o.TriggerDSN != nil {
		ts, err := mysql.Open(ctx, mysql.Config{DSN: o.TriggerDSN(dsn)})
		if err != nil {
			t.Fatalf("mysql via proxy: %v", err)
		}
		t.Cleanup(func() { ts.Close() })
		tst = ts
	}
	wfs, err := workflows(nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{
		Store: tst, Redis: rdb, Prefix: prefix, NoWorkers: true, ReconcileInterval: -1, TracerProvider: o.TracerProvider,
		NodeHeartbeat: o.NodeHeartbeat, NodeTimeout: o.NodeTimeout,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(wfs...); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.eng = eng
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Stop(ctx)
	})
	// Registered last, so it runs first: no worker outlives its scenario.
	t.Cleanup(c.killAll)
	return c
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// start starts n worker processes with the cluster's config, adjusted by
// configure, and waits until each is ready.
func (c *cluster) start(n int, configure func(*childConfig)) []*worker {
	c.t.Helper()
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = c.startOne(configure)
	}
	for _, w := range ws {
		select {
		case <-w.ready:
		case <-w.exited:
			c.t.Fatalf("worker %s exited before it was ready: %v\n%s", w.name, w.err, tail(w.log, 30))
		case <-time.After(30 * time.Second):
			c.t.Fatalf("worker %s not ready within 30s\n%s", w.name, tail(w.log, 30))
		}
	}
	return ws
}

func (c *cluster) startOne(configure func(*childConfig)) *worker {
	c.t.Helper()
	c.mu.Lock()
	c.n++
	cfg := c.base
	cfg.Name = fmt.Sprintf("w%d", c.n)
	c.mu.Unlock()
	if configure != nil {
		configure(&cfg)
	}
	raw, _ := json.Marshal(cfg)
	logPath := filepath.Join(c.logDir, cfg.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start worker: %v", err)
	}
	w := &worker{name: cfg.Name, cmd: cmd, pid: cmd.Process.Pid, log: logPath,
		exited: make(chan struct{}), stats: make(chan engine.Stats, 1), ready: make(chan struct{})}
	c.mu.Lock()
	c.workers = append(c.workers, w)
	c.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "faults ")
			if !ok {
				continue
			}
			f := strings.Fields(line)
			switch f[0] {
			case "ready":
				close(w.ready)
			case "stats":
				var s engine.Stats
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "stats ")), &s) == nil {
					w.stats <- s
				}
			default:
				select {
				case c.events <- event{Worker: w, Kind: f[0], Fields: f[1:]}:
				default:
				}
			}
		}
		w.err = cmd.Wait()
		close(w.exited)
		c.exited(w)
	}()
	return w
}

// exited restarts a worker that died on its own when respawn is on.
func (c *cluster) exited(w *worker) {
	c.mu.Lock()
	again := c.respawn && !c.closing
	c.mu.Unlock()
	w.mu.Lock()
	expected := w.expected
	w.mu.Unlock()
	if again && !expected {
		c.startOne(nil)
	}
}

// setRespawn makes the cluster replace every worker that dies on its own.
func (c *cluster) setRespawn(on bool) {
	c.mu.Lock()
	c.respawn = on
	c.mu.Unlock()
}

// killAll SIGKILLs every worker still running and waits for them.
func (c *cluster) killAll() {
	c.mu.Lock()
	c.closing = true
	ws := append([]*worker(nil), c.workers...)
	c.mu.Unlock()
	for _, w := range ws {
		if !w.alive() {
			continue
		}
		w.mu.Lock()
		w.expected = true
		w.mu.Unlock()
		syscall.Kill(w.pid, syscall.SIGCONT)
		syscall.Kill(w.pid, syscall.SIGKILL)
		<-w.exited
	}
	if c.t.Failed() {
		for _, w := range ws {
			c.t.Logf("--- log of worker %s (pid %d), last lines:\n%s", w.name, w.pid, tail(w.log, 40))
		}
	}
}

// stop SIGTERMs a worker and returns its final Stats.
func (c *cluster) stop(w *worker, within time.Duration) engine.Stats {
	c.t.Helper()
	w.mu.Lock()
	w.expected = true
	w.mu.Unlock()
	w.signal(c.t, syscall.SIGTERM)
	select {
	case s := <-w.stats:
		<-w.exited
		return s
	case <-w.exited:
		c.t.Fatalf("worker %s exited without stats: %v\n%s", w.name, w.err, tail(w.log, 30))
	case <-time.After(within):
		c.t.Fatalf("worker %s did not stop within %v\n%s", w.name, within, tail(w.log, 30))
	}
	return engine.Stats{}
}

// waitEvent waits for the next event of kind matching the fields given
// (a prefix of the event's fields), dropping others.
func (c *cluster) waitEvent(timeout time.Duration, kind string, fields ...string) event {
	c.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case ev := <-c.events:
			if ev.Kind != kind || len(ev.Fields) < len(fields) {
				continue
			}
			match := true
			for i, f := range fields {
				if ev.Fields[i] != f {
					match = false
				}
			}
			if match {
				return ev
			}
		case <-deadline.C:
			c.t.Fatalf("no %q event %v within %v", kind, fields, timeout)
		}
	}
}

// trigger starts a run of wf with p (a plan, or any input) as input.
func (c *cluster) trigger(wf string, p any) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := c.eng.Trigger(ctx, wf, p)
	if err != nil {
		c.t.Fatalf("trigger %s: %v", wf, err)
	}
	return id
}

// waitRuns waits until every run is terminal and returns them.
func (c *cluster) waitRuns(ids []string, timeout time.Duration) map[string]persistence.Run {
	c.t.Helper()
	runs := map[string]persistence.Run{}
	testenv.Eventually(c.t, timeout, func() bool {
		for _, id := range ids {
			if r, ok := runs[id]; ok && r.Status.Terminal() {
				continue
			}
			r, err := c.store.RunGet(context.Background(), id)
			if err != nil || !r.Status.Terminal() {
				return false
			}
			runs[id] = r
		}
		return true
	}, "%d runs terminal (%d are)", len(ids), len(runs))
	return runs
}

// stepStatus reads one step's status.
func (c *cluster) stepStatus(run, step string) persistence.StepStatus {
	s, err := c.store.StepGet(context.Background(), run, step)
	if err != nil {
		return ""
	}
	return s.Status
}

// effectRow is one row of the effects table.
type effectRow struct {
	Key, Kind, RunID, Step string
	Deliveries             int
}

func (c *cluster) effects(run string) map[string]effectRow {
	c.t.Helper()
	rows, err := c.db.Query(`SELECT idem_key, kind, run_id, step, deliveries FROM effects WHERE run_id = ?`, run)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]effectRow{}
	for rows.Next() {
		var e effectRow
		if err := rows.Scan(&e.Key, &e.Kind, &e.RunID, &e.Step, &e.Deliveries); err != nil {
			c.t.Fatal(err)
		}
		out[e.Step+"/"+e.Kind] = e
	}
	return out
}

// invocations counts handler calls of a run's step by kind.
func (c *cluster) invocations(run, step, kind string) int {
	c.t.Helper()
	var n int
	if err := c.db.QueryRow(`SELECT COUNT(*) FROM invocations WHERE run_id = ? AND step = ? AND kind = ?`, run, step, kind).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// recovery is one line of the suite's summary: how long a scenario took to
// recover from its fault.
func logRecovery(t *testing.T, what string, d time.Duration) {
	t.Logf("RECOVERY %s: %v", what, d.Round(time.Millisecond))
}

package bench

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/steps"
)

// ChildEnv is the environment variable that makes `dagflow bench` the
// worker process of a --procs session: it holds the childSpec as JSON.
const ChildEnv = "DAGFLOW_BENCH_CHILD"

// childSpec is what the parent of a --procs session tells each worker
// process.
type childSpec struct {
	DSN         string   // with the session's database
	RedisAddr   string   // a single Redis, or
	Cluster     []string // the nodes of a Redis Cluster
	Prefix      string
	Workers     int
	Queues      []string // one order workflow per queue: order-<i> on Queues[i]
	MaxOpenConn int
}

// ProcsResult is what RunProcs measured: one JSON line per session.
type ProcsResult struct {
	Mode    string `json:"mode"` // "procs"
	Servers string `json:"servers"`
	Commit  string `json:"commit"`
	CPUs    int    `json:"cpus"`
	Procs   int    `json:"procs"`
	Queues  int    `json:"queues"`
	// QueueMasters are the Cluster masters the queues' hash tags land on
	// (empty on a single Redis).
	QueueMasters []string `json:"queue_masters,omitempty"`
	Runs         int      `json:"runs"`
	Workers      int      `json:"workers_per_proc"`
	Triggers     int      `json:"triggers"`
	Seconds      float64  `json:"seconds"`
	StepsPerS    float64  `json:"steps_per_s"`
	// StepsByProc are the full-load steps each worker process ran.
	StepsByProc []int64 `json:"steps_by_proc"`
	// CPU seconds per 1,000 steps: the worker processes together, the
	// triggering process (the bench itself: Trigger and run creation),
	// every redis-server of the setup, and the MySQL server (nil where
	// its process cannot be read: not on this machine).
	EngineCPUPer1000  float64  `json:"engine_cpu_s_per_1000_steps"`
	TriggerCPUPer1000 float64  `json:"trigger_cpu_s_per_1000_steps"`
	RedisCPUPer1000   *float64 `json:"redis_cpu_s_per_1000_steps"`
	MySQLCPUPer1000   *float64 `json:"mysql_cpu_s_per_1000_steps"`
	MachineCPUBusy    *float64 `json:"machine_cpu_busy"`
	RedisCPUShare     *float64 `json:"redis_busiest_server_cpu_share"`
	MySQLCPUShare     *float64 `json:"mysql_cpu_share"`
	RowLockWaits      int64    `json:"innodb_row_lock_waits"`
	RowLockTimeMs     int64    `json:"innodb_row_lock_time_ms"`
	Deadlocks         int64    `json:"innodb_deadlocks"`
	MySQLCommitsPerS  float64  `json:"mysql_commits_per_s"`
	Errors            int64    `json:"errors"`
	// Steps per claim and per completion transaction over the worker
	// processes, and MySQL commits per step (Com_commit, global).
	StepsPerClaimTx    float64   `json:"steps_per_claim_tx"`
	StepsPerCompleteTx float64   `json:"steps_per_complete_tx"`
	CommitsPerStep     float64   `json:"mysql_commits_per_step"`
	RedisServersCPUSec []float64 `json:"redis_servers_cpu_s"`
}

// childProgress is a worker process's last progress line.
type childProgress struct {
	steps, dead, errs int64
	cpu               time.Duration
	// Claim and completion transactions and the steps they carried.
	claimTx, claimed, commitTx, committed int64
}

func (p *childProgress) add(q *childProgress) {
	p.steps += q.steps
	p.dead += q.dead
	p.errs += q.errs
	p.cpu += q.cpu
	p.claimTx += q.claimTx
	p.claimed += q.claimed
	p.commitTx += q.commitTx
	p.committed += q.committed
}

// child is a running worker process of the session.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	last  atomic.Pointer[childProgress]
	ready chan struct{}
	done  chan error
}

// RunProcs measures the order workflow with cfg.Procs worker processes of
// this binary (each an engine node with cfg.Workers slots) on the same
// MySQL and Redis, the bench itself only triggering runs (round robin over
// cfg.Queues order workflows, one per queue): cfg.Warmup runs, then
// cfg.Runs at full load. It reports steps/s over all processes and the CPU
// per step of the worker processes, the triggering process and the
// servers apart, read from /proc.
func RunProcs(ctx context.Context, cfg Config, stderr io.Writer) (*ProcsResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Embedded {
		return nil, errors.New("-procs needs the servers; it cannot be used with -embedded")
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	progress := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }

	mc, err := gomysql.ParseDSN(cfg.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("-mysql-dsn: %w", err)
	}
	mc.DBName = ""
	serverDB, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("-mysql-dsn: %w", err)
	}
	defer serverDB.Close()
	var version string
	if err := serverDB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("mysql at %s: %w", mc.Addr, err)
	}
	name := "dagflow_bench_" + strings.ReplaceAll(uuid.NewString()[:13], "-", "")
	if _, err := serverDB.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return nil, fmt.Errorf("create the bench database: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if _, err := serverDB.ExecContext(dctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			fmt.Fprintf(stderr, "bench: drop database %s: %v\n", name, err)
		}
	}()
	mc.DBName = name
	dsn := mc.FormatDSN()
	st, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true, MaxOpenConns: cfg.Triggers + 8})
	if err != nil {
		return nil, err
	}
	defer st.Close()

	prefix := "dagflow-bench-" + uuid.NewString()[:8]
	var rdb redis.UniversalClient
	var redisNodes []*redis.Client // every server, for INFO
	if len(cfg.RedisCluster) > 0 {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.RedisCluster, PoolSize: cfg.Triggers + 16})
		rdb = cc
		if err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
			return nil, fmt.Errorf("redis cluster %v: %w", cfg.RedisCluster, err)
		}
		var mu sync.Mutex
		cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			redisNodes = append(redisNodes, redis.NewClient(&redis.Options{Addr: c.Options().Addr}))
			return nil
		})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, PoolSize: cfg.Triggers + 16})
		redisNodes = append(redisNodes, redis.NewClient(&redis.Options{Addr: cfg.RedisAddr}))
	}
	defer func() {
		for _, n := range redisNodes {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := deletePrefix(dctx, n, prefix); err != nil && !strings.Contains(err.Error(), "READONLY") {
				fmt.Fprintf(stderr, "bench: delete keys under %s on %s: %v\n", prefix, n.Options().Addr, err)
			}
			cancel()
			n.Close()
		}
		rdb.Close()
	}()
	redisPIDs, redisVersion, err := redisServerPIDs(ctx, redisNodes)
	if err != nil {
		return nil, err
	}
	mysqlPID := processByName("mariadbd", "mysqld")

	queues, masters, err := pickQueues(ctx, rdb, cfg.Queues)
	if err != nil {
		return nil, err
	}
	res := &ProcsResult{
		Mode: "procs", Procs: cfg.Procs, Queues: len(queues), QueueMasters: masters, Runs: cfg.Runs,
		Workers: cfg.Workers, Triggers: cfg.Triggers, CPUs: numCPU(),
		Servers: fmt.Sprintf("MySQL %s at %s + Redis %s (%d servers)", version, mc.Addr, redisVersion, len(redisNodes)),
	}
	res.Commit, _ = buildCommit()

	wfs := make([]*dag.Workflow, len(queues))
	for i, q := range queues {
		if wfs[i], err = benchWorkflow(fmt.Sprintf("order-%d", i), q, nil); err != nil {
			return nil, err
		}
	}
	trig, err := engine.New(engine.Config{
		Store: st, Redis: rdb, Prefix: prefix, NoWorkers: true,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return nil, err
	}
	if err := trig.Register(wfs...); err != nil {
		return nil, err
	}
	if err := trig.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		trig.Stop(sctx)
	}()

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec := childSpec{DSN: dsn, RedisAddr: cfg.RedisAddr, Cluster: cfg.RedisCluster, Prefix: prefix,
		Workers: cfg.Workers, Queues: queues, MaxOpenConn: 32}
	raw, _ := json.Marshal(spec)
	children := make([]*child, cfg.Procs)
	defer func() {
		for _, c := range children {
			if c != nil {
				c.stdin.Close() // the child stops when its stdin ends
				select {
				case <-c.done:
				case <-time.After(30 * time.Second):
					c.cmd.Process.Kill()
					<-c.done
				}
			}
		}
	}()
	for i := range children {
		c, err := startChild(self, string(raw), stderr)
		if err != nil {
			return nil, err
		}
		children[i] = c
	}
	for i, c := range children {
		select {
		case <-c.ready:
		case err := <-c.done:
			return nil, fmt.Errorf("worker process %d exited before it was ready: %v", i, err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	sum := func() (all childProgress, by []int64) {
		for _, c := range children {
			p := c.last.Load()
			if p == nil {
				p = &childProgress{}
			}
			all.add(p)
			by = append(by, p.steps)
		}
		return
	}
	phase := func(n int) error {
		b, _ := sum()
		base := b.steps
		var next atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, cfg.Triggers)
		for range cfg.Triggers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= n || ctx.Err() != nil {
						return
					}
					if _, err := trig.Trigger(ctx, wfs[i%len(wfs)].Name(), nil); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			return err
		}
		want := base + int64(n*len(orderSteps))
		lastLog := time.Now()
		for {
			all, _ := sum()
			steps, dead := all.steps, all.dead
			if steps >= want {
				return nil
			}
			if dead > 0 {
				return fmt.Errorf("%d steps were dead-lettered; see the logs", dead)
			}
			if time.Since(lastLog) > 10*time.Second {
				lastLog = time.Now()
				progress("  %d of %d steps done", steps-base, want-base)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if cfg.Warmup > 0 {
		progress("warm-up: %d runs on %d worker processes, %d queues", cfg.Warmup, cfg.Procs, len(queues))
		if err := phase(cfg.Warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	progress("full load: %d runs on %d worker processes, %d queues", cfg.Runs, cfg.Procs, len(queues))
	lockBefore, err := innodbCounters(ctx, serverDB)
	if err != nil {
		return nil, err
	}
	p0, by0 := sum()
	trig0 := cpuTime()
	redis0 := procCPUs(redisPIDs)
	mysql0 := procCPUs([]int{mysqlPID})
	mark := markCPU()
	start := time.Now()
	if err := phase(cfg.Runs); err != nil {
		return nil, fmt.Errorf("full load: %w", err)
	}
	secs := time.Since(start).Seconds()
	_, busy := mark.since()
	trigCPU := cpuTime() - trig0
	redis1 := procCPUs(redisPIDs)
	mysql1 := procCPUs([]int{mysqlPID})
	p1, by1 := sum()
	lockAfter, err := innodbCounters(ctx, serverDB)
	if err != nil {
		return nil, err
	}
	k := float64(cfg.Runs*len(orderSteps)) / 1000
	res.Seconds = round3(secs)
	res.StepsPerS = round3(float64(cfg.Runs*len(orderSteps)) / secs)
	for i := range by1 {
		res.StepsByProc = append(res.StepsByProc, by1[i]-by0[i])
	}
	res.EngineCPUPer1000 = round3((p1.cpu - p0.cpu).Seconds() / k)
	if n := p1.claimTx - p0.claimTx; n > 0 {
		res.StepsPerClaimTx = round3(float64(p1.claimed-p0.claimed) / float64(n))
	}
	if n := p1.commitTx - p0.commitTx; n > 0 {
		res.StepsPerCompleteTx = round3(float64(p1.committed-p0.committed) / float64(n))
	}
	res.CommitsPerStep = round3(float64(lockAfter["Com_commit"]-lockBefore["Com_commit"]) / (k * 1000))
	res.TriggerCPUPer1000 = round3(trigCPU.Seconds() / k)
	res.MachineCPUBusy = busy
	if redis0 != nil && redis1 != nil {
		var total, busiest float64
		for i := range redis0 {
			d := redis1[i] - redis0[i]
			total += d
			busiest = max(busiest, d)
			res.RedisServersCPUSec = append(res.RedisServersCPUSec, round3(d))
		}
		res.RedisCPUPer1000 = ptr(round3(total / k))
		res.RedisCPUShare = ptr(round3(busiest / secs))
	}
	if mysqlPID > 0 && mysql0 != nil && mysql1 != nil {
		d := mysql1[0] - mysql0[0]
		res.MySQLCPUPer1000 = ptr(round3(d / k))
		res.MySQLCPUShare = ptr(round3(d / secs))
	}
	res.RowLockWaits = lockAfter["Innodb_row_lock_waits"] - lockBefore["Innodb_row_lock_waits"]
	res.RowLockTimeMs = lockAfter["Innodb_row_lock_time"] - lockBefore["Innodb_row_lock_time"]
	res.Deadlocks = lockAfter["Innodb_deadlocks"] - lockBefore["Innodb_deadlocks"]
	res.MySQLCommitsPerS = round3(float64(lockAfter["Com_commit"]-lockBefore["Com_commit"]) / secs)
	res.Errors = p1.errs - p0.errs
	return res, nil
}

// Print writes r as one JSON line.
func (r *ProcsResult) Print(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// benchWorkflow is the order workflow with no-op steps, named name, its
// steps on queue q; done (if set) is called after each step.
func benchWorkflow(name, q string, done func()) (*dag.Workflow, error) {
	noop := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		if done != nil {
			done()
		}
		return json.RawMessage(`{"ok":true}`), nil
	})
	return dag.New(name, dag.DefaultQueue(q)).
		Step("reserve", noop).
		Step("notify", noop, dag.After("reserve")).
		Step("points", noop, dag.After("reserve")).
		Step("ship", noop, dag.After("notify", "points")).
		Build()
}

// pickQueues names n queues. On a Redis Cluster it picks names whose
// hash tags spread over the masters (each queue on the master holding the
// fewest so far) and returns each queue's master.
func pickQueues(ctx context.Context, rdb redis.UniversalClient, n int) ([]string, []string, error) {
	n = max(n, 1)
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		var qs []string
		for i := range n {
			qs = append(qs, "bench-"+strconv.Itoa(i))
		}
		return qs, nil, nil
	}
	var mu sync.Mutex
	used := map[string]int{}
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		used[c.Options().Addr] = 0
		return nil
	}); err != nil {
		return nil, nil, err
	}
	var qs, at []string
	for i := 0; len(qs) < n && i < 10000; i++ {
		q := "bench-" + strconv.Itoa(i)
		m, err := cc.MasterForKey(ctx, "{"+q+"}")
		if err != nil {
			return nil, nil, err
		}
		addr := m.Options().Addr
		least := n
		for _, v := range used {
			least = min(least, v)
		}
		if used[addr] > least {
			continue
		}
		used[addr]++
		qs = append(qs, q)
		at = append(at, addr)
	}
	return qs, at, nil
}

// startChild starts a worker process and reads its protocol lines:
// "ready", then "progress <succeeded> <dead> <errors> <cpu ns> <claim
// txs> <claimed> <completion txs> <completed>".
func startChild(self, spec string, stderr io.Writer) (*child, error) {
	cmd := exec.Command(self, "bench")
	cmd.Env = append(os.Environ(), ChildEnv+"="+spec)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a worker process: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin, ready: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		readied := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 1 && f[0] == "ready" && !readied:
				readied = true
				close(c.ready)
			case len(f) == 9 && f[0] == "progress":
				var v [8]int64
				for i := range v {
					v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
				}
				c.last.Store(&childProgress{steps: v[0], dead: v[1], errs: v[2], cpu: time.Duration(v[3]),
					claimTx: v[4], claimed: v[5], commitTx: v[6], committed: v[7]})
			}
		}
		c.done <- cmd.Wait()
	}()
	return c, nil
}

// RunChild is the body of a worker process of a --procs session: an
// engine node running the session's order workflows until its stdin
// ends, printing its progress to out every 10 ms.
func RunChild(ctx context.Context, rawSpec string, in io.Reader, out io.Writer) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(rawSpec), &spec); err != nil {
		return fmt.Errorf("%s: %w", ChildEnv, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, in)
		cancel()
	}()
	st, err := mysql.Open(ctx, mysql.Config{DSN: spec.DSN, MaxOpenConns: spec.MaxOpenConn})
	if err != nil {
		return err
	}
	defer st.Close()
	var rdb redis.UniversalClient
	if len(spec.Cluster) > 0 {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: spec.Cluster, PoolSize: spec.Workers + 16})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: spec.RedisAddr, PoolSize: spec.Workers + 16})
	}
	defer rdb.Close()
	var wfs []*dag.Workflow
	for i, q := range spec.Queues {
		wf, err := benchWorkflow(fmt.Sprintf("order-%d", i), q, nil)
		if err != nil {
			return err
		}
		wfs = append(wfs, wf)
	}
	e, err := engine.New(engine.Config{
		Store: st, Redis: rdb, Prefix: spec.Prefix, Concurrency: spec.Workers,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return err
	}
	if err := e.Register(wfs...); err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "ready")
	w.Flush()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	report := func() {
		s := e.Stats()
		fmt.Fprintf(w, "progress %d %d %d %d %d %d %d %d\n", s.StepsSucceeded, s.StepsDead, s.Errors, cpuTime().Nanoseconds(),
			s.ClaimBatches, s.ClaimItems, s.CommitBatches, s.CommitItems)
		w.Flush()
	}
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			report()
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	return e.Stop(sctx)
}

// redisServerPIDs are the process ids of the Redis servers (INFO server's
// process_id), and their version.
func redisServerPIDs(ctx context.Context, nodes []*redis.Client) ([]int, string, error) {
	var pids []int
	version := "?"
	for _, n := range nodes {
		info, err := n.Info(ctx, "server").Result()
		if err != nil {
			return nil, "", fmt.Errorf("redis at %s: %w", n.Options().Addr, err)
		}
		version = infoField(info, "redis_version")
		pid, _ := strconv.Atoi(infoField(info, "process_id"))
		pids = append(pids, pid)
	}
	return pids, version, nil
}

// innodbCounters reads the global row lock, deadlock and commit counters.
func innodbCounters(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_row_lock_waits', 'Innodb_row_lock_time', 'Innodb_deadlocks', 'Com_commit')")
	if err != nil {
		return nil, fmt.Errorf("mysql status: %w", err)
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		m[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return m, rows.Err()
}

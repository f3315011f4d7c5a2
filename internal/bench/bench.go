package bench

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/bench/seed"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// orderSteps are the order workflow's steps; stepIndex numbers them.
var orderSteps = []string{"reserve", "notify", "points", "ship"}

func stepIndex(name string) int {
	switch name {
	case "reserve":
		return 0
	case "notify":
		return 1
	case "points":
		return 2
	case "ship":
		return 3
	}
	return -1
}

// runRec is what the bench observes of one run in process: when Trigger
// was called and when each step's handler started and returned (unix ns;
// 0 = not yet).
type runRec struct {
	trigger  atomic.Int64 // Trigger called (unix ns)
	returned atomic.Int64 // Trigger returned (unix ns)
	started  [4]atomic.Int64
	ended    [4]atomic.Int64
}

// recorder maps run ids to their records; handlers and triggers both
// create the record, whichever comes first (a root step may start before
// Trigger returns).
type recorder struct {
	m sync.Map // run id -> *runRec
}

func (r *recorder) get(id string) *runRec {
	if v, ok := r.m.Load(id); ok {
		return v.(*runRec)
	}
	v, _ := r.m.LoadOrStore(id, new(runRec))
	return v.(*runRec)
}

// bench is one session: what Run measures with.
type bench struct {
	cfg    Config
	env    *environment
	stderr io.Writer
	eng    *engine.Engine
	rec    atomic.Pointer[recorder]
}

// Run measures the order workflow (reserve -> notify || points -> ship)
// with no-op handlers as cfg says, in a database and under a Redis key
// prefix of its own that it removes when it returns (also when ctx ends),
// and returns the figures. Progress lines and the engine's errors go to
// stderr.
func Run(ctx context.Context, cfg Config, stderr io.Writer) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	env, err := openEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Cleanup must run even when ctx was cancelled (SIGINT, timeout).
	defer env.close()
	b := &bench{cfg: cfg, env: env, stderr: stderr}
	return b.run(ctx)
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.stderr, "bench: "+format+"\n", args...)
}

func (b *bench) run(ctx context.Context) (_ *Result, err error) {
	cfg := b.cfg
	res := newResult(cfg, b.env)
	var latLog *os.File
	if cfg.LatencyLog != "" {
		// Created first, so that a bad path fails before the measurement.
		if latLog, err = os.Create(cfg.LatencyLog); err != nil {
			return nil, fmt.Errorf("-latency-log: %w", err)
		}
		defer func() {
			if cerr := latLog.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("-latency-log: %w", cerr)
			}
		}()
		if _, err := fmt.Fprintln(latLog, "phase,step,ready_unix_ns,dispatch_us"); err != nil {
			return nil, fmt.Errorf("-latency-log: %w", err)
		}
	}

	// Every run of the history finished before this.
	historyEnd := time.Now()
	first := 0
	if cfg.History > 0 && cfg.HistoryDB != "" {
		// A kept database tops its history up: the runs it holds count.
		if err := b.env.mysqlDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM workflow_runs").Scan(&first); err != nil {
			return nil, fmt.Errorf("count the runs of -history-db %s: %w", cfg.HistoryDB, err)
		}
		first = min(first, cfg.History)
		b.progress("database %s holds %d runs", cfg.HistoryDB, first)
	}
	if cfg.History > first {
		b.progress("pre-filling %d finished runs", cfg.History-first)
		t0 := time.Now()
		next := 0
		err := seed.FinishedRuns(ctx, b.env.mysqlDB, seed.Params{Runs: cfg.History, First: first, Progress: func(done int) {
			if done >= next {
				b.progress("  %d runs written (%.0f runs/s)", done, float64(done-first)/time.Since(t0).Seconds())
				next = done + max(cfg.History/10, 1)
			}
		}})
		if err != nil {
			return nil, err
		}
		res.HistorySeedSeconds = ptr(time.Since(t0).Seconds())
		// The seed leaves up to a buffer pool of dirty pages, which the
		// server would flush while the measurement runs: a cost of having
		// just written the history, not of having it.
		t1 := time.Now()
		// TiDB has no buffer pool to write back: its storage has its own
		// write path.
		if !b.env.tidb {
			if err := writeBack(ctx, b.env.mysqlDB); err != nil {
				return nil, err
			}
		}
		res.HistorySettleSeconds = ptr(time.Since(t1).Seconds())
		b.progress("  history written back in %.1f s", *res.HistorySettleSeconds)
	}

	noop := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		now := time.Now().UnixNano()
		if r := b.rec.Load(); r != nil {
			if i := stepIndex(sc.Step); i >= 0 {
				rr := r.get(sc.RunID)
				rr.started[i].CompareAndSwap(0, now)
				rr.ended[i].CompareAndSwap(0, time.Now().UnixNano())
			}
		}
		return json.RawMessage(`{"ok":true}`), nil
	})
	wf, err := dag.New("order").
		Step("reserve", noop).
		Step("notify", noop, dag.After("reserve")).
		Step("points", noop, dag.After("reserve")).
		Step("ship", noop, dag.After("notify", "points")).
		Build()
	if err != nil {
		return nil, err
	}
	ecfg := engine.Config{
		Store: b.env.store, Redis: b.env.rdb, Prefix: b.env.prefix + ":m", Concurrency: cfg.Workers,
		Logger: slog.New(slog.NewTextHandler(b.stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		// No retention loop: -purge sweeps when asked, and a run without
		// it measures the engine without.
		Retention: engine.Retention{Keep: -1, Share: cfg.PurgeShare},
	}
	if cfg.Metrics {
		ecfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Tracing {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}))
		defer tp.Shutdown(context.Background())
		ecfg.TracerProvider = tp
	}
	e, err := engine.New(ecfg)
	if err != nil {
		return nil, err
	}
	if err := e.Register(wf); err != nil {
		return nil, err
	}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	b.eng = e
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e.Stop(sctx)
		}
	}
	defer stop()

	// What the servers do while the engine idles (its reconciler, and
	// other clients of a shared server), for reading the deltas below.
	if idle, err := b.idleRates(ctx, 2*time.Second); err != nil {
		return nil, err
	} else {
		res.MySQLIdleQuestionsPerS, res.RedisIdleCallsPerS = idle.mysqlQuestions, idle.redisCalls
	}

	// One reconcile pass, timed with the engine idle: its store reads
	// (due runs, queued steps, due retries, expired leases, compensating
	// runs) and queue sweeps, over whatever history there is.
	if ms, err := b.reconcilePass(ctx, 21); err != nil {
		return nil, err
	} else {
		res.ReconcilePassMs = &ms
	}

	if cfg.Warmup > 0 {
		b.progress("warm-up: %d runs", cfg.Warmup)
		if _, err := b.closedLoop(ctx, cfg.Warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}

	b.progress("full load: %d runs, %d trigger goroutines, %d workers", cfg.Runs, cfg.Triggers, cfg.Workers)
	before, err := b.env.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var profFile *os.File
	if cfg.CPUProfile != "" {
		if profFile, err = os.Create(cfg.CPUProfile); err != nil {
			return nil, fmt.Errorf("-cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(profFile); err != nil {
			profFile.Close()
			return nil, fmt.Errorf("-cpuprofile: %w", err)
		}
	}
	type purged struct {
		res engine.PurgeResult
		err error
	}
	var purgeDone chan purged
	purgeCtx, stopPurge := context.WithCancel(ctx)
	defer stopPurge()
	if cfg.Purge {
		purgeDone = make(chan purged, 1)
		go func() {
			r, err := e.Purge(purgeCtx, engine.PurgeParams{Before: historyEnd})
			purgeDone <- purged{r, err}
		}()
	}
	full, err := b.closedLoop(ctx, cfg.Runs)
	if purgeDone != nil {
		stopPurge()
		p := <-purgeDone
		if p.err != nil && !errors.Is(p.err, context.Canceled) {
			return nil, fmt.Errorf("-purge: %w", p.err)
		}
		share := ecfg.Retention.Share
		if share == 0 {
			share = engine.DefaultRetentionShare
		}
		res.PurgedRuns, res.PurgeBatches, res.PurgeShare = &p.res.Runs, &p.res.Batches, &share
		b.progress("  purged %d runs in %d batches during the full load", p.res.Runs, p.res.Batches)
	}
	if profFile != nil {
		pprof.StopCPUProfile()
		if cerr := profFile.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("-cpuprofile: %w", cerr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("full load: %w", err)
	}
	after, err := b.env.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	res.setFullLoad(full, before, after)

	lat, err := b.latencies(ctx, full)
	if err != nil {
		return nil, err
	}
	res.setLatencies(lat, "")
	if err := writeLatencyLog(latLog, "full", lat); err != nil {
		return nil, err
	}

	if rate := cfg.Rate.PerSecond; rate > 0 || cfg.Rate.Percent > 0 {
		if rate == 0 {
			rate = full.runsPerSecond() * cfg.Rate.Percent / 100
		}
		b.progress("fixed rate: %.1f runs/s for %v", rate, cfg.Duration)
		rp, err := b.openLoop(ctx, rate, cfg.Duration)
		if err != nil {
			return nil, fmt.Errorf("fixed rate: %w", err)
		}
		rlat, err := b.latencies(ctx, rp)
		if err != nil {
			return nil, err
		}
		res.setRate(rate, rp)
		res.setLatencies(rlat, "rate")
		if err := writeLatencyLog(latLog, "rate", rlat); err != nil {
			return nil, err
		}
	}
	res.setProcess()
	stop()

	if cfg.Backlog > 0 {
		b.progress("backlog: %d queued steps, workers off", cfg.Backlog)
		bl, err := b.backlog(ctx, cfg.Backlog)
		if err != nil {
			return nil, fmt.Errorf("backlog: %w", err)
		}
		res.BacklogSteps = &bl.steps
		res.BacklogRedisBytes = &bl.bytes
		res.RedisBytesPerQueuedStep = ptr(float64(bl.bytes) / float64(bl.steps))
	}
	return res, nil
}

// phaseResult is one measured batch of runs.
type phaseResult struct {
	ids         []string
	rec         *recorder
	start       time.Time
	end         time.Time // when the last step's completion was committed
	runs        int
	failed      int64   // engine errors, failed or dead steps during the phase
	claimBatch  float64 // steps per claim transaction
	commitBatch float64 // steps per completion transaction
	createBatch float64 // runs per creation transaction
	// Where the phase's steps were claimed, as fractions of its steps:
	// after a trip through Redis (claim transaction), by the completion
	// that released them, by the transaction that created their run.
	viaQueue, atRelease, atCreate float64
	triggerLate                   int // fixed rate only: triggers started over 10ms late
	// cpu is where the phase started on the CPU clocks; procCPU is this
	// process's CPU time over the phase, machineBusy the busy share of
	// all the machine's CPUs (nil where not measured).
	cpu         cpuMark
	procCPU     time.Duration
	machineBusy *float64
}

// cpuMark is a reading of this process's CPU time and the machine's CPU
// clocks.
type cpuMark struct {
	proc        time.Duration
	busy, total uint64
	ok          bool
}

func markCPU() cpuMark {
	m := cpuMark{proc: cpuTime()}
	m.busy, m.total, m.ok = machineCPU()
	return m
}

// since returns this process's CPU time since m and the busy share of
// the machine's CPUs since m (nil when it cannot be read).
func (m cpuMark) since() (time.Duration, *float64) {
	now := markCPU()
	proc := now.proc - m.proc
	if !m.ok || !now.ok || now.total <= m.total {
		return proc, nil
	}
	return proc, ptr(round3(float64(now.busy-m.busy) / float64(now.total-m.total)))
}

func (p phaseResult) seconds() float64 { return p.end.Sub(p.start).Seconds() }

func (p phaseResult) runsPerSecond() float64 { return float64(p.runs) / p.seconds() }

// cpuPer1000Steps is this process's CPU seconds per 1,000 of the phase's
// steps (0 where the CPU time cannot be read).
func (p phaseResult) cpuPer1000Steps() float64 {
	return p.procCPU.Seconds() / (float64(p.runs*len(orderSteps)) / 1000)
}

// closedLoop triggers n runs from cfg.Triggers goroutines as fast as they
// can and waits until every step of them succeeded.
func (b *bench) closedLoop(ctx context.Context, n int) (phaseResult, error) {
	rec := &recorder{}
	b.rec.Store(rec)
	base := b.eng.Stats()
	p := phaseResult{ids: make([]string, n), rec: rec, runs: n, cpu: markCPU(), start: time.Now()}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, b.cfg.Triggers)
	for range b.cfg.Triggers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := b.trigger(ctx, &p, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return p, err
	}
	return p, b.finish(ctx, &p, base)
}

// batchSizes returns the steps per claim and per completion transaction
// and the runs per creation transaction since base.
func (b *bench) batchSizes(base engine.Stats) (claim, commit, create float64) {
	st := b.eng.Stats()
	if n := st.ClaimBatches - base.ClaimBatches; n > 0 {
		claim = float64(st.ClaimItems-base.ClaimItems) / float64(n)
	}
	if n := st.CommitBatches - base.CommitBatches; n > 0 {
		commit = float64(st.CommitItems-base.CommitItems) / float64(n)
	}
	if n := st.CreateBatches - base.CreateBatches; n > 0 {
		create = float64(st.CreateItems-base.CreateItems) / float64(n)
	}
	return claim, commit, create
}

// claimPaths returns how the steps started since base were claimed, as
// fractions of them: through the queue, at release, at create.
func (b *bench) claimPaths(base engine.Stats) (viaQueue, atRelease, atCreate float64) {
	st := b.eng.Stats()
	n := float64(st.StepsStarted - base.StepsStarted)
	if n <= 0 {
		return 0, 0, 0
	}
	rel := float64(st.ClaimedAtRelease - base.ClaimedAtRelease)
	cre := float64(st.ClaimedAtCreate - base.ClaimedAtCreate)
	return (n - rel - cre) / n, rel / n, cre / n
}

// openLoop triggers runs at rate per second for d, each from its own
// goroutine at its scheduled time whether or not earlier ones returned,
// then waits until every step of them succeeded.
func (b *bench) openLoop(ctx context.Context, rate float64, d time.Duration) (phaseResult, error) {
	rec := &recorder{}
	b.rec.Store(rec)
	base := b.eng.Stats()
	n := max(int(rate*d.Seconds()), 1)
	interval := time.Duration(float64(time.Second) / rate)
	p := phaseResult{ids: make([]string, n), rec: rec, runs: n, cpu: markCPU(), start: time.Now()}
	var wg sync.WaitGroup
	var late atomic.Int64
	errs := make(chan error, n)
	// Bounds the goroutines of a rate the store cannot keep up with.
	sem := make(chan struct{}, 1024)
	for i := range n {
		due := p.start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			select {
			case <-time.After(w):
			case <-ctx.Done():
				return p, ctx.Err()
			}
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if time.Since(due) > 10*time.Millisecond {
				late.Add(1)
			}
			if err := b.trigger(ctx, &p, i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return p, err
	}
	p.triggerLate = int(late.Load())
	return p, b.finish(ctx, &p, base)
}

// trigger starts run i of phase p, noting when the call began.
func (b *bench) trigger(ctx context.Context, p *phaseResult, i int) error {
	t := time.Now()
	id, err := b.eng.Trigger(ctx, "order", nil)
	if err != nil {
		return err
	}
	r := p.rec.get(id)
	r.returned.Store(time.Now().UnixNano())
	r.trigger.Store(t.UnixNano())
	p.ids[i] = id
	return nil
}

// finish waits until every step of phase p succeeded, then notes when, and
// the phase's failures and batch sizes.
func (b *bench) finish(ctx context.Context, p *phaseResult, base engine.Stats) error {
	end, err := b.waitSteps(ctx, base, int64(p.runs*len(orderSteps)))
	if err != nil {
		return err
	}
	p.end = end
	p.procCPU, p.machineBusy = p.cpu.since()
	p.failed = b.failures(base)
	p.claimBatch, p.commitBatch, p.createBatch = b.batchSizes(base)
	p.viaQueue, p.atRelease, p.atCreate = b.claimPaths(base)
	return nil
}

// waitSteps waits until the engine counted want more step successes than
// in base and returns when it saw them.
func (b *bench) waitSteps(ctx context.Context, base engine.Stats, want int64) (time.Time, error) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	lastProgress := time.Now()
	for {
		st := b.eng.Stats()
		if st.StepsSucceeded-base.StepsSucceeded >= want {
			return time.Now(), nil
		}
		if dead := st.StepsDead - base.StepsDead; dead > 0 {
			return time.Time{}, fmt.Errorf("%d steps were dead-lettered; see the logs", dead)
		}
		if time.Since(lastProgress) > 10*time.Second {
			lastProgress = time.Now()
			b.progress("  %d of %d steps done", st.StepsSucceeded-base.StepsSucceeded, want)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d steps done: %w", st.StepsSucceeded-base.StepsSucceeded, want, ctx.Err())
		case <-tick.C:
		}
	}
}

func (b *bench) failures(base engine.Stats) int64 {
	st := b.eng.Stats()
	return (st.Errors - base.Errors) + (st.StepsFailed - base.StepsFailed) + (st.StepsDead - base.StepsDead)
}

// readyAt returns when the last of deps' handlers returned (unix ns), and
// false if one of them is not an order step or has not returned.
func readyAt(r *runRec, deps []string) (int64, bool) {
	var ready int64
	for _, d := range deps {
		i := stepIndex(d)
		if i < 0 {
			return 0, false
		}
		e := r.ended[i].Load()
		if e == 0 {
			return 0, false
		}
		ready = max(ready, e)
	}
	return ready, true
}

// latencySample are the latencies read back for a sample of a phase's runs.
type latencySample struct {
	// events are the dispatch samples (step ready -> handler started),
	// with their step and ready time. A root step is ready when its
	// run's create transaction queued it (queued_at, the store's
	// timestamp); a released step when the last of its upstream
	// handlers returned (in process: the transaction that releases it
	// stamps it with its batch's time, which can be later).
	events []dispatchEvent
	// The dispatch split: the root step (queued by its run's create
	// transaction) and the steps its upstream's completion released.
	root, released []time.Duration
	run            []time.Duration // Trigger called -> run finished (store timestamp)
	trigger        []time.Duration // Trigger called -> returned
	runs           int
}

// dispatches are the dispatch latencies of all the sampled steps.
func (l latencySample) dispatches() []time.Duration {
	out := make([]time.Duration, len(l.events))
	for i, e := range l.events {
		out[i] = e.dispatch
	}
	return out
}

// dispatchEvent is one step's dispatch: when it became ready (unix ns) and
// how long until its handler started.
type dispatchEvent struct {
	step     string
	ready    int64
	dispatch time.Duration
}

// writeLatencyLog appends l's dispatch samples to f (when not nil) as CSV
// lines of phase, step, ready time (unix ns) and dispatch latency (µs),
// in order of ready time.
func writeLatencyLog(f *os.File, phase string, l latencySample) error {
	if f == nil {
		return nil
	}
	ev := slices.Clone(l.events)
	slices.SortFunc(ev, func(a, b dispatchEvent) int { return cmp.Compare(a.ready, b.ready) })
	w := bufio.NewWriter(f)
	for _, e := range ev {
		fmt.Fprintf(w, "%s,%s,%d,%d\n", phase, e.step, e.ready, e.dispatch.Microseconds())
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("-latency-log: %w", err)
	}
	return nil
}

// latencies reads the steps of up to cfg.Sample runs of p, spread evenly
// over the phase, after the phase (so that reading does not load it).
func (b *bench) latencies(ctx context.Context, p phaseResult) (latencySample, error) {
	m := min(b.cfg.Sample, len(p.ids))
	idx := make(chan int)
	var mu sync.Mutex
	var out latencySample
	var firstErr error
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				id := p.ids[i]
				run, err := b.env.store.RunGet(ctx, id)
				var sts []persistence.StepRun
				if err == nil {
					sts, err = b.env.store.StepList(ctx, id)
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				if run.Status != persistence.RunSucceeded {
					if firstErr == nil {
						firstErr = fmt.Errorf("run %s is %s: %s", id, run.Status, run.Error)
					}
					mu.Unlock()
					continue
				}
				r := p.rec.get(id)
				if t := r.trigger.Load(); t > 0 && run.FinishedAt != nil {
					out.run = append(out.run, nonNegative(run.FinishedAt.Sub(time.Unix(0, t))))
				}
				if t, e := r.trigger.Load(), r.returned.Load(); t > 0 && e > 0 {
					out.trigger = append(out.trigger, time.Duration(e-t))
				}
				for _, s := range sts {
					k := stepIndex(s.Step)
					if k < 0 || s.QueuedAt == nil {
						continue
					}
					t := r.started[k].Load()
					if t == 0 {
						continue
					}
					if len(s.Deps) == 0 {
						d := nonNegative(time.Unix(0, t).Sub(*s.QueuedAt))
						out.root = append(out.root, d)
						out.events = append(out.events, dispatchEvent{s.Step, s.QueuedAt.UnixNano(), d})
						continue
					}
					if ready, ok := readyAt(r, s.Deps); ok {
						d := nonNegative(time.Duration(t - ready))
						out.released = append(out.released, d)
						out.events = append(out.events, dispatchEvent{s.Step, ready, d})
					}
				}
				out.runs++
				mu.Unlock()
			}
		}()
	}
	for k := range m {
		select {
		case idx <- k * len(p.ids) / m:
		case <-ctx.Done():
			firstErr = ctx.Err()
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(idx)
	wg.Wait()
	return out, firstErr
}

func nonNegative(d time.Duration) time.Duration {
	// Store times are truncated to microseconds.
	return max(d, 0)
}

// backlogResult is the Redis memory of a queue holding steps.
type backlogResult struct {
	steps int64
	bytes int64
}

// backlogWidth is how many root steps each backlog run has: a few hundred
// runs give 100,000 queued steps quickly. Step names are six characters,
// about the order workflow's average, so task ids have a realistic size.
const backlogWidth = 100

// backlog queues n steps with a worker-less engine under its own prefix
// and sums MEMORY USAGE over that prefix's keys.
func (b *bench) backlog(ctx context.Context, n int) (backlogResult, error) {
	width := min(backlogWidth, n)
	bw := dag.New("backlog")
	noop := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
	for i := range width {
		bw = bw.Step(fmt.Sprintf("step%02d", i), noop)
	}
	wf, err := bw.Build()
	if err != nil {
		return backlogResult{}, err
	}
	prefix := b.env.prefix + ":b"
	e, err := engine.New(engine.Config{
		Store: b.env.store, Redis: b.env.rdb, Prefix: prefix, NoWorkers: true, ReconcileInterval: -1,
		Logger: slog.New(slog.NewTextHandler(b.stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return backlogResult{}, err
	}
	defer e.Stop(context.Background())
	if err := e.Register(wf); err != nil {
		return backlogResult{}, err
	}
	if err := e.Start(ctx); err != nil {
		return backlogResult{}, err
	}
	base, err := b.env.prefixMemory(ctx, prefix)
	if err != nil {
		return backlogResult{}, err
	}
	runs := (n + width - 1) / width
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, b.cfg.Triggers)
	for range b.cfg.Triggers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(runs) && ctx.Err() == nil {
				if _, err := e.Trigger(ctx, "backlog", nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return backlogResult{}, err
	}
	st, err := e.Queue().Stats(ctx, dag.DefaultQueueName)
	if err != nil {
		return backlogResult{}, err
	}
	if want := int64(runs * width); st.Ready != want {
		return backlogResult{}, fmt.Errorf("the queue holds %d ready steps, want %d", st.Ready, want)
	}
	total, err := b.env.prefixMemory(ctx, prefix)
	if err != nil {
		return backlogResult{}, err
	}
	return backlogResult{steps: st.Ready, bytes: total - base}, nil
}

// idle is what the servers do while the engine waits for work.
type idle struct {
	mysqlQuestions, redisCalls *float64
}

func (b *bench) idleRates(ctx context.Context, d time.Duration) (idle, error) {
	before, err := b.env.snapshot(ctx)
	if err != nil {
		return idle{}, err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return idle{}, ctx.Err()
	}
	after, err := b.env.snapshot(ctx)
	if err != nil {
		return idle{}, err
	}
	var out idle
	secs := after.at.Sub(before.at).Seconds()
	if before.mysql != nil {
		out.mysqlQuestions = ptr(float64(after.mysql["Questions"]-before.mysql["Questions"]) / secs)
	}
	if before.redisCmds != nil {
		out.redisCalls = ptr(float64(sumCalls(after.redisCmds)-sumCalls(before.redisCmds)) / secs)
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// writeBack has the server write the run tables' dirty pages to disk
// (FLUSH TABLES ... FOR EXPORT, on the bench's own database only; the
// server's settings are not touched), so that the measurement does not pay
// for flushing the seed.
func writeBack(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("write back the history: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `FLUSH TABLES workflow_runs, step_runs, step_attempts FOR EXPORT`); err != nil {
		return fmt.Errorf("write back the history: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `UNLOCK TABLES`); err != nil {
		// The session may still hold the tables: drop the connection
		// rather than give it back to the pool.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return fmt.Errorf("write back the history: %w", err)
	}
	return nil
}

// discardSpans is a span exporter that drops what it is given: with it
// the bench measures what tracing costs the engine (making, ending and
// batching the spans), not what an exporter costs.
type discardSpans struct{}

// ExportSpans drops spans.
func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }

// Shutdown has nothing to do.
func (discardSpans) Shutdown(context.Context) error { return nil }

// reconcilePass runs n reconcile passes one after another and returns
// the median pass time in milliseconds.
func (b *bench) reconcilePass(ctx context.Context, n int) (float64, error) {
	ds := make([]float64, 0, n)
	for range n {
		t := time.Now()
		if _, err := b.eng.Reconcile(ctx); err != nil {
			return 0, fmt.Errorf("reconcile pass: %w", err)
		}
		ds = append(ds, float64(time.Since(t).Microseconds())/1000)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

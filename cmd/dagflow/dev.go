//go:build !nodev

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// newDevCmd is `dagflow dev`: an engine on an in-process Redis and a
// SQLite file with the example workflows registered. By default it keeps
// running: it triggers an order every --every (some designed to retry, to
// skip a step, or to fail and compensate), prints how each ends, and
// serves the HTTP API on --listen until SIGINT. With --once it triggers a
// batch, prints every step as it changes, and exits when all are
// finished. Unfinished runs left in the SQLite file by an earlier session
// are resumed by the reconciler: Redis is rebuilt from the store.
func newDevCmd() *cobra.Command {
	var opt devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "run the example workflows and the HTTP API on the embedded default (miniredis + SQLite), no servers",
		Long: "Run the example workflows on the embedded default (an in-process Redis and a SQLite\n" +
			"file), no servers needed. dev triggers an order every --every, with a mix of\n" +
			"outcomes (succeeds, skips a step, retries, compensates, fails), prints how each run\n" +
			"ends and serves the HTTP API on --listen until SIGINT; on loopback, and while the\n" +
			"SQLite file holds no API key, the API needs no key.\n\n" +
			"dev --once triggers --runs orders, prints every step as it changes, and exits when\n" +
			"all are finished: non-zero if a run did not end as designed.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			opt.runsGiven = fs.Changed("runs")
			if opt.once {
				for _, f := range []string{"listen", "every"} {
					if fs.Changed(f) {
						return usagef("--%s with --once: --once runs a batch and exits, serving no API", f)
					}
				}
				if !opt.runsGiven {
					opt.runs = devOnceRuns
				}
				return runDevOnce(cmd.Context(), opt, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if fs.Changed("timeout") {
				return usagef("--timeout without --once: it bounds the batch of --once")
			}
			return runDevServe(cmd.Context(), opt, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opt.dbPath, "db", "dagflow-dev.db", "SQLite file holding the runs (kept between sessions)")
	fs.StringVar(&opt.listen, "listen", defaultListen, "address of the HTTP API, host:port (port 0: any free port)")
	fs.DurationVar(&opt.every, "every", time.Second, "trigger an order this often")
	fs.BoolVar(&opt.once, "once", false, "trigger --runs orders, print their steps, and exit when all are finished")
	fs.IntVar(&opt.runs, "runs", 0, fmt.Sprintf("how many orders to trigger (default: %d with --once; without, one every --every until stopped)", devOnceRuns))
	fs.IntVar(&opt.concurrency, "concurrency", 8, "steps run at once")
	fs.BoolVarP(&opt.verbose, "verbose", "v", false, "log the engine's and the API's info messages")
	fs.DurationVar(&opt.timeout, "timeout", 2*time.Minute, "with --once: give up if the runs have not finished by then")
	fs.DurationVar(&opt.stepDelay, "step-delay", devStepDelay, "how long each example step takes (longer makes the runs easier to watch in the dashboard)")
	fs.StringVar(&opt.otlpEndpoint, "otlp-endpoint", "", otlpEndpointHelp)
	return cmd
}

// devOnceRuns is how many orders dev --once triggers by default: one of
// each outcome.
const devOnceRuns = 6

type devOptions struct {
	dbPath      string
	listen      string
	every       time.Duration
	once        bool
	runs        int
	runsGiven   bool
	concurrency int
	verbose     bool
	timeout     time.Duration
	stepDelay   time.Duration
	// otlpEndpoint exports traces there (cmd/dagflow/tracing.go).
	otlpEndpoint string
}

// devStepDelay is how long each example step takes by default: long
// enough to see the parallel steps, short enough for an order a second.
const devStepDelay = 50 * time.Millisecond

// devNode is the embedded engine of dev, not started yet.
type devNode struct {
	e     *engine.Engine
	reg   *prometheus.Registry // the engine's metrics
	svc   *orderflow.Services
	redis string // the in-process Redis's address
	tr    *tracing
	close func()
}

// openDev starts the in-process Redis, opens the SQLite file and makes an
// engine with the example workflows registered.
func openDev(ctx context.Context, opt devOptions, logger *slog.Logger, tr *tracing) (*devNode, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		tr.shutdown(logger)
		return nil, fmt.Errorf("in-process redis: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	store, err := sqlite.Open(ctx, sqlite.Config{Path: opt.dbPath, AutoMigrate: true})
	if err != nil {
		rdb.Close()
		mr.Close()
		tr.shutdown(logger)
		return nil, err // names sqlite and the file
	}
	// The spans are flushed last, after the engine stopped.
	n := &devNode{redis: mr.Addr(), tr: tr, close: func() { store.Close(); rdb.Close(); mr.Close(); tr.shutdown(logger) }}
	fail := func(err error) (*devNode, error) { n.close(); return nil, err }

	n.svc = orderflow.NewServices()
	n.svc.Delay = opt.stepDelay
	reg := steps.NewRegistry()
	if err := n.svc.Register(reg); err != nil {
		return fail(err)
	}
	n.reg = metricsRegistry()
	if n.e, err = engine.New(engine.Config{
		Store: store, Redis: rdb, Logger: logger, Concurrency: opt.concurrency,
		ReconcileInterval: 500 * time.Millisecond, PollInterval: 200 * time.Millisecond,
		Registerer: n.reg, TracerProvider: tr.provider(),
	}); err != nil {
		return fail(err)
	}
	if err := n.e.LoadWorkflows(workflows.FS, reg); err != nil {
		return fail(err)
	}
	goOrder, err := n.svc.Workflow("order_go")
	if err != nil {
		return fail(err)
	}
	if err := n.e.Register(goOrder); err != nil {
		return fail(err)
	}
	return n, nil
}

// stop stops the engine (gracefully, within 10 s) and closes the backends.
func (n *devNode) stop() {
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.e.Stop(sctx)
	n.close()
}

func (n *devNode) banner(stdout io.Writer, opt devOptions) {
	abs, _ := filepath.Abs(opt.dbPath)
	fmt.Fprintf(stdout, "dagflow dev: in-process Redis at %s, runs stored in %s\n", n.redis, abs)
	fmt.Fprintf(stdout, "workflows: %s\n", strings.Join(sortedNames(n.e.Workflows()), ", "))
	if n.tr != nil {
		fmt.Fprintf(stdout, "%s\n", n.tr.describe())
	}
}

// devRun is one order dev triggers, with the outcome it is designed for.
type devRun struct {
	label string
	wf    string
	order orderflow.Order
}

// devPlan is the i-th order of a session: the outcomes repeat every six
// orders, alternating the YAML and the Go form of the order workflow.
func devPlan(session string, i int) devRun {
	o := orderflow.Order{
		OrderID: fmt.Sprintf("%s-%d", session, i+1), Customer: fmt.Sprintf("customer%d@example.com", i+1),
		SKU: "SKU-42", Quantity: 1 + i%3, Total: float64(60 + 40*(i%devOnceRuns)),
	}
	label := "succeeds"
	switch i % 6 {
	case 1:
		label = "total under 100: points skipped"
		o.Total = 40
	case 2:
		label = "ship fails for good: compensated"
		o.FailStep = "ship"
		o.Total = 150
	case 3:
		label = "notify is flaky: retried, then succeeds"
		o.FlakyStep = "notify"
	case 5:
		label = "reserve fails for good: nothing to undo, run failed"
		o.FailStep = "reserve"
	}
	wf := "order"
	if i%2 == 1 {
		wf = "order_go"
	}
	return devRun{label, wf, o}
}

func (n *devNode) trigger(ctx context.Context, p devRun) (string, error) {
	return n.e.Trigger(ctx, p.wf, p.order, engine.IdempotencyKey("dev:"+p.order.OrderID))
}

func devLogger(stderr io.Writer, verbose bool, tr *tracing) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return nodeLogger(stderr, level, tr)
}

// devSchedule is the demo schedule dev declares: an order at the top of
// every hour, so that the schedules have something to list, pause and
// trigger.
const devSchedule = "hourly-order"

// runDevServe is dev without --once: an order every opt.every and the API
// on opt.listen, until ctx ends.
func runDevServe(ctx context.Context, opt devOptions, stdout, stderr io.Writer) error {
	if opt.every <= 0 {
		return usagef("--every %v: must be positive", opt.every)
	}
	if opt.runsGiven && opt.runs < 1 {
		return fmt.Errorf("--runs %d: must be at least 1 (leave it out to trigger until stopped)", opt.runs)
	}
	tr, err := openTracing(ctx, opt.otlpEndpoint)
	if err != nil {
		return err
	}
	logger := devLogger(stderr, opt.verbose, tr)
	n, err := openDev(ctx, opt, logger, tr)
	if err != nil {
		return err
	}
	defer n.close()
	scheduled := orderflow.Order{OrderID: "hourly", Customer: "hourly@example.com", SKU: "SKU-42", Quantity: 1, Total: 120}
	if err := n.e.Schedule(devSchedule, "0 * * * *", "order", scheduled); err != nil {
		return err
	}
	srv, err := listenAPI(ctx, n.e, opt.listen, api.Options{Logger: logger, Metrics: metricsHandler(n.reg, logger)}, logger)
	if err != nil {
		return err
	}
	if err := n.e.Start(ctx); err != nil {
		srv.l.Close()
		return err
	}
	served := srv.serve()
	n.banner(stdout, opt)
	fmt.Fprintf(stdout, "dashboard on %s/%s\n", srv.url, srv.dashboardNote())
	fmt.Fprintf(stdout, "API on %s%s\n", srv.url, srv.authNote())
	fmt.Fprintf(stdout, "  curl %s/v1/runs\n", srv.url)
	fmt.Fprintf(stdout, "  curl %s/metrics\n", srv.url)
	fmt.Fprintf(stdout, "triggering an order every %v; Ctrl-C stops\n\n", opt.every)

	out := &lockedWriter{w: stdout}
	var wg sync.WaitGroup
	session := time.Now().UTC().Format("20060102T150405")
	tick := time.NewTicker(opt.every)
	defer tick.Stop()
	var loopErr error
loop:
	for i := 0; ; i++ {
		if !opt.runsGiven || i < opt.runs {
			p := devPlan(session, i)
			id, err := n.trigger(ctx, p)
			if err != nil {
				if ctx.Err() == nil {
					loopErr = err
				}
				break loop
			}
			fmt.Fprintf(out, "triggered %-8s run %s  order %s  (%s)\n", p.wf, id, p.order.OrderID, p.label)
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.report(ctx, out, id, p)
			}()
		}
		select {
		case <-ctx.Done():
			break loop
		case loopErr = <-served:
			break loop
		case <-tick.C:
		}
	}
	wg.Wait()
	return errors.Join(loopErr, shutdownWithin(srv, n.e.Stop, devShutdown, stopGrace))
}

// devShutdown is how long dev waits, on Ctrl-C, for the API's requests and
// the node's steps to finish.
const devShutdown = 10 * time.Second

// report waits for a run and prints how it ended, and whether that is
// the outcome it was designed for.
func (n *devNode) report(ctx context.Context, out io.Writer, id string, p devRun) {
	run, err := n.e.Wait(ctx, id)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		fmt.Fprintf(out, "run %s: %v\n", short(id), err)
		return
	}
	note := ""
	if want := expectedStatus(p.order); run.Status != want {
		note = fmt.Sprintf("  UNEXPECTED: designed to end %s", want)
	}
	fmt.Fprintf(out, "run %s finished: %-12s %s%s\n", short(id), run.Status, p.label, note)
}

// lockedWriter serialises the writes of several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runDevOnce is dev --once: a batch of opt.runs orders, every step printed
// as it changes, until all are finished.
func runDevOnce(ctx context.Context, opt devOptions, stdout, stderr io.Writer) error {
	if opt.runs < 1 {
		return fmt.Errorf("--runs %d: must be at least 1", opt.runs)
	}
	tr, err := openTracing(ctx, opt.otlpEndpoint)
	if err != nil {
		return err
	}
	n, err := openDev(ctx, opt, devLogger(stderr, opt.verbose, tr), tr)
	if err != nil {
		return err
	}
	if err := n.e.Start(ctx); err != nil {
		n.close()
		return err
	}
	defer n.stop()
	e := n.e
	n.banner(stdout, opt)
	fmt.Fprintln(stdout)

	session := time.Now().UTC().Format("20060102T150405")
	plan := make([]devRun, opt.runs)
	for i := range plan {
		plan[i] = devPlan(session, i)
	}
	ids := make([]string, len(plan))
	for i, p := range plan {
		id, err := n.trigger(ctx, p)
		if err != nil {
			return err
		}
		ids[i] = id
		fmt.Fprintf(stdout, "triggered %-8s run %s  order %s  (%s)\n", p.wf, id, p.order.OrderID, p.label)
	}
	fmt.Fprintln(stdout)

	ctx, cancel := context.WithTimeout(ctx, opt.timeout)
	defer cancel()
	watch := newDevWatch(stdout)
	finished := map[string]bool{}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for len(finished) < len(ids) {
		for _, id := range ids {
			if finished[id] {
				continue
			}
			info, err := e.Get(ctx, id)
			if err != nil {
				return err
			}
			watch.show(info)
			if info.Run.Status.Terminal() {
				finished[id] = true
				fmt.Fprintf(stdout, "run %s finished: %s\n", short(id), info.Run.Status)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("runs not finished: %w", ctx.Err())
		case <-tick.C:
		}
	}

	return n.printFinal(ctx, stdout, ids, plan)
}

// printFinal prints how the runs of a dev --once batch ended and the
// effects they had, and says which did not end as designed.
func (n *devNode) printFinal(ctx context.Context, stdout io.Writer, ids []string, plan []devRun) error {
	fmt.Fprintln(stdout, "\nfinal states:")
	var failures []string
	for i, id := range ids {
		info, err := n.e.Get(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  run %s  %-8s %-12s %s\n", id, plan[i].wf, info.Run.Status, plan[i].label)
		if want := expectedStatus(plan[i].order); info.Run.Status != want {
			failures = append(failures, fmt.Sprintf("run %s: %s, expected %s", id, info.Run.Status, want))
		}
	}
	fmt.Fprintln(stdout, "\neffects (each once, deduplicated by the step's idempotency key):")
	for _, eff := range n.svc.Effects() {
		fmt.Fprintln(stdout, "  "+eff)
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}

func expectedStatus(o orderflow.Order) persistence.RunStatus {
	switch o.FailStep {
	case "ship":
		return persistence.RunCompensated
	case "reserve":
		return persistence.RunFailed
	}
	return persistence.RunSucceeded
}

func sortedNames(names []string) []string {
	sort.Strings(names)
	return names
}

// short returns the first 18 characters of a run id, which every command
// and the API take in its place (a prefix of 8 or more that names one
// run). The engine's ids are UUIDv7s, whose first 18 characters are the
// millisecond and a sequence within it that one process never repeats:
// every run dev triggers has its own.
func short(id string) string {
	if len(id) > 18 {
		return id[:18]
	}
	return id
}

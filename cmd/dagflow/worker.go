package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// stopGrace is how long the worker waits, after --shutdown-timeout, for
// engine.Stop to return. Stop itself gives handlers that ignore their
// cancelled context engine.DefaultStopGrace and then returns without
// them (their leases were released when the timeout passed, so other
// workers take their steps); this is the backstop past that, for the
// engine's own last store writes. Either way the worker then exits with
// status 1.
const stopGrace = engine.DefaultStopGrace + 5*time.Second

type workerFlags struct {
	b           backendFlags
	concurrency int
	queues      string
	queueLimits []string
	lease       time.Duration
	shutdown    time.Duration
	// nodeTimeout and nodeHeartbeat are engine.Config's NodeTimeout and
	// NodeHeartbeat (the node registry's).
	nodeTimeout, nodeHeartbeat time.Duration
	// metricsListen serves /metrics alone, unauthenticated, on its own
	// address (cmd/dagflow/metrics.go).
	metricsListen string
	// otlpEndpoint exports traces there (cmd/dagflow/tracing.go).
	otlpEndpoint string
	// workflowsDir holds YAML workflows to register: kind: http steps
	// need no Go code.
	workflowsDir string
	// demo registers the example order workflow, with the in-process
	// stand-ins of its services, as `dagflow dev` runs it.
	demo bool
}

// newWorkerCmd runs one engine node (workers and reconciler) with the
// workflows it is given (--workflows, --demo) registered, until the context ends (SIGINT/SIGTERM);
// then it stops gracefully within --shutdown-timeout.
func newWorkerCmd(sec *secrets) *cobra.Command {
	var w workerFlags
	cmd := withBackends(&cobra.Command{
		Use:   "worker",
		Short: "run an engine node on Redis + MySQL until SIGINT/SIGTERM",
		Long: "Run an engine node on Redis + MySQL until SIGINT/SIGTERM. The first signal stops it\n" +
			"gracefully within --shutdown-timeout (running steps that have not finished by then\n" +
			"are released to other workers); a second signal exits at once.\n\n" + redisURLHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), &w, cmd.Flags().Changed("queues"), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}, &w.b, sec)
	w.register(cmd)
	return cmd
}

// register adds the worker's flags, beside the connection flags, to cmd.
func (w *workerFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	w.b.registerRead(fs)
	fs.IntVar(&w.concurrency, "concurrency", 10, "steps run at once")
	fs.StringVar(&w.queues, "queues", "", "comma-separated queues to work, in priority order (default: every queue of the registered workflows)")
	fs.StringArrayVar(&w.queueLimits, "queue-limit", nil, queueLimitHelp)
	fs.DurationVar(&w.lease, "lease", 30*time.Second, "step lease")
	fs.DurationVar(&w.nodeHeartbeat, "node-heartbeat", engine.DefaultNodeHeartbeat, "how often the node records (and publishes) its status in the node registry")
	fs.DurationVar(&w.nodeTimeout, "node-timeout", engine.NodeAliveWithin, "a node without a registry heartbeat for this long is presumed dead and its steps are taken over (longer than --node-heartbeat)")
	fs.DurationVar(&w.shutdown, "shutdown-timeout", 30*time.Second, "how long a graceful stop waits for running steps")
	fs.StringVar(&w.metricsListen, "metrics-listen", "", "serve Prometheus metrics at /metrics on this host:port, without authentication: an address only monitoring reaches")
	fs.StringVar(&w.otlpEndpoint, "otlp-endpoint", "", otlpEndpointHelp)
	fs.StringVar(&w.workflowsDir, "workflows", "", "directory of YAML workflows (*.yaml, *.yml) to register; their kind: http steps need no Go code")
	fs.BoolVar(&w.demo, "demo", false, "also register the example order workflow of `dagflow dev`, with in-process stand-ins for its services (a demo, not for production)")
}

func runWorker(ctx context.Context, w *workerFlags, queuesGiven bool, stdout, stderr io.Writer) error {
	tr, err := openTracing(ctx, w.otlpEndpoint)
	if err != nil {
		return err
	}
	logger := nodeLogger(stderr, slog.LevelInfo, tr)
	defer tr.shutdown(logger)
	var reg *prometheus.Registry
	var ms *metricsServer
	if w.metricsListen != "" {
		reg = metricsRegistry()
		var err error
		if ms, err = listenMetrics(w.metricsListen, reg, logger); err != nil {
			return err
		}
		defer ms.close()
	}
	n, err := openNode(ctx, w, queuesGiven, false, logger, reg, tr)
	if err != nil {
		return err
	}
	defer n.close()
	if err := n.e.Start(ctx); err != nil {
		return keyringHint(err)
	}
	fmt.Fprintf(stdout, "dagflow worker %s running (queues %s); SIGTERM stops it\n", n.e.NodeID(), strings.Join(n.queues, ","))
	if tr != nil {
		fmt.Fprintf(stdout, "dagflow worker: %s\n", tr.describe())
	}
	if ms != nil {
		ms.serve(logger)
		fmt.Fprintf(stdout, "dagflow worker: metrics on %s\n", ms.url)
	}
	<-ctx.Done()
	return stopWithin(n.e.Stop, w.shutdown, stopGrace)
}

// node is an engine node as worker and serve run it, not started yet.
type node struct {
	e      *engine.Engine
	queues []string // the queues it works, in priority order
	close  func()
}

// openNode connects to the backends and makes an engine node with the
// workflows of --workflows (and, with --demo, the example order
// workflow) registered, working --queues (default: every queue of those
// workflows). With noWorkers the node registers no workflow and
// runs no step: it knows the workflows from the stored definitions. With
// reg, the engine's metrics are registered on it; with tr, it traces.
func openNode(ctx context.Context, w *workerFlags, queuesGiven, noWorkers bool, logger *slog.Logger, reg *prometheus.Registry, tr *tracing) (*node, error) {
	var wfs []*dag.Workflow
	var queues []string
	if !noWorkers {
		reg := steps.NewRegistry()
		if w.demo {
			var err error
			if wfs, err = demoWorkflows(reg); err != nil {
				return nil, err
			}
		}
		if w.workflowsDir != "" {
			more, err := loadWorkflowsDir(w.workflowsDir, reg, wfs)
			if err != nil {
				return nil, err
			}
			wfs = append(wfs, more...)
		}
		if queuesGiven {
			left, err := chooseQueues(w.queues, wfs)
			if err != nil {
				return nil, err
			}
			queues = strings.Split(w.queues, ",")
			for _, q := range sortedKeys(left) {
				logger.Warn("queue not worked by this node: its steps wait for another node", "queue", q, "steps", strings.Join(left[q], ","))
			}
		}
	}
	if !noWorkers && len(wfs) == 0 {
		// nothing to run: a node that works queues would claim steps it
		// has no handler for
		logger.Warn("no workflow registered: this node runs no step (give --workflows DIR, or --demo for the example order workflow)")
		noWorkers = true
	}
	limits, err := parseQueueLimits(w.queueLimits)
	if err != nil {
		return nil, err
	}
	store, readStore, rdb, closeAll, err := w.b.openNodeBackends(ctx)
	if err != nil {
		return nil, err
	}
	cfg := engine.Config{
		QueueLimits: limits,
		Store:       store, ReadStore: readStore, Redis: rdb, Prefix: w.b.prefix, Logger: logger, NoWorkers: noWorkers,
		Concurrency: w.concurrency, Queues: queues, Lease: w.lease, Codec: w.b.codec,
		NodeHeartbeat: w.nodeHeartbeat, NodeTimeout: w.nodeTimeout, TracerProvider: tr.provider(),
	}
	if reg != nil {
		cfg.Registerer = reg
	}
	e, err := engine.New(cfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	if err := e.Register(wfs...); err != nil {
		closeAll()
		return nil, err
	}
	if queues == nil && !noWorkers {
		queues = sortedKeys(queueSteps(wfs))
	}
	return &node{e: e, queues: queues, close: closeAll}, nil
}

// openNodeBackends opens a node's store, read replica (nil without
// one) and Redis, and checks the store's schema: after the connections,
// whose errors name their servers, and before anything reads a table.
func (b *backendFlags) openNodeBackends(ctx context.Context) (store, readStore persistence.Store, rdb redis.UniversalClient, closeAll func(), err error) {
	if store, err = b.openStore(ctx); err != nil {
		return nil, nil, nil, nil, err
	}
	if readStore, err = b.openReadStore(ctx); err != nil {
		store.Close()
		return nil, nil, nil, nil, err
	}
	if rdb, err = b.openRedis(ctx); err != nil {
		store.Close()
		if readStore != nil {
			readStore.Close()
		}
		return nil, nil, nil, nil, err
	}
	closeAll = func() {
		rdb.Close()
		store.Close()
		if readStore != nil {
			readStore.Close()
		}
	}
	if err := checkSchema(ctx, store); err != nil {
		closeAll()
		return nil, nil, nil, nil, err
	}
	return store, readStore, rdb, closeAll, nil
}

// demoWorkflows registers on reg the stand-in services of the example
// order workflow and returns the workflow (--demo).
func demoWorkflows(reg *steps.Registry) ([]*dag.Workflow, error) {
	if err := orderflow.NewServices().Register(reg); err != nil {
		return nil, err
	}
	return dag.LoadFS(workflows.FS, reg)
}

// loadWorkflowsDir loads the YAML workflows of --workflows dir with the
// handlers of reg (kind: http steps need none); a workflow of the same
// name as one of demo (the --demo workflows) is refused.
func loadWorkflowsDir(dir string, reg *steps.Registry, demo []*dag.Workflow) ([]*dag.Workflow, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--workflows: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("--workflows %s: not a directory", dir)
	}
	wfs, err := dag.LoadDir(dir, reg)
	if err != nil {
		return nil, fmt.Errorf("--workflows %s: %w", dir, err)
	}
	if len(wfs) == 0 {
		return nil, fmt.Errorf("--workflows %s: no *.yaml or *.yml file", dir)
	}
	for _, w := range wfs {
		for _, b := range demo {
			if b.Name() == w.Name() {
				return nil, fmt.Errorf("--workflows %s: workflow %q is a --demo workflow: give it another name", dir, w.Name())
			}
		}
	}
	return wfs, nil
}

// queueSteps maps each queue of wfs to its steps, "workflow/step".
func queueSteps(wfs []*dag.Workflow) map[string][]string {
	m := map[string][]string{}
	for _, w := range wfs {
		for _, s := range w.Steps() {
			m[s.Queue] = append(m[s.Queue], w.Name()+"/"+s.Name)
		}
	}
	return m
}

// chooseQueues checks an explicit --queues list against the registered
// workflows: it must name queues, each of them used by a step. It returns
// the queues left out, with their steps.
func chooseQueues(list string, wfs []*dag.Workflow) (left map[string][]string, err error) {
	known := queueSteps(wfs)
	if strings.TrimSpace(list) == "" {
		return nil, usagef("--queues is empty (leave it out to work every queue: %s)", strings.Join(sortedKeys(known), ", "))
	}
	seen := map[string]bool{}
	for i, q := range strings.Split(list, ",") {
		switch {
		case q == "" || strings.TrimSpace(q) != q:
			return nil, usagef("--queues %q: element %d is empty or has spaces", list, i+1)
		case seen[q]:
			return nil, usagef("--queues %q: %q is listed twice", list, q)
		case known[q] == nil:
			return nil, usagef("--queues %q: %q is not a queue of any registered workflow (queues: %s)", list, q, strings.Join(sortedKeys(known), ", "))
		}
		seen[q] = true
	}
	left = map[string][]string{}
	for q, s := range known {
		if !seen[q] {
			left[q] = s
		}
	}
	return left, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stopWithin stops the engine gracefully within timeout. A stop that
// runs out of time is an error (the engine released the steps still
// running); one that has not returned grace after the timeout (a handler
// that ignores cancellation holds it) is abandoned with an error, and the
// process exits without waiting for it.
func stopWithin(stop func(context.Context) error, timeout, grace time.Duration) error {
	return stopBy(stop, time.Now().Add(timeout), timeout, grace)
}

// stopBy is stopWithin with the deadline given: serve spends one
// --shutdown-timeout (timeout, for the errors) on its HTTP server and its
// engine together.
func stopBy(stop func(context.Context) error, deadline time.Time, timeout, grace time.Duration) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- stop(ctx) }()
	abandon := time.NewTimer(time.Until(deadline) + grace)
	defer abandon.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("graceful stop did not finish within --shutdown-timeout %v: %w (the steps still running were released to other workers)", timeout, err)
		}
		return nil
	case <-abandon.C:
		return fmt.Errorf("graceful stop did not finish within --shutdown-timeout %v plus %v: a step handler ignores cancellation; exiting without it (its lease was released, another worker runs the step)", timeout, grace)
	}
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// runWorker runs one engine node (workers and reconciler) with the example
// workflows registered, until ctx ends (SIGINT/SIGTERM); then it stops
// gracefully within -shutdown-timeout.
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b backendFlags
	b.register(fs)
	concurrency := fs.Int("concurrency", 10, "steps run at once")
	queues := fs.String("queues", "default", "comma-separated queues to work, in priority order")
	lease := fs.Duration("lease", 30*time.Second, "step lease")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "how long a graceful stop waits for running steps")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	store, err := b.openStore(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	rdb, err := b.openRedis(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()

	reg := steps.NewRegistry()
	svc := orderflow.NewServices()
	if err := svc.Register(reg); err != nil {
		return err
	}
	e, err := engine.New(engine.Config{
		Store: store, Redis: rdb, Prefix: b.prefix, Logger: logger,
		Concurrency: *concurrency, Queues: strings.Split(*queues, ","), Lease: *lease,
	})
	if err != nil {
		return err
	}
	if err := e.LoadWorkflows(workflows.FS, reg); err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dagflow worker %s running (queues %s); SIGTERM stops it\n", e.NodeID(), *queues)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	if err := e.Stop(sctx); err != nil {
		return fmt.Errorf("stop: %w (running steps were released to other workers)", err)
	}
	return nil
}

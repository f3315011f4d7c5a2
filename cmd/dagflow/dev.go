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
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// newDevCmd is `dagflow dev`: an engine on an in-process Redis and a
// SQLite file, the example workflows registered, a few order runs
// triggered (some designed to retry or to fail and compensate), their
// progress printed; it exits when all are finished. Unfinished runs left
// in the SQLite file by an earlier session are resumed by the reconciler:
// Redis is rebuilt from the store.
func newDevCmd() *cobra.Command {
	var opt devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "run the example workflows on the embedded default (miniredis + SQLite), no servers",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), opt, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opt.dbPath, "db", "dagflow-dev.db", "SQLite file holding the runs")
	fs.IntVar(&opt.runs, "runs", 6, "how many order runs to trigger")
	fs.IntVar(&opt.concurrency, "concurrency", 8, "steps run at once")
	fs.BoolVarP(&opt.verbose, "verbose", "v", false, "log the engine's info messages")
	fs.DurationVar(&opt.timeout, "timeout", 2*time.Minute, "give up if the runs have not finished by then")
	return cmd
}

type devOptions struct {
	dbPath      string
	runs        int
	concurrency int
	verbose     bool
	timeout     time.Duration
}

func runDev(ctx context.Context, opt devOptions, stdout, stderr io.Writer) error {
	if opt.runs < 1 {
		return fmt.Errorf("--runs %d: must be at least 1", opt.runs)
	}
	level := slog.LevelWarn
	if opt.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return fmt.Errorf("in-process redis: %w", err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: opt.dbPath, AutoMigrate: true})
	if err != nil {
		return err // names sqlite and the file
	}
	defer store.Close()

	svc := orderflow.NewServices()
	svc.Delay = 50 * time.Millisecond
	reg := steps.NewRegistry()
	if err := svc.Register(reg); err != nil {
		return err
	}
	e, err := engine.New(engine.Config{
		Store: store, Redis: rdb, Logger: logger, Concurrency: opt.concurrency,
		ReconcileInterval: 500 * time.Millisecond, PollInterval: 200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := e.LoadWorkflows(workflows.FS, reg); err != nil {
		return err
	}
	goOrder, err := svc.Workflow("order_go")
	if err != nil {
		return err
	}
	if err := e.Register(goOrder); err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Stop(sctx)
	}()

	abs, _ := filepath.Abs(opt.dbPath)
	fmt.Fprintf(stdout, "dagflow dev: in-process Redis at %s, runs stored in %s\n", mr.Addr(), abs)
	fmt.Fprintf(stdout, "workflows: %s\n\n", strings.Join(sortedNames(e.Workflows()), ", "))

	session := time.Now().UTC().Format("20060102T150405")
	type planned struct {
		label string
		wf    string
		order orderflow.Order
	}
	var plan []planned
	for i := 0; i < opt.runs; i++ {
		o := orderflow.Order{
			OrderID: fmt.Sprintf("%s-%d", session, i+1), Customer: fmt.Sprintf("customer%d@example.com", i+1),
			SKU: "SKU-42", Quantity: 1 + i%3, Total: float64(60 + 40*i),
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
		plan = append(plan, planned{label, wf, o})
	}
	ids := make([]string, len(plan))
	for i, p := range plan {
		id, err := e.Trigger(ctx, p.wf, p.order, engine.IdempotencyKey("dev:"+p.order.OrderID))
		if err != nil {
			return err
		}
		ids[i] = id
		fmt.Fprintf(stdout, "triggered %-8s run %s  order %s  (%s)\n", p.wf, id, p.order.OrderID, p.label)
	}
	fmt.Fprintln(stdout)

	ctx, cancel := context.WithTimeout(ctx, opt.timeout)
	defer cancel()
	seen := map[string]string{}
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
			for _, s := range info.Steps {
				key := id + "/" + s.Step
				state := fmt.Sprintf("%s#%d#%d", s.Status, s.Attempt, s.CompAttempt)
				if seen[key] == state {
					continue
				}
				seen[key] = state
				extra := ""
				if s.Status == persistence.StepRetrying || s.Status == persistence.StepDead || s.Status == persistence.StepCompensationFailed {
					extra = "  " + cell(s.Error)
				}
				fmt.Fprintf(stdout, "  %s  %-8s %-20s attempt %d%s\n", short(id), s.Step, s.Status, s.Attempt, extra)
			}
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

	fmt.Fprintln(stdout, "\nfinal states:")
	var failures []string
	for i, id := range ids {
		info, err := e.Get(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  run %s  %-8s %-12s %s\n", id, plan[i].wf, info.Run.Status, plan[i].label)
		if want := expectedStatus(plan[i].order); info.Run.Status != want {
			failures = append(failures, fmt.Sprintf("run %s: %s, expected %s", id, info.Run.Status, want))
		}
	}
	fmt.Fprintln(stdout, "\neffects (each once, deduplicated by the step's idempotency key):")
	for _, eff := range svc.Effects() {
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

func short(id string) string {
	if len(id) > 13 {
		return id[len(id)-12:]
	}
	return id
}

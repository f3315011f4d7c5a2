package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/steps"
)

// runBench measures end-to-end throughput of the order workflow shape
// (reserve -> notify || points -> ship) with no-op handlers. It works in
// its own database and Redis key prefix and removes both afterwards.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serverDSN := fs.String("mysql-dsn", envOr("DAGFLOW_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"), "MySQL server DSN; the bench creates and drops its own database")
	redisAddr := fs.String("redis-addr", envOr("DAGFLOW_REDIS_ADDR", "127.0.0.1:6379"), "Redis address; the bench uses and removes its own key prefix")
	runs := fs.Int("runs", 2000, "order runs to execute")
	workers := fs.Int("workers", 32, "engine concurrency")
	triggers := fs.Int("triggers", 8, "goroutines triggering runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := gomysql.ParseDSN(*serverDSN)
	if err != nil {
		return fmt.Errorf("-mysql-dsn: %w", err)
	}
	dbName := "dagflow_bench_" + uuid.NewString()[:8]
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+dbName+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return fmt.Errorf("create bench database: %w", err)
	}
	defer admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+dbName+"`")
	cfg.DBName = dbName
	store, err := mysql.Open(ctx, mysql.Config{DSN: cfg.FormatDSN(), AutoMigrate: true, MaxOpenConns: *workers + *triggers + 8})
	if err != nil {
		return err
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, PoolSize: *workers + 16})
	defer rdb.Close()
	prefix := "dagflow-bench-" + uuid.NewString()[:8]
	defer deletePrefix(context.Background(), rdb, prefix)

	noop := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"ok":true}`), nil
	})
	wf, err := dag.New("order").
		Step("reserve", noop).
		Step("notify", noop, dag.After("reserve")).
		Step("points", noop, dag.After("reserve")).
		Step("ship", noop, dag.After("notify", "points")).
		Build()
	if err != nil {
		return err
	}
	e, err := engine.New(engine.Config{
		Store: store, Redis: rdb, Prefix: prefix, Concurrency: *workers,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return err
	}
	if err := e.Register(wf); err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer e.Stop(context.Background())

	start := time.Now()
	ids := make([]string, *runs)
	var next atomic.Int64
	var wg sync.WaitGroup
	var trigErr atomic.Value
	for g := 0; g < *triggers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *runs {
					return
				}
				id, err := e.Trigger(ctx, "order", map[string]int{"n": i})
				if err != nil {
					trigErr.Store(err)
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	if err, _ := trigErr.Load().(error); err != nil {
		return err
	}
	for _, id := range ids {
		run, err := e.Wait(ctx, id)
		if err != nil {
			return err
		}
		if run.Status != persistence.RunSucceeded {
			return fmt.Errorf("run %s ended %s: %s", id, run.Status, run.Error)
		}
	}
	elapsed := time.Since(start)
	stepsDone := *runs * 4
	fmt.Fprintf(stdout, "order workflow, no-op handlers, MySQL + Redis, %d workers\n", *workers)
	fmt.Fprintf(stdout, "runs: %d in %v  ->  %.0f runs/s, %.0f steps/s\n", *runs, elapsed.Round(time.Millisecond),
		float64(*runs)/elapsed.Seconds(), float64(stepsDone)/elapsed.Seconds())
	out, _ := json.Marshal(map[string]any{
		"runs": *runs, "workers": *workers, "seconds": elapsed.Seconds(),
		"runs_per_s": float64(*runs) / elapsed.Seconds(), "steps_per_s": float64(stepsDone) / elapsed.Seconds(),
	})
	fmt.Fprintln(stdout, string(out))
	return nil
}

// deletePrefix removes every key under prefix (and nothing else).
func deletePrefix(ctx context.Context, rdb *redis.Client, prefix string) {
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			rdb.Del(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		rdb.Del(ctx, batch...)
	}
}

// Command dagflow runs and operates dagflow workflow engines.
//
//	dagflow dev                      everything in one process, no servers (miniredis + SQLite)
//	dagflow worker                   an engine node on Redis + MySQL, until SIGINT/SIGTERM
//	dagflow migrate                  apply the schema migrations to a MySQL database
//	dagflow runs [list|show ID]      list runs or show one with its steps and history
//	dagflow dlq [list|retry|discard] the dead-letter queue
//	dagflow bench                    end-to-end throughput of the order workflow
//
// Every command takes -h for its flags. Connection settings also come from
// the environment: DAGFLOW_MYSQL_DSN, DAGFLOW_REDIS_ADDR, DAGFLOW_PREFIX.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"dev", "run the example workflows on the embedded default (miniredis + SQLite), no servers", runDev},
		{"worker", "run an engine node on Redis + MySQL until SIGINT/SIGTERM", runWorker},
		{"migrate", "apply the schema migrations to a MySQL (or SQLite) database", runMigrate},
		{"runs", "list runs, or show one: runs [list|show RUN_ID]", runRuns},
		{"dlq", "dead-letter queue: dlq [list|retry RUN_ID STEP|discard RUN_ID STEP]", runDLQ},
		{"bench", "end-to-end benchmark of the order workflow with no-op handlers", runBench},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: dagflow <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'dagflow <command> -h' for a command's flags.")
}

// defaultGCPercent is the garbage collector's target when GOGC is not set.
// The engine's live heap is small (tens of MiB) and mostly short-lived
// batch garbage, so at the default of 100 the collector takes about a
// quarter of the process's CPU under load; 400 trades a few tens of MiB of
// heap for most of that CPU.
const defaultGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			if err != nil {
				fmt.Fprintf(stderr, "dagflow %s: %v\n", c.name, err)
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(stderr, "dagflow: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

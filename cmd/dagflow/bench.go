package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/dagflow/dagflow/internal/bench"
)

// runBench is `dagflow bench`: the flags, then internal/bench does the
// measuring and the report.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	cfg.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dagflow bench [flags]")
		fmt.Fprintln(stderr, "\nRuns the order workflow (reserve -> notify || points -> ship) with no-op handlers and")
		fmt.Fprintln(stderr, "prints a table and one JSON line. See the Benchmarks section of the README.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	res, err := bench.Run(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return res.Print(stdout, cfg.JSONOnly)
}

//go:build !nodev

package main

import (
	"flag"
	"os"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/internal/bench"
)

// newBenchCmd is `dagflow bench`: the flags, then internal/bench does the
// measuring and the report.
func newBenchCmd(sec *secrets) *cobra.Command {
	var cfg bench.Config
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "end-to-end benchmark of the order workflow with no-op handlers",
		Long: "Runs the order workflow (reserve -> notify || points -> ship) with no-op handlers and\n" +
			"prints a table and one JSON line. See docs/benchmarks.md.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if spec := os.Getenv(bench.ChildEnv); spec != "" {
				// A worker process of a --procs session.
				return bench.RunChild(cmd.Context(), spec, cmd.InOrStdin(), cmd.OutOrStdout())
			}
			sec.addDSN(cfg.MySQLDSN)
			if cfg.Procs > 0 {
				res, err := bench.RunProcs(cmd.Context(), cfg, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				return res.Print(cmd.OutOrStdout())
			}
			res, err := bench.Run(cmd.Context(), cfg, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return res.Print(cmd.OutOrStdout(), cfg.JSONOnly)
		},
	}
	gofs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(gofs)
	cmd.Flags().AddGoFlagSet(gofs)
	// The default of --mysql-dsn comes from DAGFLOW_MYSQL_DSN, which may
	// hold a password: help names the variable, not its value.
	cmd.Flags().Lookup("mysql-dsn").DefValue = ""
	return cmd
}

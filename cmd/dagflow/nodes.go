package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/engine"
)

// newNodesCmd is `dagflow nodes`: the node registry, live and recently
// dead nodes.
func newNodesCmd(sec *secrets) *cobra.Command {
	var b backendFlags
	var timeout time.Duration
	cmd := withBackends(&cobra.Command{
		Use:   "nodes",
		Short: "the engine nodes in the registry: live ones and those that stopped heartbeating in the last day",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usagef("--node-timeout %v must be positive", timeout)
			}
			e, closeAll, err := b.inspector(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer closeAll()
			return listNodes(cmd.Context(), e, cmd.OutOrStdout(), timeout, time.Now())
		},
	}, &b, sec)
	cmd.Flags().DurationVar(&timeout, "node-timeout", engine.NodeAliveWithin,
		"a node whose last heartbeat is older than this is listed dead (the workers' node timeout)")
	return cmd
}

// listNodes prints the registry's nodes, by id: DEAD for those whose last
// heartbeat is older than timeout at now.
func listNodes(ctx context.Context, e *engine.Engine, stdout io.Writer, timeout time.Duration, now time.Time) error {
	nodes, err := e.AllNodes(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tHOST\tPID\tSTARTED\tHEARTBEAT\tRUNNING\tDONE\tFAILURES\tCONCURRENCY\tQUEUES\tVERSION")
	for _, n := range nodes {
		state := "live"
		if now.Sub(n.HeartbeatAt) > timeout {
			state = "DEAD"
		}
		ago := now.Sub(n.HeartbeatAt).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s (%s ago)\t%d\t%d\t%d\t%d\t%s\t%s\n",
			cell(n.ID), state, cell(n.Host), n.PID, n.StartedAt.Format(time.RFC3339), n.HeartbeatAt.Format(time.RFC3339), ago,
			n.StepsRunning, n.StepsDone, n.Failures, n.Concurrency, cell(orDash(strings.Join(n.Queues, ","))), cell(orDash(n.Version)))
	}
	tw.Flush()
	if len(nodes) == 0 {
		fmt.Fprintln(stdout, "no nodes in the registry")
	}
	return nil
}

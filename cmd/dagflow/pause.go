package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/engine"
)

// newQueuesCmd lists the paused queues (queues, queues list) or pauses
// or resumes one.
func newQueuesCmd(sec *secrets) *cobra.Command {
	qc := withInspector(&cobra.Command{
		Use:   "queues",
		Short: "the paused queues: queues [list|pause NAME|resume NAME]",
		Args:  noArgs,
	}, sec, false, func(cmd *cobra.Command, e *engine.Engine, _ []string) error {
		paused, err := e.PausedQueues(cmd.Context())
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "QUEUE\tPAUSED AT")
		for _, p := range paused {
			fmt.Fprintf(tw, "%s\t%s\n", cell(p.Queue), timeCell(p.PausedAt))
		}
		return tw.Flush()
	})
	addListCmd(qc, "the paused queues, by name (the default)")
	for _, pause := range []bool{true, false} {
		use, short, verb := "pause NAME", "stop every node from taking the queue's tasks (they stay queued) until resumed", "paused"
		if !pause {
			use, short, verb = "resume NAME", "let the nodes take a paused queue's tasks again", "resumed"
		}
		qc.AddCommand(withInspector(&cobra.Command{Use: use, Short: short, Args: exactArgs("NAME")}, sec, true,
			func(cmd *cobra.Command, e *engine.Engine, args []string) error {
				var err error
				if pause {
					err = e.PauseQueue(cmd.Context(), args[0])
				} else {
					err = e.ResumeQueue(cmd.Context(), args[0])
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "queue %s %s\n", cell(args[0]), verb)
				return nil
			}))
	}
	return qc
}

// newRunPauseCmd is `dagflow runs pause RUN_ID` (pause) or `dagflow runs
// resume RUN_ID`.
func newRunPauseCmd(sec *secrets, pause bool) *cobra.Command {
	use, short, verb := "pause RUN_ID", "start no new step of a run (running ones finish) until resumed", "paused"
	if !pause {
		use, short, verb = "resume RUN_ID", "resume a paused run and dispatch the steps that became ready", "resumed"
	}
	return withInspector(&cobra.Command{Use: use, Short: short, Args: exactArgs("RUN_ID")}, sec, !pause,
		func(cmd *cobra.Command, e *engine.Engine, args []string) error {
			id, err := e.ResolveRunID(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if pause {
				err = e.PauseRun(cmd.Context(), id)
			} else {
				err = e.ResumeRun(cmd.Context(), id)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "run %s %s\n", cell(id), verb)
			return nil
		})
}

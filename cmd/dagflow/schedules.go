package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/engine"
)

// newSchedulesCmd lists the stored schedules (schedules, schedules list)
// or pauses, resumes or triggers one.
func newSchedulesCmd(sec *secrets) *cobra.Command {
	sc := withInspector(&cobra.Command{
		Use:   "schedules",
		Short: "the stored schedules: schedules [list|pause NAME|resume NAME|trigger NAME]",
		Args:  noArgs,
	}, sec, false, func(cmd *cobra.Command, e *engine.Engine, _ []string) error {
		return listSchedules(cmd.Context(), e, cmd.OutOrStdout())
	})
	addListCmd(sc, "every schedule with its next fire time and last tick (the default)")
	sc.AddCommand(
		withInspector(&cobra.Command{
			Use:   "pause NAME",
			Short: "stop a schedule from firing, on every node, until resumed (the ticks in between are not caught up)",
			Args:  exactArgs("NAME"),
		}, sec, false, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
			if err := e.PauseSchedule(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s paused\n", cell(args[0]))
			return nil
		}),
		withInspector(&cobra.Command{
			Use:   "resume NAME",
			Short: "let a paused schedule fire again from its next tick",
			Args:  exactArgs("NAME"),
		}, sec, false, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
			ctx := cmd.Context()
			if err := e.ResumeSchedule(ctx, args[0]); err != nil {
				return err
			}
			si, err := e.GetSchedule(ctx, args[0])
			if err != nil {
				return err
			}
			next := "-"
			if len(si.Next) > 0 {
				next = timeCell(si.Next[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s resumed; next fire time %s\n", cell(args[0]), next)
			return nil
		}),
		withInspector(&cobra.Command{
			Use:   "trigger NAME",
			Short: "start a run of a schedule's workflow now, with its input, whatever its ticks or paused flag; prints the run id",
			Long: "Start a run of a schedule's workflow now, with the schedule's input, whatever its\n" +
				"ticks, overlap policy or paused flag say, and print the run's id.\n\n" + redisURLHelp,
			Args: exactArgs("NAME"),
		}, sec, true, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
			id, err := e.TriggerSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		}),
	)
	return sc
}

func listSchedules(ctx context.Context, e *engine.Engine, stdout io.Writer) error {
	list, err := e.Schedules(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tWORKFLOW\tSPEC\tTIME ZONE\tSTATE\tNEXT\tLAST TICK")
	for _, si := range list {
		state := "active"
		switch {
		case si.Err != nil:
			state = "invalid: " + si.Err.Error()
		case si.Disabled:
			state = "disabled"
		case si.Paused:
			state = "paused"
		}
		next, last := "-", "-"
		if len(si.Next) > 0 {
			next = timeCell(si.Next[0])
		}
		if si.LastTick != nil {
			last = timeCell(*si.LastTick)
		}
		tz := si.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(si.Name), cell(si.Workflow), cell(si.Spec), cell(tz), cell(state), next, last)
	}
	return tw.Flush()
}

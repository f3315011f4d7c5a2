package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/engine"
)

// newSchedulesCmd lists the stored schedules (schedules, schedules list)
// or pauses, resumes or triggers one.
func newSchedulesCmd(sec *secrets) *cobra.Command {
	sc := withInspector(&cobra.Command{
		Use:   "schedules",
		Short: "the stored schedules: schedules [list|create NAME|edit NAME|delete NAME|pause NAME|resume NAME|trigger NAME]",
		Args:  noArgs,
	}, sec, false, func(cmd *cobra.Command, e *engine.Engine, _ []string) error {
		return listSchedules(cmd.Context(), e, cmd.OutOrStdout())
	})
	addListCmd(sc, "every schedule with its next fire time and last tick (the default)")
	sc.AddCommand(newScheduleCreateCmd(sec), newScheduleEditCmd(sec),
		withInspector(&cobra.Command{
			Use:   "delete NAME",
			Short: "delete a schedule on every node (its runs and history are kept; a node's code does not bring it back)",
			Args:  exactArgs("NAME"),
		}, sec, false, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
			if err := e.DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s deleted\n", cell(args[0]))
			return nil
		}),
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

// scheduleFlags are the definition flags of schedules create and edit.
type scheduleFlags struct {
	spec, timeZone, workflow, input, overlap, catchUp string
	window                                            time.Duration
}

func (f *scheduleFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.spec, "spec", "", `cron spec ("0 2 * * *", "*/10 * * * * *", "@every 5m")`)
	fl.StringVar(&f.timeZone, "time-zone", "", "IANA time zone of the spec (default UTC)")
	fl.StringVar(&f.workflow, "workflow", "", "the workflow each tick starts")
	fl.StringVar(&f.input, "input", "", "JSON input of each run (\"null\" for none)")
	fl.StringVar(&f.overlap, "overlap", string(cron.OverlapAllow), "allow, skip or buffer_one")
	fl.StringVar(&f.catchUp, "catch-up", string(cron.CatchUpLatest), "none, latest or all")
	fl.DurationVar(&f.window, "catch-up-window", 0, "how far back missed ticks are caught up (0: no limit)")
}

func newScheduleCreateCmd(sec *secrets) *cobra.Command {
	var f scheduleFlags
	cmd := withInspector(&cobra.Command{
		Use:   "create NAME --spec SPEC --workflow WORKFLOW",
		Short: "create a schedule at run time; every node running its workflow fires it within a second",
		Args:  exactArgs("NAME"),
	}, sec, false, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
		si, err := e.CreateSchedule(cmd.Context(), engine.ScheduleDefinition{Name: args[0], Spec: f.spec, TimeZone: f.timeZone,
			Workflow: f.workflow, Input: json.RawMessage(f.input), Overlap: cron.Overlap(f.overlap), CatchUp: cron.CatchUp(f.catchUp),
			CatchUpWindow: f.window})
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "schedule %s created; next fire time %s\n", cell(si.Name), nextCell(si))
		return nil
	})
	f.register(cmd)
	return cmd
}

func newScheduleEditCmd(sec *secrets) *cobra.Command {
	var f scheduleFlags
	cmd := withInspector(&cobra.Command{
		Use:   "edit NAME [--spec SPEC] [--time-zone TZ] [--workflow WF] [--input JSON] [--overlap P] [--catch-up P] [--catch-up-window D]",
		Short: "change the given fields of a schedule; it becomes the operator's (a node's code no longer overwrites it)",
		Args:  exactArgs("NAME"),
	}, sec, false, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
		var c engine.ScheduleChange
		changed := cmd.Flags().Changed
		if changed("spec") {
			c.Spec = &f.spec
		}
		if changed("time-zone") {
			c.TimeZone = &f.timeZone
		}
		if changed("workflow") {
			c.Workflow = &f.workflow
		}
		if changed("input") {
			in := json.RawMessage(f.input)
			c.Input = &in
		}
		if changed("overlap") {
			o := cron.Overlap(f.overlap)
			c.Overlap = &o
		}
		if changed("catch-up") {
			cu := cron.CatchUp(f.catchUp)
			c.CatchUp = &cu
		}
		if changed("catch-up-window") {
			c.CatchUpWindow = &f.window
		}
		si, err := e.EditSchedule(cmd.Context(), args[0], c)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "schedule %s edited; next fire time %s\n", cell(si.Name), nextCell(si))
		return nil
	})
	f.register(cmd)
	return cmd
}

func nextCell(si engine.ScheduleInfo) string {
	if len(si.Next) == 0 {
		return "-"
	}
	return timeCell(si.Next[0])
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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// withBackends adds the connection flags to cmd and resolves them before
// it runs.
func withBackends(cmd *cobra.Command, b *backendFlags, sec *secrets) *cobra.Command {
	b.register(cmd.Flags())
	cmd.PreRunE = func(c *cobra.Command, _ []string) error {
		b.logOut = c.ErrOrStderr()
		return b.resolve(sec)
	}
	return cmd
}

// newMigrateCmd applies the embedded migrations.
func newMigrateCmd(sec *secrets) *cobra.Command {
	var b backendFlags
	return withBackends(&cobra.Command{
		Use:   "migrate",
		Short: "apply the schema migrations to a MySQL (or SQLite) database",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b.migrate = true
			st, err := b.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			v, err := st.SchemaVersion(cmd.Context())
			if err != nil {
				return err
			}
			what := "MySQL"
			if b.sqlite != "" {
				what = "SQLite " + b.sqlite
			}
			fmt.Fprintf(cmd.OutOrStdout(), "migrated %s: schema at version %d\n", what, v.Database)
			return nil
		},
	}, &b, sec)
}

// newRunsCmd lists runs (runs, runs list) or shows one (runs show ID).
func newRunsCmd(sec *secrets) *cobra.Command {
	var b, sb backendFlags
	var workflow, status, cursor string
	var limit int
	list := func(cmd *cobra.Command, _ []string) error {
		e, closeAll, err := b.inspector(cmd.Context(), false)
		if err != nil {
			return err
		}
		defer closeAll()
		return listRuns(cmd.Context(), e, cmd.OutOrStdout(), workflow, status, cursor, limit)
	}
	runs := withBackends(&cobra.Command{
		Use:   "runs",
		Short: "list runs (newest first), show one, retry, skip, signal or purge: runs [list|show RUN_ID|retry|skip|signal|purge]",
		Args:  noArgs,
		RunE:  list,
	}, &b, sec)
	lf := runs.Flags()
	lf.StringVar(&workflow, "workflow", "", "only runs of this workflow")
	lf.StringVar(&status, "status", "", "only runs in this status")
	lf.IntVar(&limit, "limit", 20, "how many runs")
	lf.StringVar(&cursor, "cursor", "", "continue from a previous page")
	listCmd := &cobra.Command{
		Use:     "list",
		Short:   "list runs, newest first (the default)",
		Args:    noArgs,
		PreRunE: runs.PreRunE,
		RunE:    list,
	}
	// list shares the flags of runs.
	listCmd.Flags().AddFlagSet(runs.Flags())
	runs.AddCommand(listCmd, withBackends(&cobra.Command{
		Use:   "show RUN_ID",
		Short: "a run with its steps and attempt history",
		Args:  exactArgs("RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, closeAll, err := sb.inspector(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer closeAll()
			return showRun(cmd.Context(), e, args[0], cmd.OutOrStdout())
		},
	}, &sb, sec), newPurgeCmd(sec), newRunPauseCmd(sec, true), newRunPauseCmd(sec, false))
	runs.AddCommand(newRunsRetryCmd(sec), newRunsSkipCmd(sec))
	var payload string
	signal := withInspector(&cobra.Command{
		Use:   "signal RUN_ID STEP",
		Short: "complete a step waiting for a signal (or an event) with --payload as its output",
		Long: "Complete a parked wait step (human approval) with --payload as its output; the steps\n" +
			"after it are queued. A step that is not waiting is an error; repeating the signal\n" +
			"that completed the step, with the same payload, is not.\n\n" + redisURLHelp,
		Args: exactArgs("RUN_ID", "STEP"),
	}, sec, true, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
		raw, err := readJSONArg(cmd.Context(), "--payload", payload, cmd.InOrStdin())
		if err != nil {
			return err
		}
		var in any
		if raw != nil {
			in = raw
		}
		id, err := e.ResolveRunID(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		if err := e.Signal(cmd.Context(), id, args[1], in); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "run %s step %s signalled\n", cell(id), cell(args[1]))
		return nil
	})
	signal.Flags().StringVar(&payload, "payload", "", "the step's output: JSON, @FILE to read it from a file, or @- from stdin (default: none)")
	runs.AddCommand(signal)
	return runs
}

// newRunsRetryCmd runs a finished run again: its failed steps (the
// default) or from a step (--from). The action is recorded as "cli"'s.
func newRunsRetryCmd(sec *secrets) *cobra.Command {
	var b backendFlags
	var mode, from string
	cmd := withBackends(&cobra.Command{
		Use:   "retry RUN_ID",
		Short: "run a finished run again: its failed steps (--mode failed) or from a step (--from STEP)",
		Long: "Run a finished run again. --mode failed (the default) retries its dead steps and keeps every success;\n" +
			"--from STEP (--mode from_step) reruns that step and everything downstream of it. A compensated run's\n" +
			"completed steps were undone, so only --from resumes it (its compensated steps run again too); --mode\n" +
			"failed is refused. The run resumes on the workers.\n\n" + redisURLHelp,
		Args: exactArgs("RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from != "" && mode == "" {
				mode = string(persistence.RetryFromStep)
			}
			switch persistence.RetryMode(mode) {
			case "", persistence.RetryFailed:
				if from != "" {
					return usagef("--mode failed retries every dead step and takes no --from (got %q)", from)
				}
			case persistence.RetryFromStep:
				if from == "" {
					return usagef("--mode from_step needs --from STEP")
				}
			default:
				return usagef("--mode %q is not failed or from_step", mode)
			}
			e, closeAll, err := b.inspector(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer closeAll()
			id, err := e.ResolveRunID(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var again []string
			if from != "" {
				again, err = e.RetryFrom(cmd.Context(), id, from, engine.Actor("cli"))
			} else {
				again, err = e.RetryRun(cmd.Context(), id, engine.Actor("cli"))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "run %s: %s run again; the run resumes on the workers\n", cell(id), cell(strings.Join(again, ", ")))
			return nil
		},
	}, &b, sec)
	cmd.Flags().StringVar(&mode, "mode", "", "failed (the default) or from_step")
	cmd.Flags().StringVar(&from, "from", "", "the step to rerun from (implies --mode from_step)")
	return cmd
}

// newRunsSkipCmd gives a dead step an output instead of running it; the
// run resumes. The action is recorded as "cli"'s.
func newRunsSkipCmd(sec *secrets) *cobra.Command {
	var b backendFlags
	var output string
	cmd := withBackends(&cobra.Command{
		Use:   "skip RUN_ID STEP",
		Short: "give a dead step an output (--output JSON) instead of running it; the run resumes",
		Long:  "Give a dead step an output instead of running it: its dependents read that output and the run resumes.\n\n" + redisURLHelp,
		Args:  exactArgs("RUN_ID", "STEP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out json.RawMessage
			if output != "" {
				if !json.Valid([]byte(output)) {
					return usagef("--output is not valid JSON: %s", escapeBlock(output))
				}
				out = json.RawMessage(output)
			}
			e, closeAll, err := b.inspector(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer closeAll()
			id, err := e.ResolveRunID(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := e.SkipStep(cmd.Context(), id, args[1], out, engine.Actor("cli")); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "run %s step %s skipped; the run resumes on the workers\n", cell(id), cell(args[1]))
			return nil
		},
	}, &b, sec)
	cmd.Flags().StringVar(&output, "output", "", "the step's output, JSON (none when empty)")
	return cmd
}

// errCell is an error column's cell: the error, or why the payloads
// could not be decoded (the keyring lacks their key).
func errCell(text, payloadErr string) string {
	if payloadErr != "" {
		return cell("(unreadable: " + payloadErr + ")")
	}
	return cell(text)
}

func listRuns(ctx context.Context, e *engine.Engine, stdout io.Writer, workflow, status, cursor string, limit int) error {
	p := engine.RunFilter{Workflow: workflow, Limit: limit, Cursor: cursor, NoPayloads: true} // the table shows none
	if status != "" {
		s := persistence.RunStatus(status)
		if !s.Valid() {
			return usagef("--status %q is not a run status (want one of: %s)", status, persistence.RunStatusList())
		}
		p.Status = []persistence.RunStatus{s}
	}
	page, err := e.Runs(ctx, p)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tWORKFLOW\tSTATUS\tCREATED\tERROR")
	for _, r := range page.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(r.ID), cell(r.Workflow), cell(string(r.Status)), r.CreatedAt.Format(time.RFC3339), errCell(r.Error, r.PayloadError))
	}
	tw.Flush()
	if page.NextCursor != "" {
		fmt.Fprintf(stdout, "more: --cursor %s\n", cell(page.NextCursor))
	}
	return nil
}

// showRun prints a run (its payloads decoded by the codec, if any), its
// steps, why each unfinished one waits, and its history.
func showRun(ctx context.Context, e *engine.Engine, arg string, stdout io.Writer) error {
	id, err := e.ResolveRunID(ctx, arg)
	if err != nil {
		return err
	}
	info, err := e.Get(ctx, id)
	if err != nil {
		return err
	}
	run, sts, atts := info.Run, info.Steps, info.Attempts
	fmt.Fprintf(stdout, "run %s  workflow %s v%d  status %s\ninput %s\n", cell(run.ID), cell(run.Workflow), run.Version, cell(string(run.Status)), escapeBlock(string(run.Input)))
	if run.Error != "" {
		fmt.Fprintf(stdout, "error %s\n", escapeBlock(run.Error))
	}
	if run.PayloadError != "" {
		fmt.Fprintf(stdout, "payloads unreadable: %s\n", escapeBlock(run.PayloadError))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSTEP\tSTATUS\tATTEMPT\tOUTPUT\tERROR")
	for _, s := range sts {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\n", cell(s.Step), cell(string(s.Status)), s.Attempt, s.MaxAttempts, cell(string(s.Output)), errCell(s.Error, s.PayloadError))
	}
	if err := printWaiting(ctx, e, tw, id, sts); err != nil {
		return err
	}
	fmt.Fprintln(tw, "\nHISTORY\tKIND\tATTEMPT\tOUTCOME\tWORKER\tDURATION\tERROR")
	for _, a := range atts {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%v\t%s\n", cell(a.Step), cell(string(a.Kind)), a.Attempt, cell(string(a.Outcome)), cell(a.Worker), a.Duration(), errCell(a.Error, a.PayloadError))
	}
	if len(info.Actions) > 0 {
		fmt.Fprintln(tw, "\nACTION\tBY\tAT\tSTEP\tRUN AGAIN")
		for _, a := range info.Actions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(string(a.Action)), cell(a.Actor), a.At.Format(time.RFC3339), cell(a.Step), cell(strings.Join(a.Steps, ", ")))
		}
	}
	return tw.Flush()
}

// newDLQCmd lists, retries or discards dead steps. Retrying needs a
// running engine to execute the step; this command only requeues it in
// the store, and a worker's reconciler dispatches it.
func newDLQCmd(sec *secrets) *cobra.Command {
	var b backendFlags
	var workflow string
	var limit int
	list := func(cmd *cobra.Command, _ []string) error {
		e, closeAll, err := b.inspector(cmd.Context(), false)
		if err != nil {
			return err
		}
		defer closeAll()
		return listDead(cmd.Context(), e, cmd.OutOrStdout(), workflow, limit)
	}
	dlq := withBackends(&cobra.Command{
		Use:   "dlq",
		Short: "the dead-letter queue: dlq [list|retry RUN_ID STEP|discard RUN_ID STEP]",
		Long:  "The dead-letter queue: dead steps, their error, and what to do with them.\n\n" + redisURLHelp,
		Args:  noArgs,
		RunE:  list,
	}, &b, sec)
	dlq.Flags().StringVar(&workflow, "workflow", "", "only dead steps of this workflow")
	dlq.Flags().IntVar(&limit, "limit", 50, "how many")
	listCmd := &cobra.Command{
		Use:     "list",
		Short:   "dead steps with their error (the default)",
		Args:    noArgs,
		PreRunE: dlq.PreRunE,
		RunE:    list,
	}
	listCmd.Flags().AddFlagSet(dlq.Flags())
	dlq.AddCommand(listCmd)
	for _, sub := range []struct{ name, short, long string }{
		{"retry", "requeue a dead step; the run resumes on the workers",
			"A dead step of a compensated run is refused: its completed steps were undone; rerun\n" +
				"the run from a step instead (dagflow runs retry RUN_ID --from STEP).\n"},
		{"discard", "give up a dead step; the run fails and compensates", ""},
	} {
		var sb backendFlags
		dlq.AddCommand(withBackends(&cobra.Command{
			Use:   sub.name + " RUN_ID STEP",
			Short: sub.short,
			Long:  sub.short + ".\n" + sub.long + "\n" + redisURLHelp,
			Args:  exactArgs("RUN_ID", "STEP"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return retryOrDiscard(cmd.Context(), &sb, cmd.Name(), args[0], args[1], cmd.OutOrStdout())
			},
		}, &sb, sec))
	}
	return dlq
}

func listDead(ctx context.Context, e *engine.Engine, stdout io.Writer, workflow string, limit int) error {
	page, err := e.DeadLetters(ctx, persistence.StepListDeadParams{Workflow: workflow, Limit: limit})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTEP\tATTEMPTS\tFINISHED\tERROR")
	for _, s := range page.Steps {
		fin := ""
		if s.FinishedAt != nil {
			fin = s.FinishedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", cell(s.RunID), cell(s.Step), s.Attempt, fin, errCell(s.Error, s.PayloadError))
	}
	return tw.Flush()
}

func retryOrDiscard(ctx context.Context, b *backendFlags, what, arg, step string, stdout io.Writer) error {
	e, closeAll, err := b.inspector(ctx, true)
	if err != nil {
		return err
	}
	defer closeAll()
	run, err := e.ResolveRunID(ctx, arg)
	if err != nil {
		return err
	}
	if what == "retry" {
		if err := e.RetryDead(ctx, run, step, engine.Actor("cli")); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run %s step %s requeued; the run resumes on the workers\n", cell(run), cell(step))
		return nil
	}
	if err := e.DiscardDead(ctx, run, step); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s step %s discarded\n", cell(run), cell(step))
	return nil
}

// printWaiting says, for each step of a run still to run, why it waits
// (engine.WhyWaiting): its dependencies, its retry, the queue, or no live
// node that can run it.
func printWaiting(ctx context.Context, e *engine.Engine, tw io.Writer, id string, sts []persistence.StepRun) error {
	header := false
	for _, s := range sts {
		if s.Status.Done() || s.Status == persistence.StepDead || s.Status == persistence.StepCancelled ||
			s.Status == persistence.StepCompensated || s.Status == persistence.StepCompensationFailed {
			continue
		}
		w, err := e.WhyWaiting(ctx, id, s.Step)
		if err != nil {
			return err
		}
		if w.Reason == engine.WaitNone {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "\nWAITING\tWHY\tDETAIL")
			header = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(s.Step), w.Reason, cell(w.Detail))
	}
	return nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

// runMigrate applies the embedded migrations.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b backendFlags
	b.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if b.sqlite != "" {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: b.sqlite, AutoMigrate: true})
		if err != nil {
			return err
		}
		defer st.Close()
		fmt.Fprintf(stdout, "migrated SQLite %s\n", b.sqlite)
		return nil
	}
	if err := mysql.Migrate(ctx, b.mysqlDSN); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "migrated MySQL")
	return nil
}

// runRuns lists runs or shows one.
func runRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b backendFlags
	b.register(fs)
	workflow := fs.String("workflow", "", "only runs of this workflow")
	status := fs.String("status", "", "only runs in this status")
	limit := fs.Int("limit", 20, "how many runs")
	cursor := fs.String("cursor", "", "continue from a previous page")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := b.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	rest := fs.Args()
	if len(rest) >= 2 && rest[0] == "show" {
		return showRun(ctx, st, rest[1], stdout)
	}
	if len(rest) > 0 && rest[0] != "list" {
		return fmt.Errorf("unknown subcommand %q (list, show RUN_ID)", rest[0])
	}
	p := persistence.RunListParams{Workflow: *workflow, Limit: *limit, Cursor: *cursor}
	if *status != "" {
		s := persistence.RunStatus(*status)
		if !s.Valid() {
			return fmt.Errorf("-status %q is not a run status", *status)
		}
		p.Status = []persistence.RunStatus{s}
	}
	page, err := st.RunList(ctx, p)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tWORKFLOW\tSTATUS\tCREATED\tERROR")
	for _, r := range page.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Workflow, r.Status, r.CreatedAt.Format(time.RFC3339), firstLine(r.Error))
	}
	tw.Flush()
	if page.NextCursor != "" {
		fmt.Fprintf(stdout, "more: -cursor %s\n", page.NextCursor)
	}
	return nil
}

func showRun(ctx context.Context, st persistence.Store, id string, stdout io.Writer) error {
	run, err := st.RunGet(ctx, id)
	if err != nil {
		return err
	}
	sts, err := st.StepList(ctx, id)
	if err != nil {
		return err
	}
	atts, err := st.AttemptList(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s  workflow %s v%d  status %s\ninput %s\n", run.ID, run.Workflow, run.Version, run.Status, run.Input)
	if run.Error != "" {
		fmt.Fprintf(stdout, "error %s\n", run.Error)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSTEP\tSTATUS\tATTEMPT\tOUTPUT\tERROR")
	for _, s := range sts {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\n", s.Step, s.Status, s.Attempt, s.MaxAttempts, s.Output, firstLine(s.Error))
	}
	fmt.Fprintln(tw, "\nHISTORY\tKIND\tATTEMPT\tOUTCOME\tWORKER\tDURATION\tERROR")
	for _, a := range atts {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%v\t%s\n", a.Step, a.Kind, a.Attempt, a.Outcome, a.Worker, a.Duration(), firstLine(a.Error))
	}
	return tw.Flush()
}

// runDLQ lists, retries or discards dead steps. Retrying needs a running
// engine to execute the step; this command only requeues it in the store,
// and a worker's reconciler dispatches it.
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dlq", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var b backendFlags
	b.register(fs)
	workflow := fs.String("workflow", "", "only dead steps of this workflow")
	limit := fs.Int("limit", 50, "how many")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := b.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	rest := fs.Args()
	sub := "list"
	if len(rest) > 0 {
		sub = rest[0]
	}
	switch sub {
	case "list":
		page, err := st.StepListDead(ctx, persistence.StepListDeadParams{Workflow: *workflow, Limit: *limit})
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
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.RunID, s.Step, s.Attempt, fin, firstLine(s.Error))
		}
		return tw.Flush()
	case "retry", "discard":
		if len(rest) != 3 {
			return fmt.Errorf("usage: dagflow dlq %s RUN_ID STEP", sub)
		}
		rdb, err := b.openRedis(ctx)
		if err != nil {
			return err
		}
		defer rdb.Close()
		e, err := engine.New(engine.Config{Store: st, Redis: rdb, Prefix: b.prefix, NoWorkers: true, ReconcileInterval: -1})
		if err != nil {
			return err
		}
		defer e.Stop(context.Background())
		run, step := rest[1], rest[2]
		if sub == "retry" {
			if err := e.RetryDead(ctx, run, step); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "run %s step %s requeued; the run resumes on the workers\n", run, step)
			return nil
		}
		if err := e.DiscardDead(ctx, run, step); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run %s step %s discarded\n", run, step)
		return nil
	}
	return fmt.Errorf("unknown subcommand %q (list, retry, discard)", sub)
}

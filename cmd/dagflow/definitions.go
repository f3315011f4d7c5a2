package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
)

// withInspector adds the connection flags to cmd and runs it with an
// inspector engine (backendFlags.inspector): one that is never started,
// that runs nothing and knows the workflows from the store. With dial
// the Redis is checked first, for commands that enqueue.
func withInspector(cmd *cobra.Command, sec *secrets, dial bool, run func(cmd *cobra.Command, e *engine.Engine, args []string) error) *cobra.Command {
	var b backendFlags
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		e, closeAll, err := b.inspector(cmd.Context(), dial)
		if err != nil {
			return err
		}
		defer closeAll()
		return run(cmd, e, args)
	}
	return withBackends(cmd, &b, sec)
}

// addListCmd adds to parent, a command that lists when given no
// subcommand, the same listing as its `list` subcommand.
func addListCmd(parent *cobra.Command, short string) {
	list := &cobra.Command{
		Use:     "list",
		Short:   short,
		Args:    noArgs,
		PreRunE: parent.PreRunE,
		RunE:    parent.RunE,
	}
	// list shares the flags of the parent.
	list.Flags().AddFlagSet(parent.Flags())
	parent.AddCommand(list)
}

// newWorkflowsCmd lists the workflows the store knows (workflows, workflows
// list) or shows one (workflows show NAME).
func newWorkflowsCmd(sec *secrets) *cobra.Command {
	wf := withInspector(&cobra.Command{
		Use:   "workflows",
		Short: "list the workflows whose definitions are stored, or show one: workflows [list|show NAME]",
		Args:  noArgs,
	}, sec, false, func(cmd *cobra.Command, e *engine.Engine, _ []string) error {
		return listWorkflows(cmd.Context(), e, cmd.OutOrStdout())
	})
	addListCmd(wf, "the current version of every workflow, by name (the default)")
	wf.AddCommand(withInspector(&cobra.Command{
		Use:   "show NAME",
		Short: "a workflow's steps, its versions and its graph (Mermaid)",
		Args:  exactArgs("NAME"),
	}, sec, false, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
		return showWorkflow(cmd.Context(), e, args[0], cmd.OutOrStdout())
	}))
	return wf
}

func listWorkflows(ctx context.Context, e *engine.Engine, stdout io.Writer) error {
	defs, err := e.Definitions(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tVERSION\tDECLARED\tREGISTERED\tSTEPS")
	for _, d := range defs {
		names := make([]string, len(d.Definition.Steps))
		for i, s := range d.Definition.Steps {
			names[i] = s.Name
		}
		fmt.Fprintf(tw, "%s\t%s\tv%d\t%s\t%s\n", cell(d.Name), cell(d.Version), d.Declared, timeCell(d.RegisteredAt), cell(strings.Join(names, ",")))
	}
	return tw.Flush()
}

// showWorkflow prints a workflow's current definition (its steps with
// their dependencies, queue, condition, retry and timeout), every stored
// version, and its graph in Mermaid.
func showWorkflow(ctx context.Context, e *engine.Engine, name string, stdout io.Writer) error {
	versions, err := e.DefinitionVersions(ctx, name)
	if err != nil {
		return err
	}
	if len(versions) == 0 {
		return fmt.Errorf("%w: %q", engine.ErrUnknownWorkflow, name)
	}
	cur := versions[0]
	fmt.Fprintf(stdout, "workflow %s  version %s  declared v%d  registered %s\n\n", cell(cur.Name), cell(cur.Version), cur.Declared, timeCell(cur.RegisteredAt))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tAFTER\tNEEDS\tQUEUE\tWHEN\tRETRY\tTIMEOUT\tCOMPENSATION")
	for _, s := range cur.Definition.Steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(s.Name), listCell(afterOnly(s)), listCell(s.Needs), cell(s.Queue),
			orDash(cell(s.When)), retryCell(s.Retry), cell(s.Timeout), yesNo(s.Compensation))
	}
	fmt.Fprintln(tw, "\nVERSION\tDECLARED\tFIRST REGISTERED\tLAST REGISTERED")
	for _, v := range versions {
		fmt.Fprintf(tw, "%s\tv%d\t%s\t%s\n", cell(v.Version), v.Declared, timeCell(v.CreatedAt), timeCell(v.RegisteredAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\ngraph (Mermaid):\n%s\n", strings.TrimRight(escapeBlock(cur.Definition.Mermaid()), "\n"))
	return nil
}

// afterOnly is the dependencies of a step given with After: those it
// waits for without needing them.
func afterOnly(s dag.StepDefinition) []string {
	var out []string
	for _, d := range s.Deps {
		needed := false
		for _, n := range s.Needs {
			needed = needed || n == d
		}
		if !needed {
			out = append(out, d)
		}
	}
	return out
}

func listCell(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return cell(strings.Join(names, ","))
}

func retryCell(r dag.RetryDefinition) string {
	if r.MaxAttempts <= 1 {
		return "no retry"
	}
	return cell(fmt.Sprintf("%d attempts, %s..%s", r.MaxAttempts, r.InitialBackoff, r.MaxBackoff))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// timeCell is t in RFC 3339, UTC, or "-" for the zero time.
func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

type triggerFlags struct {
	input    string
	key      string
	startAt  string
	metadata []string
	priority int
}

// newTriggerCmd is `dagflow trigger WORKFLOW`: it starts a run from the
// workflow's stored definition (no handler needed here: the workers run
// it) and prints the run's id.
func newTriggerCmd(sec *secrets) *cobra.Command {
	var f triggerFlags
	cmd := withInspector(&cobra.Command{
		Use:   "trigger WORKFLOW",
		Short: "start a run of a workflow and print its id",
		Long: "Start a run of a workflow, from its stored definition, and print the run's id.\n" +
			"The workers of any node that registered the workflow run it.\n\n" +
			"With --key, a repeat with the same input prints the existing run's id; the same\n" +
			"key with another input is an error naming that run.\n\n" + redisURLHelp,
		Args: exactArgs("WORKFLOW"),
	}, sec, true, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
		opts, input, err := f.parse(cmd.Context(), cmd.InOrStdin())
		if err != nil {
			return err
		}
		return triggerRun(cmd.Context(), e, args[0], input, opts, cmd.OutOrStdout())
	})
	// The flags are checked before the command connects to anything.
	resolve := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if _, _, err := f.parse(c.Context(), nil); err != nil && !errors.Is(err, errStdinLater) {
			return err
		}
		return resolve(c, args)
	}
	fs := cmd.Flags()
	fs.StringVar(&f.input, "input", "", "the run's input: JSON, @FILE to read it from a file, or @- from stdin (default: {}, an empty object)")
	fs.StringVar(&f.key, "key", "", "idempotency key: a repeat with the same key and input gives the same run (keys starting with "+strings.Join(engine.ReservedKeyPrefixes(), ", ")+" are reserved for dagflow's own runs)")
	fs.StringVar(&f.startAt, "start-at", "", "start the run's first steps at this time (RFC 3339, e.g. 2026-01-02T15:04:05Z)")
	fs.StringArrayVar(&f.metadata, "metadata", nil, "metadata KEY=VALUE handed to the steps (repeatable)")
	fs.IntVar(&f.priority, "priority", 0, "the run's priority, -10..10: its steps go before lower ones in their queues")
	return cmd
}

// errStdinLater is parse's answer, before the command runs, for an input
// to be read from stdin: it is read only when the command runs.
var errStdinLater = errors.New("input from stdin")

// parse checks the flags and returns the trigger options and the input.
// With stdin nil, an input from stdin gives errStdinLater.
func (f *triggerFlags) parse(ctx context.Context, stdin io.Reader) ([]engine.TriggerOption, json.RawMessage, error) {
	var opts []engine.TriggerOption
	if f.priority < engine.MinPriority || f.priority > engine.MaxPriority {
		return nil, nil, usagef("--priority %d: not in %d..%d", f.priority, engine.MinPriority, engine.MaxPriority)
	}
	if f.priority != 0 {
		opts = append(opts, engine.Priority(f.priority))
	}
	if err := engine.CheckIdempotencyKey(f.key); err != nil {
		return nil, nil, usagef("--key: %v", err)
	}
	if f.key != "" {
		opts = append(opts, engine.IdempotencyKey(f.key))
	}
	if f.startAt != "" {
		t, err := time.Parse(time.RFC3339, f.startAt)
		if err != nil {
			return nil, nil, usagef("--start-at %q: not an RFC 3339 time such as 2026-01-02T15:04:05Z", f.startAt)
		}
		opts = append(opts, engine.StartAt(t))
	}
	if len(f.metadata) > 0 {
		md := map[string]string{}
		for _, kv := range f.metadata {
			k, v, ok := strings.Cut(kv, "=")
			_, dup := md[k]
			switch {
			case !ok || k == "":
				return nil, nil, usagef("--metadata %q: want KEY=VALUE", kv)
			case dup:
				return nil, nil, usagef("--metadata %q: key %q given twice", kv, k)
			}
			md[k] = v
		}
		opts = append(opts, engine.Metadata(md))
	}
	raw, err := readJSONArg(ctx, "--input", f.input, stdin)
	return opts, raw, err
}

func triggerRun(ctx context.Context, e *engine.Engine, workflow string, input json.RawMessage, opts []engine.TriggerOption, stdout io.Writer) error {
	// Without --input the run gets an empty object, not null: steps
	// that read fields of the input find none rather than fail.
	in := json.RawMessage(`{}`)
	if input != nil {
		in = input
	}
	id, err := e.Trigger(ctx, workflow, in, opts...)
	if errors.Is(err, engine.ErrUnknownWorkflow) {
		if defs, derr := e.Definitions(ctx); derr == nil {
			names := make([]string, len(defs))
			for i, d := range defs {
				names[i] = d.Name
			}
			return fmt.Errorf("%w (known: %s)", err, orDash(cell(strings.Join(names, ", "))))
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, id)
	return nil
}

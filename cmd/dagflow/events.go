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
)

// newEventsCmd is `dagflow events`: publish an event (events publish
// NAME) or list the published ones (events, events list).
func newEventsCmd(sec *secrets) *cobra.Command {
	var name, after, before, cursor string
	var limit int
	events := withInspector(&cobra.Command{
		Use:   "events",
		Short: "list published events (newest first) with the runs they started, or publish one: events [list|publish NAME]",
		Args:  noArgs,
	}, sec, false, func(cmd *cobra.Command, e *engine.Engine, _ []string) error {
		f := engine.EventFilter{Name: name, Cursor: cursor, Limit: limit}
		var err error
		if f.PublishedAfter, err = timeFlag("--after", after); err != nil {
			return err
		}
		if f.PublishedBefore, err = timeFlag("--before", before); err != nil {
			return err
		}
		return listEvents(cmd.Context(), e, f, cmd.OutOrStdout())
	})
	lf := events.Flags()
	lf.StringVar(&name, "name", "", "only events of this name")
	lf.StringVar(&after, "after", "", "only events published at or after this time (RFC 3339)")
	lf.StringVar(&before, "before", "", "only events published before this time (RFC 3339)")
	lf.IntVar(&limit, "limit", 20, "how many events")
	lf.StringVar(&cursor, "cursor", "", "continue from a previous page")
	addListCmd(events, "list published events, newest first (the default)")

	var id, payload, correlation string
	publish := withInspector(&cobra.Command{
		Use:   "publish NAME",
		Short: "publish an event: start a run of every workflow subscribed to it, and print the runs",
		Long: "Publish an event called NAME and print the runs it started, one line per workflow.\n" +
			"With --id, a repeat prints the runs the first publication started and starts nothing;\n" +
			"the id with another payload is an error.\n\n" + redisURLHelp,
		Args: exactArgs("NAME"),
	}, sec, true, func(cmd *cobra.Command, e *engine.Engine, args []string) error {
		raw, err := readJSONArg(cmd.Context(), "--payload", payload, cmd.InOrStdin())
		if err != nil {
			return err
		}
		return publishEvent(cmd.Context(), e, args[0], id, correlation, raw, cmd.OutOrStdout(), cmd.ErrOrStderr())
	})
	pf := publish.Flags()
	pf.StringVar(&id, "id", "", "the event's id: a repeat starts nothing (default: a fresh id)")
	pf.StringVar(&payload, "payload", "", "the event's payload: JSON, @FILE to read it from a file, or @- from stdin (default: none)")
	pf.StringVar(&correlation, "correlation", "", "complete the steps waiting for this event with this correlation value")
	events.AddCommand(publish)
	return events
}

func timeFlag(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usagef("%s %q: not an RFC 3339 time such as 2026-01-02T15:04:05Z", flag, v)
	}
	return t, nil
}

func publishEvent(ctx context.Context, e *engine.Engine, name, id, correlation string, payload json.RawMessage, stdout, stderr io.Writer) error {
	var opts []engine.PublishOption
	if id != "" {
		opts = append(opts, engine.EventID(id))
	}
	if correlation != "" {
		opts = append(opts, engine.Correlation(correlation))
	}
	var in any
	if payload != nil {
		in = payload
	}
	p, err := e.Publish(ctx, name, in, opts...)
	if err != nil {
		return err
	}
	state := "published"
	if !p.Created {
		state = "already published"
	}
	fmt.Fprintf(stdout, "event %s %s, %d runs\n", cell(p.EventID), state, len(p.Runs))
	for _, r := range p.Runs {
		fmt.Fprintf(stdout, "%s\t%s\n", cell(r.Workflow), cell(r.RunID))
	}
	if len(p.Runs) == 0 {
		// A misspelt name starts nothing and is no error: say so.
		if subs, err := e.Subscribers(ctx, name); err == nil && len(subs) == 0 {
			fmt.Fprintf(stderr, "warning: no workflow subscribes to event %q: it started no run\n", name)
		}
	}
	return nil
}

func listEvents(ctx context.Context, e *engine.Engine, f engine.EventFilter, stdout io.Writer) error {
	page, err := e.Events(ctx, f)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT\tNAME\tPUBLISHED\tDISPATCHED\tRUNS")
	for _, ev := range page.Events {
		disp := "-"
		if ev.DispatchedAt != nil {
			disp = ev.DispatchedAt.Format(time.RFC3339)
		}
		runs := make([]string, len(ev.Runs))
		for i, r := range ev.Runs {
			runs[i] = r.Workflow + "=" + r.RunID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(ev.ID), cell(ev.Name), ev.PublishedAt.Format(time.RFC3339), disp,
			orDash(cell(strings.Join(runs, " "))))
	}
	tw.Flush()
	if page.NextCursor != "" {
		fmt.Fprintf(stdout, "more: --cursor %s\n", cell(page.NextCursor))
	}
	return nil
}

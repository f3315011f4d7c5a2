package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/engine"
)

// newPurgeCmd is `runs purge --before DATE [--dry-run]`: the retention
// sweep by hand (engine.Purge), holding the same lease as the nodes'.
func newPurgeCmd(sec *secrets) *cobra.Command {
	var b backendFlags
	var before string
	var dryRun bool
	var share float64
	cmd := withBackends(&cobra.Command{
		Use:   "purge --before DATE [--dry-run] [--share F]",
		Short: "delete the runs that finished before DATE (kept: runs with a dead step)",
		Long: "Delete the runs that finished before DATE, with their steps, history, event links\n" +
			"(and the events left without runs) and schedule ticks, in small batches, then print\n" +
			"what was deleted. Runs with a dead step stay until it is retried or discarded\n" +
			"(dagflow dlq). DATE is 2006-01-02 (UTC midnight) or RFC 3339. With --dry-run\n" +
			"nothing is deleted and the counts are what would be. One sweep at a time: while a\n" +
			"node's retention sweep runs, purge exits 1 saying so. It spends at most --share of\n" +
			"its time deleting (default 0.15, as the nodes' sweep): 1 deletes as fast as the\n" +
			"database can, for a quiet hour.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			at, err := parsePurgeDate(before, time.Now())
			if err != nil {
				return err
			}
			if !(share > 0 && share <= 1) {
				return usagef("--share %v must be above 0 and at most 1", share)
			}
			e, closeAll, err := b.inspector(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer closeAll()
			return purge(cmd.Context(), e, cmd.OutOrStdout(), engine.PurgeParams{Before: at, DryRun: dryRun, Share: share})
		},
	}, &b, sec)
	cmd.Flags().StringVar(&before, "before", "", "delete the runs that finished before this date (2006-01-02 or RFC 3339); required")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "delete nothing; print what would be deleted")
	cmd.Flags().Float64Var(&share, "share", engine.DefaultRetentionShare, "the most of its time the purge spends in batches (0 < F <= 1; 1: as fast as the database deletes)")
	return cmd
}

// parsePurgeDate reads --before: a date (UTC midnight) or an RFC 3339
// time, not after now (a bound in the future would delete the runs that
// finished a moment ago too: certainly a typo).
func parsePurgeDate(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, usagef("--before is required: runs purge --before DATE (2006-01-02 or RFC 3339)")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d, derr := time.ParseInLocation(time.DateOnly, s, time.UTC)
		if derr != nil {
			return time.Time{}, usagef("--before %q is not a date: want 2006-01-02 or RFC 3339 (2006-01-02T15:04:05Z)", s)
		}
		t = d
	}
	if t.After(now) {
		return time.Time{}, usagef("--before %s is in the future: it would delete every finished run", t.UTC().Format(time.RFC3339))
	}
	return t.UTC(), nil
}

func purge(ctx context.Context, e *engine.Engine, stdout io.Writer, p engine.PurgeParams) error {
	before, dryRun := p.Before, p.DryRun
	res, err := e.Purge(ctx, p)
	if err != nil && res.Batches == 0 {
		return err
	}
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	fmt.Fprintf(stdout, "%s %d runs that finished before %s: %d steps, %d attempts, %d event links, %d events, %d schedule ticks, %d operator actions (%d batches)\n",
		verb, res.Runs, before.Format(time.RFC3339), res.Steps, res.Attempts, res.EventLinks, res.Events, res.ScheduleTicks, res.Actions, res.Batches)
	if res.Kept > 0 {
		fmt.Fprintf(stdout, "kept %d runs with a dead step: retry or discard it first (dagflow dlq)\n", res.Kept)
	}
	return err
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/engine"
)

// newCodecCmd is `codec rotate`: re-encode the store's payloads under the
// keyring's current key, so that an old key can leave the keyring.
func newCodecCmd(sec *secrets) *cobra.Command {
	codecCmd := &cobra.Command{
		Use:   "codec",
		Short: "the payload codec's keys: codec rotate",
		Args:  noArgs,
	}
	var b backendFlags
	var dryRun bool
	var batch int
	rotate := withBackends(&cobra.Command{
		Use:   "rotate --codec-keyring-file FILE [--dry-run] [--batch N]",
		Short: "re-encode every stored payload under the keyring's current (first) key",
		Long: "Re-encode every stored payload sealed under another key of the keyring with its\n" +
			"current (first) key, column by column in batches of --batch rows by primary key,\n" +
			"each batch one short transaction that writes a row only if it is unchanged since it\n" +
			"was read. Payloads already under the current key, or in clear, are left alone, so\n" +
			"running it again resumes where it stopped. Once it reports nothing left under the\n" +
			"old key, remove that key from every node's keyring. A payload no key opens is\n" +
			"listed and left as it is; the command then exits 1. With --dry-run nothing is\n" +
			"written and the counts are what would be.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if b.codec == nil {
				return usagef("codec rotate needs the keyring: --codec-keyring-file FILE (or DAGFLOW_CODEC_KEYRING_FILE), the new key first")
			}
			if batch < 1 || batch > 5000 {
				return usagef("--batch %d must be 1 to 5000", batch)
			}
			e, closeAll, err := b.inspector(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer closeAll()
			return rotateCodec(cmd.Context(), e, cmd.OutOrStdout(), engine.RotateOptions{DryRun: dryRun, BatchSize: batch})
		},
	}, &b, sec)
	rotate.Flags().BoolVar(&dryRun, "dry-run", false, "write nothing; count what would be re-encoded")
	rotate.Flags().IntVar(&batch, "batch", 500, "rows per batch (1-5000)")
	codecCmd.AddCommand(rotate)
	return codecCmd
}

func rotateCodec(ctx context.Context, e *engine.Engine, stdout io.Writer, o engine.RotateOptions) error {
	rep, err := e.RotateCodec(ctx, o)
	verb := "re-encoded"
	if o.DryRun {
		verb = "would re-encode"
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "COLUMN\t%s\tCURRENT\tCLEAR\tCHANGED\tFAILED\n", strings.ToUpper(verb))
	for _, c := range rep.Columns {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", cell(c.Column), c.Rotated, c.Current, c.Clear, c.Changed, c.Failed)
	}
	tw.Flush()
	for _, f := range rep.Failures {
		fmt.Fprintf(stdout, "cannot open %s %s: %s\n", cell(f.Column), cell(strings.Join(f.Key, "/")), cell(f.Err))
	}
	if err != nil {
		return err
	}
	if n := rep.Failed(); n > 0 {
		return fmt.Errorf("%d payload(s) no key of the keyring opens were left as they are: restore their key to re-encode them", n)
	}
	fmt.Fprintf(stdout, "every sealed payload is under key %s\n", cell(rep.CurrentKey))
	return nil
}

// keyringHint adds the CLI's option to a Start refused for its keyring.
func keyringHint(err error) error {
	if errors.Is(err, engine.ErrKeyring) {
		return fmt.Errorf("%w (dagflow: --codec-keyring-file or DAGFLOW_CODEC_KEYRING_FILE)", err)
	}
	return err
}

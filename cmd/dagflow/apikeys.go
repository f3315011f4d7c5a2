package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/persistence"
)

// withStore adds the connection flags to cmd and runs it with the store
// open; it needs no Redis.
func withStore(cmd *cobra.Command, sec *secrets, run func(cmd *cobra.Command, st persistence.Store, args []string) error) *cobra.Command {
	var b backendFlags
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		st, err := b.openStore(cmd.Context())
		if err != nil {
			return err
		}
		defer st.Close()
		return run(cmd, st, args)
	}
	return withBackends(cmd, &b, sec)
}

// newAPIKeysCmd lists (apikeys, apikeys list), creates and revokes the
// HTTP API's keys. The store keeps only a key's SHA-256: the secret is
// printed once, by create.
func newAPIKeysCmd(sec *secrets) *cobra.Command {
	keys := withStore(&cobra.Command{
		Use:   "apikeys",
		Short: "the HTTP API's keys: apikeys [list|create --scope S --name N|revoke ID|NAME|SECRET]",
		Long: "The HTTP API's keys. A request sends one as \"Authorization: Bearer <key>\". Scopes:\n" +
			"read (workflows, runs, dead letters, schedules, queues), operate (also trigger,\n" +
			"cancel and retry), admin (also pause, resume and trigger schedules, and create,\n" +
			"list and revoke API keys over the API).\n" +
			"The store keeps a key's SHA-256 only: create prints the secret once.\n" +
			"A server without keys (on loopback) requires them within a second of the first create.",
		Args: noArgs,
	}, sec, func(cmd *cobra.Command, st persistence.Store, _ []string) error {
		return listAPIKeys(cmd, st)
	})
	addListCmd(keys, "every key (revoked ones too), oldest first; never the secret (the default)")

	var scope, name string
	create := withStore(&cobra.Command{
		Use:   "create --scope read|operate|admin --name NAME",
		Short: "make a key and print its secret, once",
		Args:  noArgs,
	}, sec, func(cmd *cobra.Command, st persistence.Store, _ []string) error {
		secret, k, err := api.CreateKey(cmd.Context(), st, name, scope, time.Now())
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "id      %s\nname    %s\nscope   %s\nsecret  %s\n", cell(k.ID), cell(k.Name), cell(k.Scope), secret)
		fmt.Fprintln(cmd.ErrOrStderr(), "The secret is shown only this once: the store keeps its SHA-256. Send it as \"Authorization: Bearer <secret>\".")
		return nil
	})
	// The flags are checked before the command connects to anything.
	resolve := create.PreRunE
	create.PreRunE = func(c *cobra.Command, args []string) error {
		if !api.Scope(scope).Valid() {
			return usagef("--scope %q: want read, operate or admin", scope)
		}
		if err := api.ValidateKeyName(name); err != nil {
			return usagef("--name: %v", err)
		}
		return resolve(c, args)
	}
	create.Flags().StringVar(&scope, "scope", "", "read, operate (trigger, cancel, retry) or admin (schedules, API keys)")
	create.Flags().StringVar(&name, "name", "", "the key's name, unique among the keys not revoked (letters, digits, '.', '_', '-'; not starting with dfk_)")

	revoke := withStore(&cobra.Command{
		Use:   "revoke ID|NAME|SECRET",
		Short: "revoke a key (the servers refuse it within a second); revoking it again says when it was",
		Long: "Revoke a key by its id, its name or, for a key that leaked, its secret (dfk_...):\n" +
			"a secret is looked up by its hash and never printed. The servers refuse the key\n" +
			"within a second; revoking it again says when it was.",
		Args: exactArgs("ID|NAME|SECRET"),
	}, sec, func(cmd *cobra.Command, st persistence.Store, args []string) error {
		k, err := api.RevokeKey(cmd.Context(), st, args[0], time.Now())
		if err != nil {
			return err
		}
		// Revoking a revoked key is not an error: it says when it was.
		fmt.Fprintf(cmd.OutOrStdout(), "API key %s (id %s, scope %s) revoked at %s\n", cell(k.Name), cell(k.ID), cell(k.Scope), timeCell(*k.RevokedAt))
		return nil
	})
	keys.AddCommand(create, revoke)
	return keys
}

func listAPIKeys(cmd *cobra.Command, st persistence.Store) error {
	list, err := api.ListKeys(cmd.Context(), st)
	if err != nil {
		return err
	}
	return printAPIKeys(cmd.OutOrStdout(), list)
}

func printAPIKeys(w io.Writer, list []persistence.APIKey) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tHINT\tCREATED\tREVOKED")
	for _, k := range list {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = timeCell(*k.RevokedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s...\t%s\t%s\n", cell(k.ID), cell(k.Name), cell(k.Scope), cell(k.Hint), timeCell(k.CreatedAt), revoked)
	}
	return tw.Flush()
}

//go:build nodev

package main

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dagflow/dagflow/persistence"
)

// Built with -tags nodev: no dev or bench command and no --sqlite, so the
// binary links neither miniredis nor SQLite.

func embeddedCommands(*secrets) []*cobra.Command { return nil }

func registerSQLite(*pflag.FlagSet, *string) {}

func (b *backendFlags) resolveSQLite() error {
	if os.Getenv("DAGFLOW_SQLITE") != "" {
		return errors.New("DAGFLOW_SQLITE is set, but this dagflow was built with -tags nodev, without SQLite")
	}
	return nil
}

func openSQLite(context.Context, string, bool) (persistence.Store, error) {
	return nil, errors.New("this dagflow was built with -tags nodev, without SQLite")
}

//go:build !nodev

package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

// The embedded backends (miniredis and SQLite) and the commands that use
// them: built unless -tags nodev.

// embeddedCommands are dev and bench.
func embeddedCommands(sec *secrets) []*cobra.Command {
	return []*cobra.Command{newDevCmd(), newBenchCmd(sec)}
}

func registerSQLite(fs *pflag.FlagSet, path *string) {
	fs.StringVar(path, "sqlite", "", "use this SQLite file instead of MySQL (env DAGFLOW_SQLITE)")
}

func (b *backendFlags) resolveSQLite() error {
	if !b.fs.Lookup("sqlite").Changed {
		b.sqlite = os.Getenv("DAGFLOW_SQLITE")
	}
	return nil
}

func openSQLite(ctx context.Context, path string, migrate bool) (persistence.Store, error) {
	// sqlite's errors name their package and the file.
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, AutoMigrate: migrate})
	if err != nil {
		return nil, err
	}
	return st, nil
}

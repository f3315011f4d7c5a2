package persistence

import (
	"errors"
	"fmt"
)

// ErrSchemaBehind is wrapped by SchemaVersion.Check's error: the
// database lacks migrations this binary needs.
var ErrSchemaBehind = errors.New("persistence: database schema is behind this binary")

// SchemaVersion is the schema version of a store's database beside the
// newest one this binary's embedded migrations make.
type SchemaVersion struct {
	// Database is the newest migration applied to the database: 0 for
	// an empty or never migrated database.
	Database int64
	// Binary is the newest migration this binary ships: 0 for a store
	// without versioned migrations, which requires nothing.
	Binary int64
}

// Check returns a *SchemaError (ErrSchemaBehind) when the database lacks
// migrations the binary needs. A database ahead of the binary passes:
// in a rolling deploy the new release migrates first, and the nodes of
// the previous release must keep running until they are replaced (a
// release's migrations keep the previous release working; callers should
// log that the database is ahead, see Ahead).
func (v SchemaVersion) Check() error {
	if v.Database < v.Binary {
		return &SchemaError{Version: v}
	}
	return nil
}

// Ahead reports a database migrated by a newer release than this binary.
func (v SchemaVersion) Ahead() bool { return v.Database > v.Binary }

// SchemaError reports a database whose schema is behind the binary.
type SchemaError struct {
	Version SchemaVersion
}

func (e *SchemaError) Error() string {
	if e.Version.Database == 0 {
		return fmt.Sprintf("persistence: the database has no dagflow schema (version 0), this binary needs version %d: run `dagflow migrate` (or the store's Migrate)", e.Version.Binary)
	}
	return fmt.Sprintf("persistence: database is at schema version %d, this binary needs %d: run `dagflow migrate` (or the store's Migrate)", e.Version.Database, e.Version.Binary)
}

// Unwrap makes errors.Is(err, ErrSchemaBehind) true.
func (e *SchemaError) Unwrap() error { return ErrSchemaBehind }

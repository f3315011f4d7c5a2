package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dagflow/dagflow/persistence/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// schemaVersion is the newest embedded migration: the schema version this
// binary needs (Store.SchemaVersion).
var schemaVersion = mustLatest()

func mustLatest() int64 {
	sub, err := fs.Sub(migrations, "migrations")
	if err == nil {
		var v int64
		if v, err = sqlstore.LatestMigration(sub); err == nil {
			return v
		}
	}
	panic("sqlite: embedded migrations: " + err.Error())
}

// Config configures Open. Zero values mean the defaults.
type Config struct {
	// Path is the database file, or ":memory:" for a private in-memory
	// database.
	Path string
	// MaxPayload limits inputs, outputs and metadata in bytes (default
	// 1 MiB).
	MaxPayload int
	// AutoMigrate applies pending migrations in Open.
	AutoMigrate bool
}

func (c Config) withDefaults() Config {
	if c.MaxPayload <= 0 {
		c.MaxPayload = sqlstore.DefaultMaxPayload
	}
	return c
}

func (c Config) validate() error {
	if c.Path == "" {
		return errors.New("sqlite: Config.Path is empty")
	}
	return nil
}

// Store is the SQLite store. Its methods are those of sqlstore.Store
// (persistence.Store and persistence.TxStore).
type Store struct {
	*sqlstore.Store
}

// BusyTimeout is how long a connection waits for another process's write
// transaction, in milliseconds.
const BusyTimeout = 10000

// Open opens (creating if needed) the database at cfg.Path.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	memory := cfg.Path == ":memory:"
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if !memory {
		q.Add("_pragma", "journal_mode(WAL)")
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: cfg.Path}).EscapedPath() + "?" + q.Encode()
	if memory {
		dsn = "file::memory:?" + q.Encode()
	}
	if !memory {
		if err := createPrivate(cfg.Path); err != nil {
			return nil, err
		}
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	if memory {
		// Every connection to ":memory:" is a new database.
		db.SetMaxOpenConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
	} else {
		// Readers run in parallel under WAL; writers are serialized by the
		// store.
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	s := &Store{Store: sqlstore.New(db, Dialect(), sqlstore.Config{MaxPayload: cfg.MaxPayload, MigrationTable: MigrationTable, SchemaVersion: schemaVersion})}
	if cfg.AutoMigrate {
		if err := s.Migrate(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// createPrivate creates the database file at path, when there is none,
// readable and writable by its owner only (0600): it holds every run's
// input and output. SQLite gives the WAL and shared-memory files it makes
// beside it the same mode. A file that exists keeps its mode; the
// directory is left as it is.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	return nil
}

// Dialect is the sqlstore dialect of SQLite.
func Dialect() sqlstore.Dialect { return sqlstore.SQLite(isDuplicate, isRetryable) }

func code(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func isDuplicate(err error) bool {
	c := code(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func isRetryable(err error) bool {
	c := code(err) & 0xff
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}

// MigrationTable is the table in which goose records applied versions.
const MigrationTable = "dagflow_migrations"

// Migrate applies the pending migrations.
func (s *Store) Migrate(ctx context.Context) error { return s.migrate(ctx, 0) }

// migrate applies the migrations up to version to (0: all of them).
func (s *Store) migrate(ctx context.Context, to int64) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.DB(), sub,
		goose.WithTableName(MigrationTable),
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	if to > 0 {
		_, err = p.UpTo(ctx, to)
	} else {
		_, err = p.Up(ctx)
	}
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

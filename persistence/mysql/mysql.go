package mysql

import (
	"context"
	"crypto/tls"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"

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
	panic("mysql: embedded migrations: " + err.Error())
}

// Config configures Open. Zero values mean the defaults.
type Config struct {
	// DSN is a go-sql-driver DSN, e.g. "user:pass@tcp(host:3306)/dagflow".
	DSN string
	// MaxPayload limits inputs, outputs and metadata in bytes (default
	// 1 MiB). The server's max_allowed_packet must be larger.
	MaxPayload int
	// MaxOpenConns bounds the connection pool (default 32).
	MaxOpenConns int
	// AutoMigrate applies pending migrations in Open.
	AutoMigrate bool
	// TLS, when not nil, makes the connections use TLS with this
	// configuration (a private CA in RootCAs, a client certificate), in
	// place of the DSN's tls parameter. Open registers it with the driver
	// under a name of its own; its ServerName defaults to the DSN's host.
	TLS *tls.Config
}

func (c Config) withDefaults() Config {
	if c.MaxPayload <= 0 {
		c.MaxPayload = sqlstore.DefaultMaxPayload
	}
	if c.MaxOpenConns <= 0 {
		c.MaxOpenConns = 32
	}
	return c
}

func (c Config) validate() error {
	if c.DSN == "" {
		return errors.New("mysql: Config.DSN is empty")
	}
	return nil
}

// Store is the MySQL/MariaDB store. Its methods are those of
// sqlstore.Store (persistence.Store and persistence.TxStore).
type Store struct {
	*sqlstore.Store
}

// Open connects to the database named in cfg.DSN and returns a Store.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dsn, err := normalizeDSN(cfg.DSN)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		if dsn, err = withTLS(dsn, cfg.TLS); err != nil {
			return nil, err
		}
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: open: %w", err)
	}
	// The session variable naming the isolation level differs between
	// MySQL (transaction_isolation) and MariaDB before 11.1 (tx_isolation):
	// ask the server, then reopen with the right one.
	isoVar, err := isolationVariable(ctx, db)
	db.Close()
	if err != nil {
		return nil, err
	}
	mc, _ := mysql.ParseDSN(dsn)
	mc.Params[isoVar] = "'READ-COMMITTED'"
	db, err = sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("mysql: open: %w", err)
	}
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxOpenConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: ping: %w", err)
	}
	d := Dialect()
	d.MultiStatements = true // normalizeDSN turned the DSN's multiStatements on
	s := &Store{Store: sqlstore.New(db, d, sqlstore.Config{MaxPayload: cfg.MaxPayload, MigrationTable: MigrationTable, SchemaVersion: schemaVersion})}
	if cfg.AutoMigrate {
		if err := s.Migrate(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

func isolationVariable(ctx context.Context, db *sql.DB) (string, error) {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", fmt.Errorf("mysql: connect: %w", err)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "tx_isolation", nil
	}
	return "transaction_isolation", nil
}

// tlsConfigs numbers the TLS configurations Open registers with the
// driver, whose registry is global: each Open's gets a name of its own.
var tlsConfigs atomic.Int64

// withTLS registers t with the driver and names it in dsn.
func withTLS(dsn string, t *tls.Config) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("mysql: bad DSN: %w", err)
	}
	name := fmt.Sprintf("dagflow-%d", tlsConfigs.Add(1))
	if err := mysql.RegisterTLSConfig(name, t.Clone()); err != nil {
		return "", fmt.Errorf("mysql: TLS config: %w", err)
	}
	c.TLSConfig = name
	return c.FormatDSN(), nil
}

// normalizeDSN forces the settings the store relies on.
func normalizeDSN(dsn string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("mysql: bad DSN: %w", err)
	}
	if c.DBName == "" {
		return "", errors.New("mysql: the DSN names no database")
	}
	c.ParseTime = true
	c.Loc = time.UTC
	if err := c.Apply(mysql.Charset("utf8mb4", "utf8mb4_bin")); err != nil {
		return "", fmt.Errorf("mysql: bad DSN: %w", err)
	}
	c.ClientFoundRows = true
	// The store sends a transaction's writes as one multi-statement call
	// (one round trip); every value in them is interpolated and escaped
	// by the driver, never spliced into the text by the store.
	c.MultiStatements = true
	// Client-side interpolation sends each statement in one round trip
	// instead of three (prepare, execute, close). It is safe here: the
	// connection charset is utf8mb4 (not one of the multibyte charsets that
	// make escaping unsafe), the sql_mode below keeps backslash escapes,
	// and []byte values go out as binary literals.
	c.InterpolateParams = true
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+00:00'"
	c.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'"
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c.FormatDSN(), nil
}

// Dialect is the sqlstore dialect of MySQL and MariaDB, for any DSN: it
// sends statements one by one. Open sets MultiStatements on it, having
// turned the DSN's multiStatements on.
func Dialect() sqlstore.Dialect {
	return sqlstore.MySQL(isDuplicate, isRetryable)
}

func mysqlErr(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// ER_DUP_ENTRY.
func isDuplicate(err error) bool { return mysqlErr(err) == 1062 }

// isRetryable reports the errors after which the transaction was rolled
// back, or cannot commit, and the work can be redone from the start:
//
//   - 1213 ER_LOCK_DEADLOCK and 1205 ER_LOCK_WAIT_TIMEOUT: a deadlock
//     victim, or a statement that waited too long for a row lock
//     (MySQL, MariaDB and TiDB);
//   - TiDB's 9007 write conflict (another transaction wrote the row
//     first), 8028 information schema changed (a DDL ran meanwhile),
//     8022 transaction retry failed, 9001, 9002 and 9005 (the placement
//     driver, a TiKV store or a region unavailable or busy, which the
//     client may retry), and 1105 when it says "pessimistic lock retry
//     limit reached".
func isRetryable(err error) bool {
	switch mysqlErr(err) {
	case 1213, 1205, 9007, 8028, 8022, 9001, 9002, 9005:
		return true
	case 1105:
		// TiDB's "unknown error" code, which it also gives a
		// pessimistic statement that kept meeting newer writes of the
		// rows it locks: the transaction is rolled back, and redoing
		// it later is what the message asks for.
		var me *mysql.MySQLError
		return errors.As(err, &me) && strings.Contains(me.Message, "pessimistic lock retry limit reached")
	}
	return false
}

// Migrate applies the pending migrations.
func (s *Store) Migrate(ctx context.Context) error { return migrateDB(ctx, s.DB(), 0) }

// Migrate applies the pending migrations to the database named in dsn.
func Migrate(ctx context.Context, dsn string) error {
	dsn, err := normalizeDSN(dsn)
	if err != nil {
		return err
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("mysql: open: %w", err)
	}
	defer db.Close()
	return migrateDB(ctx, db, 0)
}

// MigrationTable is the table in which goose records applied versions.
const MigrationTable = "dagflow_migrations"

// migrateDB applies the embedded migrations while holding the database's
// migration lock (GET_LOCK, on a connection of its own), so that
// concurrent first migrations of one database, from any number of
// processes, run one after the other. The lock covers the whole of goose's
// Up: Up first checks for pending migrations without a session locker,
// and that check creates the version table; under goose's own session
// locker a second migration could find the table before its zero-version
// row and fail with "missing zero version migration". A positive to stops
// at that version (for the upgrade tests); 0 applies them all.
func migrateDB(ctx context.Context, db *sql.DB, to int64) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("mysql: migrations: %w", err)
	}
	return migrateFS(ctx, db, sub, to)
}

// migrateFS is migrateDB with the migrations of fsys (the upgrade tests
// pass those of an earlier release).
func migrateFS(ctx context.Context, db *sql.DB, fsys fs.FS, to int64) (err error) {
	p, err := goose.NewProvider(goose.DialectMySQL, db, fsys,
		goose.WithTableName(MigrationTable),
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("mysql: migrations: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysql: migration lock: %w", err)
	}
	defer conn.Close()
	if err := migrationLock(ctx, conn); err != nil {
		return err
	}
	defer func() {
		// A detached context: the caller's may have ended, and the lock
		// must go (closing the connection would free it too).
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK("+lockName+")"); uerr != nil && err == nil {
			err = fmt.Errorf("mysql: migration unlock: %w", uerr)
		}
	}()
	if to > 0 {
		_, err = p.UpTo(ctx, to)
	} else {
		_, err = p.Up(ctx)
	}
	if err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	return nil
}

// lockName is the migration lock of the connection's database.
const lockName = "CONCAT('dagflow_migrate:', DATABASE())"

// migrationLock waits up to 60 s for the migration lock on conn. TiDB
// keeps its locks in a table, and under contention may answer GET_LOCK
// with a retryable error (isRetryable) instead of waiting: it is asked
// again until the 60 s are over.
func migrationLock(ctx context.Context, conn *sql.Conn) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		wait := max(1, int(time.Until(deadline).Seconds()))
		var got sql.NullInt64
		err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", ?)", wait).Scan(&got)
		switch {
		case err == nil && got.Valid && got.Int64 == 1:
			return nil
		case err == nil:
			return errors.New("mysql: migration lock: timed out after 60s")
		case !isRetryable(err) || time.Now().After(deadline):
			return fmt.Errorf("mysql: migration lock: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mysql: migration lock: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/dagflow/dagflow/persistence"
)

// Config configures a Store.
type Config struct {
	// MaxPayload limits inputs, outputs and metadata, in bytes; zero means
	// DefaultMaxPayload.
	MaxPayload int
	// MigrationTable is the table in which the driver's migrations
	// record the versions applied (goose's: version_id, is_applied), and
	// SchemaVersion the newest version they make (LatestMigration);
	// Store.SchemaVersion compares the two. Empty: the store requires no
	// version.
	MigrationTable string
	SchemaVersion  int64
}

// Store implements persistence.Store and persistence.TxStore on a
// *sql.DB for one Dialect.
type Store struct {
	db         *sql.DB
	d          Dialect
	maxPayload int
	// wsem serializes write transactions when the dialect asks for it.
	wsem chan struct{}
	// idMu guards storeID, the store's id once read (StoreID).
	idMu    sync.Mutex
	storeID string
	// schema is where the applied migrations are recorded and the
	// version this binary needs.
	schema struct {
		table   string
		version int64
	}
}

var (
	_ persistence.Store   = (*Store)(nil)
	_ persistence.TxStore = (*Store)(nil)
)

// New returns a Store on db, whose schema the caller has migrated.
func New(db *sql.DB, d Dialect, cfg Config) *Store {
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	s := &Store{db: db, d: d, maxPayload: cfg.MaxPayload}
	s.schema.table, s.schema.version = cfg.MigrationTable, cfg.SchemaVersion
	if d.SerializeWrites {
		s.wsem = make(chan struct{}, 1)
	}
	return s
}

// DB returns the underlying database handle.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect returns the store's dialect.
func (s *Store) Dialect() Dialect { return s.d }

// Now implements persistence.Store: the database server's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var v string
	if err := s.db.QueryRowContext(ctx, s.d.NowSQL).Scan(&v); err != nil {
		return time.Time{}, wrap("now", err)
	}
	sec, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlstore: now: server clock %q is not a number: %w", v, err)
	}
	whole := math.Floor(sec)
	return time.Unix(int64(whole), int64((sec-whole)*1e9)).UTC().Truncate(time.Microsecond), nil
}

// Close closes the database handle.
func (s *Store) Close() error { return s.db.Close() }

// querier is what the store's queries run on: *sql.DB, *sql.Tx or a
// caller's transaction.
type querier = persistence.DBTX

func (s *Store) lockWrites(ctx context.Context) (func(), error) {
	if s.wsem == nil {
		return func() {}, nil
	}
	select {
	case s.wsem <- struct{}{}:
		return func() { <-s.wsem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// maxTxRetries bounds how often a transaction that lost a deadlock (or
// found the database busy) is run again.
const maxTxRetries = 5

// write runs fn in a write transaction, committing when it returns nil.
// A retryable failure (deadlock victim) reruns fn in a fresh transaction,
// so fn must not keep state across calls other than its results.
func (s *Store) write(ctx context.Context, fn func(q querier) error) error {
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	run := s.tx
	if s.d.MultiStatements {
		run = s.pipeWrite
	}
	for try := 0; ; try++ {
		err := run(ctx, fn)
		if err == nil || try >= maxTxRetries || !s.d.IsRetryable(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(1<<try) * time.Millisecond)
	}
}

func (s *Store) tx(ctx context.Context, fn func(q querier) error) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	return nil
}

// exec1 runs one write statement outside an explicit transaction.
func (s *Store) exec1(ctx context.Context, query string, args ...any) (int64, error) {
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	for try := 0; ; try++ {
		n, err := s.exec(ctx, s.db, query, args...)
		if err == nil || try >= maxTxRetries || !s.d.IsRetryable(err) || ctx.Err() != nil {
			return n, err
		}
		time.Sleep(time.Duration(1<<try) * time.Millisecond)
	}
}

func (s *Store) exec(ctx context.Context, q querier, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, s.d.rebind(query), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// stmt is one statement of a batch for execAll.
type stmt struct {
	query string
	args  []any
}

// maxStmtBytes bounds the argument data (inputs, outputs, texts) sent in
// one round trip, so that batches of large payloads stay well under
// MySQL's max_allowed_packet (16 MiB by default; escaping can double the
// data): a multi-row statement is split, and statements are combined only
// up to it. A single row larger than that goes alone (MaxPayload's limit
// applies to it, and max_allowed_packet must exceed MaxPayload).
const maxStmtBytes = 4 << 20

// maxStmtArgs bounds the arguments of one statement (SQLite binds at most
// 32,766 parameters).
const maxStmtArgs = 30000

// argBytes estimates the bytes args take in a statement.
func argBytes(args []any) int {
	n := 0
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			n += 8
		}
	}
	return n
}

// valuesStmts builds "head tuple, tuple, ... tail" statements for rows
// (each row's arguments fill one tuple), splitting them so that each
// statement carries at most maxStmtBytes and maxStmtArgs of arguments, or
// one row.
func valuesStmts(head, tuple, tail string, rows [][]any) []stmt {
	var out []stmt
	var b strings.Builder
	var args []any
	size := 0
	flush := func() {
		if len(args) == 0 {
			return
		}
		b.WriteString(tail)
		out = append(out, stmt{b.String(), args})
		b.Reset()
		args, size = nil, 0
	}
	for i, r := range rows {
		n := argBytes(r)
		if len(args) > 0 && (size+n > maxStmtBytes || len(args)+len(r) > maxStmtArgs) {
			flush()
		}
		if len(args) == 0 {
			// Sized for the rest of the rows, up to the statement limits.
			left := len(rows) - i
			b.Grow(len(head) + left*(len(tuple)+2) + len(tail))
			args = make([]any, 0, min(left*len(r), maxStmtArgs))
			b.WriteString(head)
		} else {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
		args = append(args, r...)
		size += n
	}
	flush()
	return out
}

// execAll runs statements that return no rows, in order: in one round trip
// where the dialect allows several statements in one call (MySQL), one
// after the other otherwise (SQLite, in process). A failing statement
// stops the batch; its error is returned, and the caller's transaction is
// rolled back as for any error.
func (s *Store) execAll(ctx context.Context, q querier, stmts ...stmt) error {
	if !s.d.MultiStatements {
		for _, st := range stmts {
			if _, err := s.exec(ctx, q, st.query, st.args...); err != nil {
				return err
			}
		}
		return nil
	}
	var b strings.Builder
	var args []any
	size := 0
	send := func() error {
		if b.Len() == 0 {
			return nil
		}
		_, err := s.exec(ctx, q, b.String(), args...)
		b.Reset()
		args, size = nil, 0
		return err
	}
	for _, st := range stmts {
		n := argBytes(st.args)
		if b.Len() > 0 && size+n > maxStmtBytes {
			if err := send(); err != nil {
				return err
			}
		}
		if b.Len() > 0 {
			b.WriteString(";\n")
		}
		b.WriteString(st.query)
		args = append(args, st.args...)
		size += n
	}
	return send()
}

// selectAll scans every row of query into dest, a pointer to a slice of
// row structs.
func (s *Store) selectAll(ctx context.Context, q querier, dest any, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, s.d.rebind(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := scanInto(rows, dest); err != nil {
		return err
	}
	return rows.Close()
}

// scanInto scans the rows of rows' current result set into dest, a
// pointer to a slice of row structs.
func scanInto(rows *sql.Rows, dest any) error {
	if d, ok := dest.(*[]stepRow); ok {
		// The hot path's scan (every batch reads whole step rows):
		// straight into the fields, without sqlx's reflection.
		return scanStepRows(rows, d)
	}
	if d, ok := dest.(*[]readRow); ok {
		// A claim measures every step of its runs: the same.
		return scanReadRows(rows, d)
	}
	if d, ok := dest.(*[]runRow); ok {
		// Whole run rows, as a claim reads them: the same, unless a query
		// selects other columns.
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		if slices.Equal(cols, runColList) {
			return scanRunRows(rows, d)
		}
	}
	return sqlx.StructScan(rows, dest)
}

// exists reports whether query returns a row.
func (s *Store) exists(ctx context.Context, q querier, query string, args ...any) (bool, error) {
	var one int
	err := q.QueryRowContext(ctx, s.d.rebind(query), args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (s *Store) t(t time.Time) any { return s.d.Time(t) }

func (s *Store) tp(t *time.Time) any {
	if t == nil {
		return nil
	}
	return s.d.Time(*t)
}

// in returns "?, ?, ?" for n placeholders.
func in(n int) string {
	if n <= 0 {
		return "NULL"
	}
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ve *persistence.ValidationError
	var le *persistence.LimitError
	var ie *persistence.IdempotencyConflictError
	var te *persistence.TransitionError
	switch {
	case errors.As(err, &ve), errors.As(err, &le), errors.As(err, &ie), errors.As(err, &te),
		errors.Is(err, persistence.ErrRunNotFound), errors.Is(err, persistence.ErrStepNotFound),
		errors.Is(err, persistence.ErrScheduleNotFound), errors.Is(err, persistence.ErrNotClaimable),
		errors.Is(err, persistence.ErrFenceMismatch), errors.Is(err, persistence.ErrRunFinished),
		errors.Is(err, persistence.ErrDefinitionNotFound), errors.Is(err, persistence.ErrAPIKeyNotFound),
		errors.Is(err, persistence.ErrAPIKeyExists), errors.Is(err, persistence.ErrEventNotFound),
		errors.Is(err, persistence.ErrScheduleExists),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("sqlstore: %s: %w", op, err)
}

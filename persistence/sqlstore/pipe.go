package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
)

// pipeTx is a write transaction on one connection of a dialect that takes
// several statements in one call (MySQL), whose statements travel
// together: START TRANSACTION goes with the transaction's first query,
// writes queued with execLater go with the next query or with the COMMIT.
// A batch transaction of the hot path (read the rows, write them back)
// then costs two round trips instead of five, and a run creation one
// instead of three. Each round trip is two context switches on each side
// and a turn in the server's scheduler; on a busy machine that wait is
// most of a transaction's time.
//
// A statement that fails stops the call it travels in (the server runs no
// statement after it); the transaction is then rolled back, as for any
// error, and the error is the one of the failing statement.
type pipeTx struct {
	s    *Store
	conn *sql.Conn
	// pending are the statements not sent yet; size is their argument
	// bytes, bounded by maxStmtBytes.
	pending []stmt
	size    int
	// began is set once START TRANSACTION has been sent.
	began bool
	// writes is set once a write has been queued or sent.
	writes bool
}

var _ querier = (*pipeTx)(nil)

func (s *Store) beginPipe(ctx context.Context) (*pipeTx, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &pipeTx{s: s, conn: conn, pending: []stmt{{query: "START TRANSACTION"}}}, nil
}

// take returns query with the pending statements ahead of it, and their
// arguments, and clears them.
func (p *pipeTx) take(query string, args []any) (string, []any) {
	if len(p.pending) == 0 {
		return query, args
	}
	var b strings.Builder
	n, size := len(args), len(query)
	for _, st := range p.pending {
		n += len(st.args)
		size += len(st.query) + 2
	}
	b.Grow(size)
	all := make([]any, 0, n)
	for _, st := range p.pending {
		b.WriteString(st.query)
		b.WriteString(";\n")
		all = append(all, st.args...)
	}
	b.WriteString(query)
	all = append(all, args...)
	p.pending, p.size = nil, 0
	p.began = true
	return b.String(), all
}

// ExecContext sends the pending statements and query in one call. The
// result's RowsAffected is query's.
func (p *pipeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	p.writes = true
	q, a := p.take(query, args)
	return p.conn.ExecContext(ctx, q, a...)
}

// QueryContext sends the pending statements and query in one call; the
// rows are query's.
func (p *pipeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	q, a := p.take(query, args)
	return p.conn.QueryContext(ctx, q, a...)
}

// QueryRowContext sends the pending statements and query in one call; the
// row is query's, and an error of a pending statement is its Scan's.
func (p *pipeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	q, a := p.take(query, args)
	return p.conn.QueryRowContext(ctx, q, a...)
}

// later queues writes to go with the transaction's next statement or its
// COMMIT. Pending statements that would carry more than maxStmtBytes
// together are sent first.
func (p *pipeTx) later(ctx context.Context, stmts []stmt) error {
	p.writes = true
	for _, st := range stmts {
		n := len(st.query) + argBytes(st.args)
		if p.size > 0 && p.size+n > maxStmtBytes {
			if err := p.flush(ctx); err != nil {
				return err
			}
		}
		p.pending = append(p.pending, st)
		p.size += n
	}
	return nil
}

// flush sends the pending statements.
func (p *pipeTx) flush(ctx context.Context) error {
	if len(p.pending) == 0 {
		return nil
	}
	last := p.pending[len(p.pending)-1]
	p.pending = p.pending[:len(p.pending)-1]
	_, err := p.ExecContext(ctx, last.query, last.args...)
	return err
}

// commit sends the pending statements and COMMIT. A transaction that
// wrote nothing and sent nothing is not started at all.
func (p *pipeTx) commit(ctx context.Context) error {
	if !p.writes && !p.began {
		p.pending = nil
		return nil
	}
	_, err := p.ExecContext(ctx, "COMMIT")
	return err
}

// close rolls back what the transaction did unless it committed, and
// gives the connection back. A connection whose rollback failed is
// closed, so that no transaction stays open on a pooled connection.
func (p *pipeTx) close(committed bool) {
	if p.began && !committed {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := p.conn.ExecContext(ctx, "ROLLBACK")
		cancel()
		if err != nil {
			_ = p.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	_ = p.conn.Close()
}

// pipeWrite runs fn in a pipeTx and commits it.
func (s *Store) pipeWrite(ctx context.Context, fn func(q querier) error) error {
	p, err := s.beginPipe(ctx)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	committed := false
	defer func() { p.close(committed) }()
	if err := fn(p); err != nil {
		return err
	}
	if err := p.commit(ctx); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	committed = true
	return nil
}

// execLater runs write statements that nothing later in the transaction
// needs to have run before its next statement: on a pipeTx they go with
// that statement or with the COMMIT; elsewhere they run now, as execAll.
// Their error may then be the next statement's or the commit's, so the
// caller must not tell their errors apart from the transaction's.
func (s *Store) execLater(ctx context.Context, q querier, stmts ...stmt) error {
	if p, ok := q.(*pipeTx); ok {
		return p.later(ctx, stmts)
	}
	return s.execAll(ctx, q, stmts...)
}

// rowSet is one query of selectSets and where its rows go.
type rowSet struct {
	dest  any
	query string
	args  []any
}

// selectSets runs queries in order, each scanned into its dest as by
// selectAll: in one round trip on a pipeTx, one after the other
// elsewhere.
func (s *Store) selectSets(ctx context.Context, q querier, sets ...rowSet) error {
	p, ok := q.(*pipeTx)
	if !ok || len(sets) < 2 {
		for _, set := range sets {
			if err := s.selectAll(ctx, q, set.dest, set.query, set.args...); err != nil {
				return err
			}
		}
		return nil
	}
	var b strings.Builder
	var args []any
	for i, set := range sets {
		if i > 0 {
			b.WriteString(";\n")
		}
		b.WriteString(s.d.rebind(set.query))
		args = append(args, set.args...)
	}
	rows, err := p.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for i, set := range sets {
		if i > 0 && !rows.NextResultSet() {
			if err := rows.Err(); err != nil {
				return err
			}
			return fmt.Errorf("sqlstore: %d result sets for %d queries", i, len(sets))
		}
		if err := scanInto(rows, set.dest); err != nil {
			return err
		}
	}
	if rows.NextResultSet() {
		return errors.New("sqlstore: more result sets than queries")
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// The columns the engine's payload codec encodes, for re-encoding them
// under a new key (engine.RotateCodec), and the codec probe (MySQL
// migration 00017, SQLite 00016).

// sealedColumn is a column the codec encodes, with its table's primary
// key: the walk pages by it.
type sealedColumn struct {
	table  string
	keys   []string // the primary key's columns, in order
	column string
	kind   string // the codec kind: "input", "output", "error"
	intKey bool   // the (one) key column is an integer
}

// sealedColumns are walked in this order; a column the codec starts to
// encode is one more line here. The probe comes last: a rotation that
// stops half way leaves it under the old key, which the nodes still
// have.
var sealedColumns = []sealedColumn{
	{table: "workflow_runs", keys: []string{"id"}, column: "input", kind: "input"},
	{table: "workflow_runs", keys: []string{"id"}, column: "output", kind: "output"},
	{table: "workflow_runs", keys: []string{"id"}, column: "error", kind: "error"},
	{table: "step_runs", keys: []string{"run_id", "step"}, column: "output", kind: "output"},
	{table: "step_runs", keys: []string{"run_id", "step"}, column: "error", kind: "error"},
	{table: "step_attempts", keys: []string{"id"}, column: "error", kind: "error", intKey: true},
	{table: "events", keys: []string{"id"}, column: "payload", kind: "input"},
	{table: "schedules", keys: []string{"name"}, column: "input", kind: "input"},
	{table: "codec_probe", keys: []string{"name"}, column: "value", kind: "input"},
}

// codecProbeName is the probe's row in codec_probe.
const codecProbeName = "keyring"

func (c sealedColumn) name() string { return c.table + "." + c.column }

// arg is a value of the column as the store writes it: error texts as
// text (SQLite never finds a blob equal to a text), payloads as bytes.
func (c sealedColumn) arg(b []byte) any {
	if c.kind == "error" {
		return string(b)
	}
	return b
}

// keyArgs are a row key's values as query arguments.
func (c sealedColumn) keyArgs(key []string) ([]any, error) {
	if len(key) != len(c.keys) {
		return nil, invalid(c.name()+" key", strings.Join(key, "/"), fmt.Sprintf("want %d values (%s)", len(c.keys), strings.Join(c.keys, ", ")))
	}
	args := make([]any, len(key))
	for i, k := range key {
		args[i] = k
		if c.intKey {
			n, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				return nil, invalid(c.name()+" key", k, "not an integer")
			}
			args[i] = n
		}
	}
	return args, nil
}

// after is the keyset condition "the row's key is after key", an OR of
// ANDs that the primary key's index serves as one range.
func (c sealedColumn) after(key []any) (string, []any) {
	var ors []string
	var args []any
	for i := range c.keys {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, c.keys[j]+" = ?")
			args = append(args, key[j])
		}
		ands = append(ands, c.keys[i]+" > ?")
		args = append(args, key[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")", args
}

func findSealed(name string) (sealedColumn, error) {
	for _, c := range sealedColumns {
		if c.name() == name {
			return c, nil
		}
	}
	return sealedColumn{}, invalid("sealed column", name, "not a column the codec encodes")
}

// SealedColumns implements persistence.Store.
func (s *Store) SealedColumns() []persistence.SealedColumn {
	out := make([]persistence.SealedColumn, len(sealedColumns))
	for i, c := range sealedColumns {
		out[i] = persistence.SealedColumn{Name: c.name(), Kind: c.kind}
	}
	return out
}

const (
	defaultSealedLimit = 500
	maxSealedLimit     = 5000
)

// SealedList implements persistence.Store.
func (s *Store) SealedList(ctx context.Context, p persistence.SealedListParams) (persistence.SealedPage, error) {
	c, err := findSealed(p.Column)
	if err != nil {
		return persistence.SealedPage{}, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = defaultSealedLimit
	}
	limit = min(limit, maxSealedLimit)
	where, args := c.column+" IS NOT NULL", []any(nil)
	if p.Cursor != "" {
		key, err := decodeSealedCursor(p.Cursor)
		if err != nil {
			return persistence.SealedPage{}, err
		}
		kargs, err := c.keyArgs(key)
		if err != nil {
			return persistence.SealedPage{}, invalid("cursor", p.Cursor, "not a cursor of "+c.name())
		}
		cond, cargs := c.after(kargs)
		where, args = where+" AND "+cond, cargs
	}
	keys := strings.Join(c.keys, ", ")
	q := fmt.Sprintf("SELECT %s, %s FROM %s%s WHERE %s ORDER BY %s LIMIT %d",
		keys, c.column, c.table, s.d.ByPrimaryKey, where, keys, limit)
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return persistence.SealedPage{}, wrap("list "+c.name(), err)
	}
	defer rows.Close()
	var page persistence.SealedPage
	var last []string
	n := 0
	for rows.Next() {
		key := make([]string, len(c.keys))
		var val []byte
		dest := make([]any, 0, len(key)+1)
		for i := range key {
			dest = append(dest, &key[i])
		}
		if err := rows.Scan(append(dest, &val)...); err != nil {
			return persistence.SealedPage{}, wrap("list "+c.name(), err)
		}
		n, last = n+1, key
		if len(val) > 0 {
			page.Values = append(page.Values, persistence.SealedValue{Key: key, Value: val})
		}
	}
	if err := rows.Err(); err != nil {
		return persistence.SealedPage{}, wrap("list "+c.name(), err)
	}
	if n == limit {
		b, _ := json.Marshal(last)
		page.NextCursor = base64.RawURLEncoding.EncodeToString(b)
	}
	return page, nil
}

func decodeSealedCursor(cur string) ([]string, error) {
	b, err := base64.RawURLEncoding.DecodeString(cur)
	var key []string
	if err == nil {
		err = json.Unmarshal(b, &key)
	}
	if err != nil || len(key) == 0 {
		return nil, invalid("cursor", cur, "not a cursor of this list")
	}
	return key, nil
}

// SealedUpdate implements persistence.Store.
func (s *Store) SealedUpdate(ctx context.Context, p persistence.SealedUpdateParams) (int, error) {
	c, err := findSealed(p.Column)
	if err != nil {
		return 0, err
	}
	stmts := make([]stmt, 0, len(p.Writes))
	conds := make([]string, len(c.keys))
	for i, k := range c.keys {
		conds[i] = k + " = ?"
	}
	q := fmt.Sprintf("UPDATE %s%s SET %s = ? WHERE %s AND %s = ?", c.table, s.d.ByPrimaryKey, c.column, strings.Join(conds, " AND "), c.column)
	for _, w := range p.Writes {
		kargs, err := c.keyArgs(w.Key)
		if err != nil {
			return 0, err
		}
		if len(w.New) == 0 {
			return 0, invalid(c.name()+" value", strings.Join(w.Key, "/"), "a new value is empty")
		}
		args := append(append([]any{c.arg(w.New)}, kargs...), c.arg(w.Old))
		stmts = append(stmts, stmt{query: q, args: args})
	}
	unlock, err := s.lockWrites(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	written := 0
	batch := func(q querier) error {
		written = 0
		for _, st := range stmts {
			n, err := s.exec(ctx, q, st.query, st.args...)
			if err != nil {
				return err
			}
			written += int(n)
		}
		return nil
	}
	// The nodes write these rows too: a lost deadlock reruns the batch.
	for try := 0; ; try++ {
		err = s.tx(ctx, batch)
		if err == nil || try >= maxTxRetries || !s.d.IsRetryable(err) || ctx.Err() != nil {
			return written, wrap("update "+c.name(), err)
		}
		time.Sleep(time.Duration(1<<try) * time.Millisecond)
	}
}

// CodecProbe implements persistence.Store.
func (s *Store) CodecProbe(ctx context.Context, p persistence.CodecProbeParams) ([]byte, error) {
	var v []byte
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT value FROM codec_probe WHERE name = ?`), codecProbeName).Scan(&v)
	switch {
	case err == nil:
		return v, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, wrap("read the codec probe", err)
	case len(p.Create) == 0:
		return nil, nil
	}
	ins := `INSERT INTO codec_probe (name, value) VALUES (?, ?)` + s.d.InsertIgnore([]string{"name"})
	if _, err := s.exec1(ctx, ins, codecProbeName, p.Create); err != nil {
		return nil, wrap("store the codec probe", err)
	}
	return s.CodecProbe(ctx, persistence.CodecProbeParams{})
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/persistence"
)

// Re-encoding what the store holds under the codec's current key, so
// that an old key can leave the keyring (`dagflow codec rotate`).

// RotateOptions configure RotateCodec.
type RotateOptions struct {
	// DryRun counts what would be re-encoded and writes nothing.
	DryRun bool
	// BatchSize is how many rows one read and one write transaction
	// take: 500 when zero or negative, at most 5000.
	BatchSize int
	// Progress, when set, is called after each batch with the column's
	// counts so far.
	Progress func(RotateColumn)
}

// RotateColumn counts what RotateCodec found in one sealed column.
type RotateColumn struct {
	// Column is "table.column".
	Column string
	// Current were under the current key already, Clear stored in clear
	// (written without the codec): both are left as they are.
	Current, Clear int
	// Rotated were re-encoded under the current key (with DryRun: would
	// be).
	Rotated int
	// Changed were written by someone else between the read and the
	// write (by a node, under its key): left as they are.
	Changed int
	// Failed could not be opened with any key of the keyring.
	Failed int
}

// RotateFailure is a value no key of the keyring opens.
type RotateFailure struct {
	Column string
	Key    []string // the row's primary key
	Err    string
}

// RotateReport is what RotateCodec did.
type RotateReport struct {
	CurrentKey string
	Columns    []RotateColumn
	// Failures are the values that could not be opened (the first
	// maxRotateFailures; Failed counts them all).
	Failures []RotateFailure
}

// Failed counts the values no key opened.
func (r RotateReport) Failed() int {
	n := 0
	for _, c := range r.Columns {
		n += c.Failed
	}
	return n
}

const maxRotateFailures = 100

// ErrNotKeyed is RotateCodec's error without a codec, or with one that
// does not encode under named keys (codec.Keyed).
var ErrNotKeyed = errors.New("engine: the codec has no keys to rotate (Config.Codec must be a codec.Keyed, such as codec/aesgcm)")

// RotateCodec re-encodes, under the codec's current key, every stored
// payload encoded under another of its keys: the store's sealed columns
// one after the other, each in batches by primary key range (one read,
// then one short write transaction of single-row updates that each
// apply only if the row still holds what was read). Payloads under the
// current key, and payloads in clear, are left alone, so a second run
// (or one after an interrupted run) writes only what is left: it
// resumes. Values no key opens are counted, listed in the report (a
// bounded number) and left as they are; the walk goes on.
func (e *Engine) RotateCodec(ctx context.Context, o RotateOptions) (RotateReport, error) {
	kc, ok := e.cfg.Codec.(codec.Keyed)
	if !ok {
		return RotateReport{}, ErrNotKeyed
	}
	rep := RotateReport{CurrentKey: kc.CurrentKey()}
	for _, col := range e.store.SealedColumns() {
		rc, err := e.rotateColumn(ctx, kc, col, o, &rep)
		rep.Columns = append(rep.Columns, rc)
		if err != nil {
			return rep, fmt.Errorf("engine: rotate %s: %w", col.Name, err)
		}
	}
	return rep, nil
}

func (e *Engine) rotateColumn(ctx context.Context, kc codec.Keyed, col persistence.SealedColumn, o RotateOptions, rep *RotateReport) (RotateColumn, error) {
	rc := RotateColumn{Column: col.Name}
	kind := codec.Kind(col.Kind)
	cursor := ""
	for {
		page, err := e.store.SealedList(ctx, persistence.SealedListParams{Column: col.Name, Cursor: cursor, Limit: o.BatchSize})
		if err != nil {
			return rc, err
		}
		var writes []persistence.SealedWrite
		for _, v := range page.Values {
			w, ok, err := e.reseal(ctx, kc, kind, v, &rc)
			if err != nil {
				rc.Failed++
				if len(rep.Failures) < maxRotateFailures {
					rep.Failures = append(rep.Failures, RotateFailure{Column: col.Name, Key: v.Key, Err: err.Error()})
				}
				continue
			}
			if ok {
				writes = append(writes, w)
			}
		}
		if o.DryRun {
			rc.Rotated += len(writes)
		} else if len(writes) > 0 {
			n, err := e.store.SealedUpdate(ctx, persistence.SealedUpdateParams{Column: col.Name, Writes: writes})
			if err != nil {
				return rc, err
			}
			rc.Rotated += n
			rc.Changed += len(writes) - n
		}
		if o.Progress != nil {
			o.Progress(rc)
		}
		if page.NextCursor == "" {
			return rc, nil
		}
		cursor = page.NextCursor
	}
}

// reseal returns the write that moves v under the current key, or false
// when v needs none (counted in rc).
func (e *Engine) reseal(ctx context.Context, kc codec.Keyed, kind codec.Kind, v persistence.SealedValue, rc *RotateColumn) (persistence.SealedWrite, bool, error) {
	id, sealed := kc.KeyOf(v.Value)
	switch {
	case !sealed:
		rc.Clear++
		return persistence.SealedWrite{}, false, nil
	case id == kc.CurrentKey():
		rc.Current++
		return persistence.SealedWrite{}, false, nil
	}
	plain, err := kc.Decode(ctx, kind, v.Value)
	if err != nil {
		return persistence.SealedWrite{}, false, fmt.Errorf("row %s: %w", strings.Join(v.Key, "/"), err)
	}
	out, err := kc.Encode(ctx, kind, plain)
	if err != nil {
		return persistence.SealedWrite{}, false, fmt.Errorf("row %s: encoding: %w", strings.Join(v.Key, "/"), err)
	}
	return persistence.SealedWrite{Key: v.Key, Old: v.Value, New: out}, true, nil
}

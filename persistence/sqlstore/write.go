package sqlstore

import (
	"database/sql"
	"math"
	"slices"
	"strings"
)

// Writing a batch's changed step rows back: rows changed alike share one
// UPDATE.

// stepWriteCols are the step_runs columns a batch writes back but output
// (written last), in the order of stepWriteArgs.
var stepWriteCols = []string{"status", "attempt", "pending_deps", "fence", "lease_expires_at", "next_attempt_at",
	"error", "queued_at", "started_at", "finished_at", "updated_at", "worker", "claimed_at"}

// writeSteps returns the statements that write the changed rows (all of
// them locked by the transaction, so all of them exist) back; changed
// holds each row as it was read.
//
// Rows whose changes are the same (the same columns of stepWriteCols set
// to the same values; their outputs may differ) share one UPDATE that
// names them by key and sets just those columns, with a CASE for outputs
// that differ. A batch's completions and the dependents it claims or
// queues mostly do, as it writes them at one instant. Each of the others
// is one row of a multi-row upsert. On MySQL the UPDATE costs the server
// far less per row than the upsert, which parses and converts every
// column of every row, first tries to insert it, then finds and updates
// the existing one.
func (s *Store) writeSteps(byKey map[stepKey]*stepRow, changed map[stepKey]stepWas) []stmt {
	keys := make([]stepKey, 0, len(changed))
	for k := range changed {
		keys = append(keys, k)
	}
	sortKeys(keys)
	groups := make(map[stepChange][]stepKey, 4)
	var order []stepChange
	for _, k := range keys {
		r, was := byKey[k], changed[k]
		c := changeOf(was, setOf(r), string(was.output) != string(r.Output))
		if c.mask == 0 && !c.output {
			continue // changed back, or not at all
		}
		if _, ok := groups[c]; !ok {
			order = append(order, c)
		}
		groups[c] = append(groups[c], k)
	}
	var out []stmt
	var single []stepKey
	for _, c := range order {
		g := groups[c]
		if len(g) == 1 {
			single = append(single, g[0])
			continue
		}
		out = append(out, s.groupUpdates(byKey, c, g)...)
	}
	if len(single) == 0 {
		return out
	}
	// The columns the upsert only inserts, then those it writes back.
	written := append(slices.Clone(stepWriteCols), "output")
	cols := append([]string{"run_id", "step", "seq", "workflow", "queue", "deps", "dependents", "max_attempts", "comp_attempt"},
		written...)
	rows := make([][]any, len(single))
	for i, k := range single { // in key order, as keys were
		r := byKey[k]
		rows[i] = append([]any{r.RunID, r.Step, r.Seq, r.Workflow, r.Queue, r.Deps, r.Dependents,
			r.MaxAttempts, r.CompAttempt}, s.stepWriteArgs(r)...)
		rows[i] = append(rows[i], nullBytes(r.Output))
	}
	return append(out, valuesStmts(`INSERT INTO step_runs (`+strings.Join(cols, ", ")+`) VALUES `,
		"("+in(len(cols))+")",
		s.d.Upsert([]string{"run_id", "step"}, written), rows)...)
}

// groupUpdates returns the UPDATEs that make change c to the rows of keys,
// split to stay within maxGroupRows and maxStmtBytes each.
func (s *Store) groupUpdates(byKey map[stepKey]*stepRow, c stepChange, keys []stepKey) []stmt {
	var head strings.Builder
	head.WriteString("UPDATE step_runs")
	head.WriteString(s.d.ByPrimaryKey)
	head.WriteString(" SET ")
	var set []any
	for i, v := range s.stepWriteArgs(byKey[keys[0]]) {
		if c.mask&(1<<i) != 0 {
			if len(set) > 0 {
				head.WriteString(", ")
			}
			head.WriteString(stepWriteCols[i])
			head.WriteString(" = ?")
			set = append(set, v)
		}
	}
	if c.output {
		if len(set) > 0 {
			head.WriteString(", ")
		}
		head.WriteString("output = ")
	}
	var out []stmt
	for len(keys) > 0 {
		// As many rows as fit; but outputs that differ go in a CASE,
		// which costs the server time quadratic in its length, so at
		// most maxCaseRows rows unless they all have one output.
		n, size, same := 0, 0, true
		first := byKey[keys[0]].Output
		for n < len(keys) && n < maxGroupRows {
			if c.output {
				o := byKey[keys[n]].Output
				if n > 0 && size+len(o) > maxStmtBytes {
					break
				}
				if n >= maxCaseRows && (!same || string(o) != string(first)) {
					break
				}
				size += len(o)
				same = same && string(o) == string(first)
			}
			n++
		}
		part := keys[:n]
		keys = keys[n:]
		var b strings.Builder
		args := make([]any, 0, len(set)+5*len(part))
		args = append(args, set...)
		b.WriteString(head.String())
		switch {
		case !c.output:
		case same:
			b.WriteString("?")
			args = append(args, nullBytes(first))
		default:
			b.WriteString("CASE")
			for _, k := range part {
				b.WriteString(" WHEN run_id = ? AND step = ? THEN ?")
				args = append(args, k.run, k.step, nullBytes(byKey[k].Output))
			}
			b.WriteString(" END")
		}
		b.WriteString(" WHERE ")
		b.WriteString(s.keyIn(len(part)))
		out = append(out, stmt{b.String(), append(args, pairArgs(part)...)})
	}
	return out
}

// maxGroupRows bounds the rows one grouped UPDATE names, and maxCaseRows
// those of one whose outputs differ.
const (
	maxGroupRows = 1000
	maxCaseRows  = 64
)

// stepWriteArgs returns r's values of stepWriteCols, in order.
func (s *Store) stepWriteArgs(r *stepRow) []any {
	return []any{r.Status, r.Attempt, r.PendingDeps, r.Fence, s.nt(r.LeaseExpiresAt), s.nt(r.NextAttemptAt),
		nullStringNS(r.Error.String, r.Error.Valid), s.nt(r.QueuedAt), s.nt(r.StartedAt),
		s.nt(r.FinishedAt), s.t(r.UpdatedAt.T), r.Worker, s.nt(r.ClaimedAt)}
}

// stepSet is a step row's values of stepWriteCols, comparable.
type stepSet struct {
	status                                          string
	attempt, pendingDeps                            int
	fence, worker                                   string
	err                                             sql.NullString
	lease, next, queued, started, finished, claimed int64 // Unix µs, noTime for NULL
	updated                                         int64
}

const noTime = math.MinInt64

func micros(t nullTime) int64 {
	if !t.Valid {
		return noTime
	}
	return t.T.UnixMicro()
}

func setOf(r *stepRow) stepSet {
	return stepSet{
		status: r.Status, attempt: r.Attempt, pendingDeps: r.PendingDeps,
		fence: r.Fence, worker: r.Worker, err: r.Error,
		lease: micros(r.LeaseExpiresAt), next: micros(r.NextAttemptAt), queued: micros(r.QueuedAt),
		started: micros(r.StartedAt), finished: micros(r.FinishedAt), claimed: micros(r.ClaimedAt),
		updated: r.UpdatedAt.T.UnixMicro(),
	}
}

// stepWas is a changed step row as the transaction read it.
type stepWas struct {
	stepSet
	output []byte
}

// stepChange is what a batch does to a step row, as a map key: which of
// stepWriteCols it sets (mask, bit i for stepWriteCols[i]) and to what
// (v; the columns it leaves are zero there), and whether it sets output.
type stepChange struct {
	mask   uint16
	output bool
	v      stepSet
}

// changeOf returns the change that turns was into now.
func changeOf(was stepWas, now stepSet, output bool) stepChange {
	c := stepChange{output: output}
	o := was.stepSet
	setIf(&c, 0, &c.v.status, o.status, now.status)
	setIf(&c, 1, &c.v.attempt, o.attempt, now.attempt)
	setIf(&c, 2, &c.v.pendingDeps, o.pendingDeps, now.pendingDeps)
	setIf(&c, 3, &c.v.fence, o.fence, now.fence)
	setIf(&c, 4, &c.v.lease, o.lease, now.lease)
	setIf(&c, 5, &c.v.next, o.next, now.next)
	setIf(&c, 6, &c.v.err, o.err, now.err)
	setIf(&c, 7, &c.v.queued, o.queued, now.queued)
	setIf(&c, 8, &c.v.started, o.started, now.started)
	setIf(&c, 9, &c.v.finished, o.finished, now.finished)
	setIf(&c, 10, &c.v.updated, o.updated, now.updated)
	setIf(&c, 11, &c.v.worker, o.worker, now.worker)
	setIf(&c, 12, &c.v.claimed, o.claimed, now.claimed)
	return c
}

// setIf records in c that column i (of stepWriteCols) changes from was to
// now, if it does.
func setIf[T comparable](c *stepChange, i int, dst *T, was, now T) {
	if was != now {
		c.mask |= 1 << i
		*dst = now
	}
}

func (s *Store) nt(t nullTime) any {
	if !t.Valid {
		return nil
	}
	return s.t(t.T)
}

func nullStringNS(v string, valid bool) any {
	if !valid {
		return nil
	}
	return v
}

package sqlstore

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// A step row holds the forward attempt that ended it: a succeeded or
// skipped step whose claimed_at is set has no attempt row for its last
// attempt; its attempt, worker, claimed_at (start) and finished_at are
// that attempt. It is the common case, and writing no row for it saves
// one of the four or so row writes a step costs. AttemptList shows such
// an attempt from the step row, and a transition that moves the step on
// (to compensating, say) writes the row first (recordHeld), so nothing
// of the history is lost. Rows of steps completed before this (whose
// attempt row was written too) are told apart by their (step, attempt,
// outcome, finished_at), which the attempt row repeats.

// The history: attempts a step row holds, attempt rows written when an
// attempt ends, and AttemptList, which reads both.

// doneOutcome is the outcome of the forward attempt that left a step
// succeeded or skipped.
func doneOutcome(st persistence.StepStatus) persistence.AttemptOutcome {
	if st == persistence.StepSkipped {
		return persistence.OutcomeSkipped
	}
	return persistence.OutcomeSucceeded
}

// heldAttempt returns the attempt that step row r holds, if it holds one.
func heldAttempt(r *stepRow) (persistence.Attempt, bool) {
	st := persistence.StepStatus(r.Status)
	if !st.Done() || !r.ClaimedAt.Valid || r.Attempt < 1 || !r.FinishedAt.Valid {
		return persistence.Attempt{}, false
	}
	fin := r.FinishedAt.T
	return persistence.Attempt{
		ID: -int64(r.Seq) - 1, RunID: r.RunID, Step: r.Step, Kind: persistence.AttemptForward, Attempt: r.Attempt,
		Worker: r.Worker, Outcome: doneOutcome(st), StartedAt: r.ClaimedAt.T, FinishedAt: &fin,
	}, true
}

// heldKey identifies an ended forward attempt among a run's attempts.
type heldKey struct {
	step    string
	attempt int
	outcome persistence.AttemptOutcome
	at      int64 // finished_at, Unix microseconds
}

func heldKeyOf(a persistence.Attempt) heldKey {
	var at int64
	if a.FinishedAt != nil {
		at = a.FinishedAt.UnixMicro()
	}
	return heldKey{a.Step, a.Attempt, a.Outcome, at}
}

// endedAttempt is a forward attempt to record in step_attempts: one that
// ended, or (an aborted one) that is left as it was.
type endedAttempt struct {
	stepKey
	attempt  int
	worker   string
	fence    string
	outcome  persistence.AttemptOutcome
	msg      string
	started  time.Time
	finished *time.Time
}

// attemptEnd describes the forward attempt that r (as locked, before this
// transaction changed it) holds, ending now with outcome.
func attemptEnd(r *stepRow, outcome persistence.AttemptOutcome, msg string, now time.Time) endedAttempt {
	return endedAttempt{
		stepKey: stepKey{r.RunID, r.Step}, attempt: r.Attempt, worker: r.Worker, fence: r.Fence,
		outcome: outcome, msg: msg, started: r.ClaimedAt.T, finished: &now,
	}
}

// recordEnded writes the rows of ended forward attempts.
func (s *Store) recordEnded(ctx context.Context, q querier, ended []endedAttempt) error {
	return s.execAll(ctx, q, s.endedStmts(ended)...)
}

// endedStmts returns the statement that records ended forward attempts:
// one INSERT for all of them. (Attempts in progress are on their step
// rows, in every database: the migration after the one that put them
// there moved older ones off their 'running' rows.)
func (s *Store) endedStmts(ended []endedAttempt) []stmt {
	var rows [][]any
	for _, e := range ended {
		rows = append(rows, []any{e.run, e.step, string(persistence.AttemptForward), e.attempt, e.worker, e.fence,
			string(e.outcome), nullString(e.msg), s.t(norm(e.started)), s.tp(e.finished)})
	}
	return valuesStmts(`INSERT INTO step_attempts (run_id, step, kind, attempt, worker, fence, outcome, error, started_at, finished_at) VALUES `,
		"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", "", rows)
}

// recordHeld writes the rows of the ended attempts that step rows (of one
// run, locked by the transaction) hold, skipping those whose row exists
// (steps completed before step rows held their attempts).
func (s *Store) recordHeld(ctx context.Context, q querier, runID string, rows []stepRow) error {
	var held []persistence.Attempt
	for i := range rows {
		if a, ok := heldAttempt(&rows[i]); ok {
			held = append(held, a)
		}
	}
	if len(held) == 0 {
		return nil
	}
	var recorded []attemptRow
	if err := s.selectAll(ctx, q, &recorded, `SELECT `+attemptCols+` FROM step_attempts WHERE run_id = ? AND kind = ? AND outcome IN (?, ?)`,
		runID, string(persistence.AttemptForward), string(persistence.OutcomeSucceeded), string(persistence.OutcomeSkipped)); err != nil {
		return err
	}
	seen := make(map[heldKey]bool, len(recorded))
	for _, r := range recorded {
		seen[heldKeyOf(r.record())] = true
	}
	var vals [][]any
	for _, a := range held {
		if seen[heldKeyOf(a)] {
			continue
		}
		vals = append(vals, []any{a.RunID, a.Step, string(a.Kind), a.Attempt, a.Worker, "",
			string(a.Outcome), nil, s.t(a.StartedAt), s.tp(a.FinishedAt)})
	}
	return s.execAll(ctx, q, valuesStmts(`INSERT INTO step_attempts (run_id, step, kind, attempt, worker, fence, outcome, error, started_at, finished_at) VALUES `,
		"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", "", vals)...)
}

// finishAttempt ends a compensation attempt (whose row its claim
// inserted).
func (s *Store) finishAttempt(ctx context.Context, q querier, runID, step, fence string, outcome persistence.AttemptOutcome, msg string, now time.Time) error {
	_, err := s.exec(ctx, q, `UPDATE step_attempts SET outcome = ?, error = ?, finished_at = ?
		WHERE run_id = ? AND step = ? AND fence = ? AND outcome = ?`,
		string(outcome), nullString(msg), s.t(now), runID, step, fence, string(persistence.OutcomeRunning))
	return err
}

// historyAttemptRow is an attempt row as AttemptList reads it.
type historyAttemptRow struct {
	attemptRow
	Fence string `db:"fence"`
}

// historyRows reads a run's history: its step rows (only the columns an
// attempt needs, not the outputs), then its attempt rows in the order
// they were written. Forward attempts in progress, and the ended ones that
// step rows hold (see heldAttempt), come from the step rows. The steps are
// read first: an attempt that ends, or whose row is written, before the
// attempt rows are read then shows once, not twice and never not at all.
func (s *Store) historyRows(ctx context.Context, runID string) ([]stepRow, []historyAttemptRow, error) {
	var cols []struct {
		Step       string   `db:"step"`
		Seq        int      `db:"seq"`
		Status     string   `db:"status"`
		Attempt    int      `db:"attempt"`
		Worker     string   `db:"worker"`
		Fence      string   `db:"fence"`
		ClaimedAt  nullTime `db:"claimed_at"`
		FinishedAt nullTime `db:"finished_at"`
	}
	if err := s.selectAll(ctx, s.db, &cols, `SELECT step, seq, status, attempt, worker, fence, claimed_at, finished_at
		FROM step_runs WHERE run_id = ?`, runID); err != nil {
		return nil, nil, err
	}
	steps := make([]stepRow, len(cols))
	for i, c := range cols {
		steps[i] = stepRow{RunID: runID, Step: c.Step, Seq: c.Seq, Status: c.Status, Attempt: c.Attempt,
			Worker: c.Worker, Fence: c.Fence, ClaimedAt: c.ClaimedAt, FinishedAt: c.FinishedAt}
	}
	var rows []historyAttemptRow
	if err := s.selectAll(ctx, s.db, &rows, `SELECT `+attemptCols+`, fence FROM step_attempts WHERE run_id = ? ORDER BY id`, runID); err != nil {
		return nil, nil, err
	}
	return steps, rows, nil
}

// AttemptList implements persistence.Store.
func (s *Store) AttemptList(ctx context.Context, runID string) ([]persistence.Attempt, error) {
	if runRef(runID) != nil {
		return nil, nil
	}
	steps, rows, err := s.historyRows(ctx, runID)
	if err != nil {
		return nil, wrap("attempt list", err)
	}
	// The recorded attempts, in the order of their rows; then those the
	// step rows hold that no row repeats (a step succeeded before step
	// rows held their attempts has a row too), and those in progress
	// whose row was not written meanwhile.
	type fenced struct{ step, fence string }
	recorded := make(map[fenced]bool, len(rows))
	ended := make(map[heldKey]bool, len(rows))
	out := make([]persistence.Attempt, 0, len(rows)+len(steps))
	for _, r := range rows {
		a := r.record()
		if a.Kind == persistence.AttemptForward {
			recorded[fenced{r.Step, r.Fence}] = true
			if (a.Outcome == persistence.OutcomeSucceeded || a.Outcome == persistence.OutcomeSkipped) && a.FinishedAt != nil {
				ended[heldKeyOf(a)] = true
			}
		}
		out = append(out, a)
	}
	seq := make(map[string]int, len(steps))
	for i := range steps {
		r := &steps[i]
		seq[r.Step] = r.Seq
		switch a, held := heldAttempt(r); {
		case r.Status == string(persistence.StepRunning) && r.ClaimedAt.Valid && !recorded[fenced{r.Step, r.Fence}]:
			out = append(out, persistence.Attempt{
				RunID: runID, Step: r.Step, Kind: persistence.AttemptForward, Attempt: r.Attempt, Worker: r.Worker,
				Outcome: persistence.OutcomeRunning, StartedAt: r.ClaimedAt.T,
			})
		case held && !ended[heldKeyOf(a)]:
			out = append(out, a)
		}
	}
	// The order a person reads a run's history in: by step in plan order,
	// a step's forward attempts by number, then its compensation attempts
	// by number. Attempts that share all three (none the engine makes)
	// go by start. Row ids order nothing: TiDB hands AUTO_INCREMENT ids
	// out in ranges cached per server, so a later row may get a smaller
	// one.
	step := func(name string) int {
		if n, ok := seq[name]; ok {
			return n
		}
		return math.MaxInt // a step the run no longer has, after the others
	}
	slices.SortStableFunc(out, func(a, b persistence.Attempt) int {
		return cmp.Or(cmp.Compare(step(a.Step), step(b.Step)), strings.Compare(a.Step, b.Step),
			cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)), cmp.Compare(a.Attempt, b.Attempt), a.StartedAt.Compare(b.StartedAt))
	})
	return out, nil
}

// kindRank orders a step's attempts: the forward ones, then its
// compensation's.
func kindRank(k persistence.AttemptKind) int {
	if k == persistence.AttemptCompensation {
		return 1
	}
	return 0
}

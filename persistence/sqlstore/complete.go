package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Group commit. A worker that dequeued a batch of tasks claims them in one
// transaction, and completions from many workers are recorded in one
// transaction, so that the commit (an fsync on MySQL) and the round trips
// are paid once per batch instead of once per step. The single-step
// StepClaim and StepComplete are the one-item case of the same code.
//
// Locking: claims lock the step rows they take; completions lock their
// runs' rows, then every step row of those runs. Rows are always locked in
// primary-key order (runs by id, steps by run_id, step), so batches that
// overlap wait for each other instead of deadlocking; a deadlock victim is
// retried by write().

// StepCompleteMany implements persistence.Store.
func (s *Store) StepCompleteMany(ctx context.Context, mp persistence.StepCompleteManyParams) ([]persistence.StepCompleteOutcome, error) {
	ps, rc := mp.Items, mp.ClaimReleased
	if rc != nil {
		if err := validToken("fence", rc.Fence, MaxFenceLen); err != nil {
			return nil, err
		}
		if err := validNodeToken("worker", rc.Worker, MaxWorkerLen); err != nil {
			return nil, err
		}
	}
	if len(ps) > maxBatch {
		return nil, fmt.Errorf("sqlstore: step complete: %d items, over the batch limit of %d", len(ps), maxBatch)
	}
	var out []persistence.StepCompleteOutcome
	err := s.write(ctx, func(q querier) error {
		var err error
		out, err = s.completeIn(ctx, q, ps, rc)
		return err
	})
	if err != nil {
		return nil, wrap("step complete", err)
	}
	return out, nil
}

// completeIn records completions in the transaction q: StepCompleteMany's
// work, which resolving parked steps (an event's waiters) shares.
func (s *Store) completeIn(ctx context.Context, q querier, ps []persistence.StepCompleteParams, rc *persistence.ReleaseClaim) ([]persistence.StepCompleteOutcome, error) {
	pre, runIDs := s.checkCompletions(ps)
	out := make([]persistence.StepCompleteOutcome, len(ps))
	for i := range out {
		out[i] = persistence.StepCompleteOutcome{Err: pre[i]}
	}
	if len(runIDs) == 0 {
		return out, nil
	}
	b, err := s.lockForCompletion(ctx, q, runIDs, rc != nil)
	if err != nil {
		return nil, err
	}
	b.budget = newClaimBudget(rc)
	now := b.instant(ps, out)
	for i, p := range ps {
		if out[i].Err == nil {
			out[i].Result, out[i].Err = b.complete(i, p, now)
		}
	}
	if len(b.changed) == 0 {
		return out, nil
	}
	finished := b.finishRuns(out)
	if err := s.claimedResults(ctx, q, b, out, rc); err != nil {
		return nil, err
	}
	// The writes, with the COMMIT in one round trip on MySQL.
	writes := s.writeSteps(b.byKey, b.changed)
	if len(b.unparked) > 0 {
		// The waits of the parked steps resolved: a row per parked step,
		// and only while it is parked.
		writes = append(writes, stmt{`DELETE FROM step_waits WHERE ` + s.keyIn(len(b.unparked)), pairArgs(b.unparked)})
	}
	if len(finished) > 0 {
		slices.Sort(finished)
		args := append([]any{string(persistence.RunSucceeded), s.t(now), s.t(now), string(persistence.RunRunning)}, anys(finished)...)
		writes = append(writes, stmt{`UPDATE workflow_runs SET status = ?, finished_at = ?, updated_at = ?
			WHERE status = ? AND id IN (` + in(len(finished)) + `)`, args})
	}
	return out, s.execLater(ctx, q, writes...)
}

// checkCompletions returns the error of each completion that cannot be
// recorded whatever the store holds (a compensation, a bad reference or
// output), and the runs of the others, sorted.
func (s *Store) checkCompletions(ps []persistence.StepCompleteParams) ([]error, []string) {
	pre := make([]error, len(ps))
	var runIDs []string
	for i, p := range ps {
		switch {
		case p.Compensation:
			pre[i] = fmt.Errorf("sqlstore: step complete: run %s step %q: a compensation cannot be completed in a batch", p.RunID, p.Step)
		default:
			if err := stepRef(p.RunID, p.Step); err != nil {
				pre[i] = err
			} else if err := s.validJSON(fmt.Sprintf("step %q output", p.Step), p.Output); err != nil {
				pre[i] = err
			}
		}
		if pre[i] == nil {
			runIDs = append(runIDs, p.RunID)
		}
	}
	slices.Sort(runIDs)
	return pre, slices.Compact(runIDs)
}

// completionBatch is a completion transaction's view of its runs: every
// step row of them, locked, and what the batch changes.
type completionBatch struct {
	// byKey holds every step row of the runs; only the rows a completion
	// may change (running and waiting ones) come with their output, and,
	// when steps may be claimed, the small ones (lockedSizedCols).
	byKey     map[stepKey]*stepRow
	byRun     map[string][]*stepRow
	runs      map[string]runRow // with every column when steps may be claimed
	runStatus map[string]string
	budget    *claimBudget
	// changed holds the rows this batch changes, as they were read.
	changed   map[stepKey]stepWas
	lastOfRun map[string]int // the last item of each run
	claims    []releaseClaimed
	unparked  []stepKey // parked steps resolved: their waits go
}

// releaseClaimed is a step claimed at release, for item's answer.
type releaseClaimed struct {
	item int
	key  stepKey
}

// lockedStepCols are stepCols with the output of only the rows that a
// completion may change: the others' outputs (a fan-in's hundreds of
// them) stay in the database.
var lockedStepCols = strings.Replace(stepCols, " output,", " CASE WHEN status IN ('"+string(persistence.StepRunning)+"', '"+
	string(persistence.StepWaiting)+"') THEN output END AS output,", 1)

// lockedSizedCols are lockedStepCols for a batch that may claim released
// steps: small outputs (inlineOutput) come too, and every output's size
// (output_size), so that what a claimed step reads is measured, and
// mostly loaded, by the one query that locks the rows.
var lockedSizedCols = strings.Replace(stepCols, " output,", fmt.Sprintf(" CASE WHEN status IN ('%s', '%s') OR LENGTH(output) <= %d THEN output END AS output,",
	persistence.StepRunning, persistence.StepWaiting, inlineOutput), 1) + ", COALESCE(LENGTH(output), 0) AS output_size"

// lockForCompletion reads the runs, then every step of them, locked in
// that order, in one round trip on MySQL; with wholeRuns, also the size
// of each step's output (and the small ones: lockedSizedCols).
func (s *Store) lockForCompletion(ctx context.Context, q querier, runIDs []string, wholeRuns bool) (*completionBatch, error) {
	var locked []runRow
	cols, stepCols := "id, status, paused_at, parent_run_id", lockedStepCols
	if wholeRuns {
		cols = runCols // a claimed step needs its run's input
		stepCols = lockedSizedCols
	}
	// Sized for runs of four steps (the slice grows for more): stepRow is
	// large, and a batch reads hundreds.
	rows := make([]stepRow, 0, 4*len(runIDs))
	sets := []rowSet{
		{&locked, `SELECT ` + cols + ` FROM workflow_runs WHERE id IN (` + in(len(runIDs)) +
			`) ORDER BY id` + s.d.ForUpdate, anys(runIDs)},
		{&rows, `SELECT ` + stepCols + ` FROM step_runs WHERE run_id IN (` + in(len(runIDs)) +
			`) ORDER BY run_id, step` + s.d.ForUpdate, anys(runIDs)},
	}
	if err := s.selectSets(ctx, q, sets...); err != nil {
		return nil, err
	}
	b := &completionBatch{
		byKey: make(map[stepKey]*stepRow, len(rows)), byRun: map[string][]*stepRow{},
		runs: make(map[string]runRow, len(locked)), runStatus: make(map[string]string, len(locked)),
		changed: map[stepKey]stepWas{}, lastOfRun: map[string]int{},
	}
	for _, r := range locked {
		b.runStatus[r.ID] = r.Status
		b.runs[r.ID] = r
	}
	for i := range rows {
		r := &rows[i]
		b.byKey[stepKey{r.RunID, r.Step}] = r
		b.byRun[r.RunID] = append(b.byRun[r.RunID], r)
	}
	return b, nil
}

// holds reports whether p's fence holds r's attempt or, for a
// resolution (p.Parked), whether r is parked: the one test of who may
// complete a step.
func holds(p persistence.StepCompleteParams, r *stepRow) bool {
	if p.Parked {
		return r.Status == string(persistence.StepParked)
	}
	return p.Fence != "" && r.Fence == p.Fence && r.Status == string(persistence.StepRunning)
}

// instant is when the batch writes: the latest of its valid items' Now,
// so that the rows it writes alike share a statement (writeSteps).
func (b *completionBatch) instant(ps []persistence.StepCompleteParams, out []persistence.StepCompleteOutcome) time.Time {
	var now time.Time
	for i, p := range ps {
		if r := b.byKey[stepKey{p.RunID, p.Step}]; out[i].Err == nil && r != nil && holds(p, r) {
			if n := norm(p.Now); n.After(now) {
				now = n
			}
		}
	}
	return now
}

// touch notes that the batch changes r, keeping it as it was read.
func (b *completionBatch) touch(k stepKey, r *stepRow) {
	if _, ok := b.changed[k]; !ok {
		b.changed[k] = stepWas{setOf(r), r.Output}
	}
}

// complete records item i's success or skip on its row and releases the
// dependents it was the last dependency of.
func (b *completionBatch) complete(i int, p persistence.StepCompleteParams, now time.Time) (persistence.StepCompleteResult, error) {
	k := stepKey{p.RunID, p.Step}
	r := b.byKey[k]
	if r == nil {
		return persistence.StepCompleteResult{}, fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, p.RunID, p.Step)
	}
	if !holds(p, r) {
		return persistence.StepCompleteResult{}, fmt.Errorf("%w: run %s step %q", persistence.ErrFenceMismatch, p.RunID, p.Step)
	}
	status := persistence.StepSucceeded
	if p.Skipped {
		status = persistence.StepSkipped
	}
	// The step row keeps the ended attempt (number, worker, claimed_at,
	// finished_at) and no attempt row is written: see heldAttempt.
	b.touch(k, r)
	if p.Parked {
		b.unparked = append(b.unparked, k)
	}
	r.Status = string(status)
	r.Output = nonEmpty(p.Output)
	r.Error.String, r.Error.Valid = "", false
	r.Fence, r.LeaseExpiresAt, r.NextAttemptAt = "", nullTime{}, nullTime{}
	r.FinishedAt = nullTime{T: now, Valid: true}
	r.UpdatedAt = dbTime{now}
	res := persistence.StepCompleteResult{Step: r.record()}
	res.Ready = b.releaseDependents(i, r, now)
	b.lastOfRun[p.RunID] = i
	return res, nil
}

// releaseDependents counts r's completion in each waiting dependent; the
// ones it was the last dependency of are queued (returned, by name) or,
// within the budget and in a running run that is not paused, claimed for
// the caller.
func (b *completionBatch) releaseDependents(i int, r *stepRow, now time.Time) []persistence.StepRun {
	var ready []persistence.StepRun
	for _, dn := range splitNames(r.Dependents) {
		dk := stepKey{r.RunID, dn}
		d := b.byKey[dk]
		if d == nil || d.Status != string(persistence.StepWaiting) {
			continue // cancelled, or queued by other means
		}
		b.touch(dk, d)
		d.UpdatedAt = dbTime{now}
		if d.PendingDeps > 1 {
			d.PendingDeps--
			continue
		}
		d.PendingDeps = 0
		d.Status = string(persistence.StepQueued)
		d.QueuedAt = nullTime{T: now, Valid: true}
		if b.runStatus[r.RunID] == string(persistence.RunRunning) && !b.runs[r.RunID].PausedAt.Valid &&
			b.budget.take(d.Workflow, d.Step, d.Queue) {
			claimRow(d, b.budget.fence, b.budget.worker, b.budget.lease, now)
			b.claims = append(b.claims, releaseClaimed{i, dk})
			continue
		}
		ready = append(ready, d.record())
	}
	slices.SortFunc(ready, func(a, b persistence.StepRun) int { return strings.Compare(a.Step, b.Step) })
	return ready
}

// finishRuns moves the runs whose every step is now succeeded or skipped
// to succeeded (returning them) and gives each item its run's status.
func (b *completionBatch) finishRuns(out []persistence.StepCompleteOutcome) []string {
	var finished []string
	for runID, i := range b.lastOfRun {
		if b.runStatus[runID] != string(persistence.RunRunning) {
			continue
		}
		done := true
		for _, r := range b.byRun[runID] {
			if r.Status != string(persistence.StepSucceeded) && r.Status != string(persistence.StepSkipped) {
				done = false
				break
			}
		}
		if done {
			finished = append(finished, runID)
			b.runStatus[runID] = string(persistence.RunSucceeded)
			out[i].Result.RunFinished = true
			out[i].Result.RunParentID = b.runs[runID].ParentRunID
		}
	}
	for i := range out {
		if out[i].Err == nil {
			out[i].Result.RunStatus = persistence.RunStatus(b.runStatus[out[i].Result.Step.RunID])
		}
	}
	return finished
}

// claimedResults gives each item the steps claimed at its release, with
// their runs and what they may read (fillReads, within rc.MaxRead). An
// output this batch wrote is taken from its row; the others are loaded.
func (s *Store) claimedResults(ctx context.Context, q querier, b *completionBatch, out []persistence.StepCompleteOutcome, rc *persistence.ReleaseClaim) error {
	look := func(k stepKey) (readable, bool) {
		r := b.byKey[k]
		if r == nil {
			return readable{}, false
		}
		size := r.OutputSize
		if _, ok := b.changed[k]; ok {
			size = int64(len(r.Output))
		}
		return readable{deps: r.Deps, status: r.Status, size: size}, true
	}
	type want struct{ item, claim int }
	wants := map[stepKey][]want{}
	var load []stepKey
	for _, c := range b.claims {
		run, err := b.runs[c.key.run].record()
		if err != nil {
			return err
		}
		res := persistence.StepClaimResult{Step: b.byKey[c.key].record(), Run: run}
		for _, n := range fillReads(&res, c.key, true, nil, rc.MaxRead, look) {
			k := stepKey{c.key.run, n}
			if r := b.byKey[k]; r.Output != nil {
				// Written by this batch, or small enough to come with
				// the lock.
				putOutput(&res, n, r.Output)
				continue
			}
			if _, ok := wants[k]; !ok {
				load = append(load, k)
			}
			wants[k] = append(wants[k], want{c.item, len(out[c.item].Result.Claimed)})
		}
		out[c.item].Result.Claimed = append(out[c.item].Result.Claimed, res)
	}
	return s.loadOutputs(ctx, q, load, func(k stepKey, output []byte) {
		for _, w := range wants[k] {
			putOutput(&out[w.item].Result.Claimed[w.claim], k.step, output)
		}
	})
}

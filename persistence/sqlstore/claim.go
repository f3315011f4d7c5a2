package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Claims: a batch of forward tasks in one transaction (StepClaimMany, and
// StepClaim's forward case), and a compensation claim.

// claimItem is one step to claim; deps asks for the outputs of the step's
// dependencies, outputs for those of named steps.
type claimItem struct {
	stepKey
	deps    bool
	outputs []string
}

// StepClaimMany implements persistence.Store.
func (s *Store) StepClaimMany(ctx context.Context, p persistence.StepClaimManyParams) ([]persistence.StepClaimOutcome, error) {
	if len(p.Items) > maxBatch {
		return nil, fmt.Errorf("sqlstore: step claim: %d items, over the batch limit of %d", len(p.Items), maxBatch)
	}
	items := make([]claimItem, len(p.Items))
	for i, it := range p.Items {
		items[i] = claimItem{stepKey: stepKey{it.RunID, it.Step}, deps: true}
	}
	return s.claimMany(ctx, items, p.Fence, p.Worker, p.LeaseUntil, p.Now, p.Handles, p.MaxRead)
}

func (s *Store) claimMany(ctx context.Context, items []claimItem, fence, worker string, leaseUntil, now time.Time,
	handles persistence.Handles, maxRead int64) ([]persistence.StepClaimOutcome, error) {
	if err := validToken("fence", fence, MaxFenceLen); err != nil {
		return nil, err
	}
	if err := validNodeToken("worker", worker, MaxWorkerLen); err != nil {
		return nil, err
	}
	now, lease := norm(now), norm(leaseUntil)
	out := make([]persistence.StepClaimOutcome, len(items))
	pre := make([]error, len(items))
	var keys []stepKey
	for i, it := range items {
		if err := stepRef(it.run, it.step); err != nil {
			out[i].Err, pre[i] = err, err
			continue
		}
		keys = append(keys, it.stepKey)
	}
	if len(keys) == 0 {
		return out, nil
	}
	sortKeys(keys)
	keys = slices.Compact(keys)
	runIDs := make([]string, 0, len(keys))
	for _, k := range keys {
		runIDs = append(runIDs, k.run)
	}
	runIDs = slices.Compact(runIDs) // keys are sorted by run
	err := s.write(ctx, func(q querier) error {
		for i := range out {
			out[i] = persistence.StepClaimOutcome{Err: pre[i]}
		}
		byKey, runs, reads, err := s.lockForClaim(ctx, q, keys, runIDs)
		if err != nil {
			return err
		}
		claiming := refuseUnhandled(items, out, byKey, handles)
		if err := s.startDueRuns(ctx, q, runs, byKey, claiming, now); err != nil {
			return err
		}
		claimed, ended := claimItems(items, out, byKey, runs, fence, worker, lease, now)
		if len(claimed) == 0 {
			return nil
		}
		upd := stmt{s.claimUpdateSQL(len(claimed)), s.claimUpdateArgs(fence, worker, lease, now, claimed)}
		// The writes go with the next query on MySQL.
		if err := s.execLater(ctx, q, append([]stmt{upd}, s.endedStmts(ended)...)...); err != nil {
			return err
		}
		return s.claimReads(ctx, q, items, out, reads, maxRead)
	})
	if err != nil {
		return nil, wrap("step claim", err)
	}
	return out, nil
}

// lockForClaim reads the steps to claim, locked, their runs, and what
// every step of those runs offers to read (measured, not loaded), in one
// round trip on MySQL.
func (s *Store) lockForClaim(ctx context.Context, q querier, keys []stepKey, runIDs []string) (map[stepKey]*stepRow, map[string]persistence.Run, map[stepKey]readable, error) {
	var rows []stepRow
	var rr []runRow
	var all []readRow
	if err := s.selectSets(ctx, q,
		rowSet{&rows, s.claimSelectSQL(len(keys)), pairArgs(keys)},
		rowSet{&rr, `SELECT ` + runCols + ` FROM workflow_runs WHERE id IN (` + in(len(runIDs)) + `)`, anys(runIDs)},
		rowSet{&all, `SELECT ` + readCols + ` FROM step_runs WHERE run_id IN (` + in(len(runIDs)) + `)`, anys(runIDs)},
	); err != nil {
		return nil, nil, nil, err
	}
	byKey := make(map[stepKey]*stepRow, len(rows))
	for i := range rows {
		r := &rows[i]
		byKey[stepKey{r.RunID, r.Step}] = r
	}
	runs := make(map[string]persistence.Run, len(rr))
	for _, r := range rr {
		run, err := r.record()
		if err != nil {
			return nil, nil, nil, err
		}
		runs[run.ID] = run
	}
	return byKey, runs, readables(all), nil
}

// refuseUnhandled refuses the items whose steps handles rejects (before
// anything is written), and returns the runs of the items still to be
// decided.
func refuseUnhandled(items []claimItem, out []persistence.StepClaimOutcome, byKey map[stepKey]*stepRow,
	handles persistence.Handles) map[string]bool {
	claiming := make(map[string]bool, len(items))
	for i, it := range items {
		if out[i].Err != nil {
			continue
		}
		if r := byKey[it.stepKey]; r != nil {
			if e := unhandledRefusal(handles, r); e != nil {
				out[i].Err = e
				continue
			}
		}
		claiming[it.run] = true
	}
	return claiming
}

// claimItems decides each item's claim (forwardRefusal) and applies the
// claimed ones to their rows (claimRow); out gets each item's answer. It
// returns the claimed keys, and the attempts that a takeover ended.
func claimItems(items []claimItem, out []persistence.StepClaimOutcome, byKey map[stepKey]*stepRow, runs map[string]persistence.Run,
	fence, worker string, lease, now time.Time) ([]stepKey, []endedAttempt) {
	var claimed []stepKey
	var ended []endedAttempt
	taken := map[stepKey]bool{}
	for i, it := range items {
		if out[i].Err != nil {
			continue
		}
		r := byKey[it.stepKey]
		if r == nil {
			out[i].Err = fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, it.run, it.step)
			continue
		}
		run, ok := runs[it.run]
		if !ok {
			out[i].Err = fmt.Errorf("%w: run %s", persistence.ErrRunNotFound, it.run)
			continue
		}
		if taken[it.stepKey] {
			out[i].Err = &persistence.ClaimRefusedError{RunID: it.run, Step: it.step, Reason: persistence.RefusedDuplicate, Status: r.Status}
			continue
		}
		if refused := forwardRefusal(r, run, now); refused != nil {
			out[i].Err = refused
			continue
		}
		taken[it.stepKey] = true
		claimed = append(claimed, it.stepKey)
		if r.Status == string(persistence.StepRunning) {
			// A takeover: whoever held the attempt lost it (its lease
			// expired, or its node released it).
			ended = append(ended, attemptEnd(r, persistence.OutcomeLost, "", now))
		}
		claimRow(r, fence, worker, lease, now)
		out[i].Result = persistence.StepClaimResult{Step: r.record(), Run: run}
	}
	return claimed, ended
}

// claimReads gives each claimed item what its step may read (fillReads),
// then loads the outputs that fit within maxRead.
func (s *Store) claimReads(ctx context.Context, q querier, items []claimItem, out []persistence.StepClaimOutcome, reads map[stepKey]readable, maxRead int64) error {
	look := func(k stepKey) (readable, bool) { v, ok := reads[k]; return v, ok }
	wants := map[stepKey][]int{} // output -> the items that read it
	var load []stepKey
	for i, it := range items {
		if out[i].Err != nil {
			continue
		}
		for _, n := range fillReads(&out[i].Result, it.stepKey, it.deps, it.outputs, maxRead, look) {
			k := stepKey{it.run, n}
			if r := reads[k]; r.inline != nil {
				putOutput(&out[i].Result, n, r.inline)
				continue
			}
			if _, ok := wants[k]; !ok {
				load = append(load, k)
			}
			wants[k] = append(wants[k], i)
		}
	}
	return s.loadOutputs(ctx, q, load, func(k stepKey, output []byte) {
		for _, i := range wants[k] {
			putOutput(&out[i].Result, k.step, output)
		}
	})
}

// inlineOutput is the largest output the measuring query (readCols)
// brings along with its size. Outputs are usually small: reading them
// with the measurement saves the claim a round trip, while the memory a
// batch reads before it checks MaxRead stays bounded by the number of
// its rows times this. Larger outputs are loaded afterwards, only when
// they fit.
const inlineOutput = 4096

// readCols measure what a step offers to read, as readRow, with the
// output itself when it is at most inlineOutput bytes.
var readCols = fmt.Sprintf(`run_id, step, deps, status, COALESCE(LENGTH(output), 0) AS size, CASE WHEN LENGTH(output) <= %d THEN output END AS output`, inlineOutput)

// readRow is a row of readCols.
type readRow struct {
	RunID  string `db:"run_id"`
	Step   string `db:"step"`
	Deps   string `db:"deps"`
	Status string `db:"status"`
	Size   int64  `db:"size"`
	Output []byte `db:"output"`
}

// readColList are readCols' names.
var readColList = []string{"run_id", "step", "deps", "status", "size", "output"}

// scanReadRows appends the rows of a readCols query to dest, without
// reflection (a claim reads every step of its runs).
func scanReadRows(rows *sql.Rows, dest *[]readRow) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	if !slices.Equal(cols, readColList) {
		return fmt.Errorf("sqlstore: read rows must have the columns %s, not %s", strings.Join(readColList, ", "), strings.Join(cols, ", "))
	}
	for rows.Next() {
		*dest = append(*dest, readRow{})
		r := &(*dest)[len(*dest)-1]
		if err := rows.Scan(&r.RunID, &r.Step, &r.Deps, &r.Status, &r.Size, &r.Output); err != nil {
			*dest = (*dest)[:len(*dest)-1]
			return err
		}
	}
	return rows.Err()
}

func readables(rows []readRow) map[stepKey]readable {
	m := make(map[stepKey]readable, len(rows))
	for _, r := range rows {
		m[stepKey{r.RunID, r.Step}] = readable{r.Deps, r.Status, r.Size, r.Output}
	}
	return m
}

// loadOutputs reads the outputs of keys, by primary key, and gives each
// one that has an output to put.
func (s *Store) loadOutputs(ctx context.Context, q querier, keys []stepKey, put func(stepKey, []byte)) error {
	for len(keys) > 0 {
		n := min(len(keys), maxBatch)
		var rows []struct {
			RunID  string `db:"run_id"`
			Step   string `db:"step"`
			Output []byte `db:"output"`
		}
		if err := s.selectAll(ctx, q, &rows, `SELECT run_id, step, output FROM step_runs`+s.d.ByPrimaryKey+
			` WHERE `+s.keyIn(n), pairArgs(keys[:n])...); err != nil {
			return err
		}
		for _, r := range rows {
			put(stepKey{r.RunID, r.Step}, r.Output)
		}
		keys = keys[n:]
	}
	return nil
}

// claimSelectSQL reads and locks n steps by key, for pairArgs.
func (s *Store) claimSelectSQL(n int) string {
	return `SELECT ` + stepCols + ` FROM step_runs` + s.d.ByPrimaryKey + ` WHERE ` + s.keyIn(n) +
		` ORDER BY run_id, step` + s.d.ForUpdate
}

// claimUpdateSQL claims n steps by key, with claimUpdateArgs.
func (s *Store) claimUpdateSQL(n int) string {
	return `UPDATE step_runs` + s.d.ByPrimaryKey + ` SET status = ?, attempt = attempt + 1, fence = ?,
		lease_expires_at = ?, next_attempt_at = NULL, started_at = COALESCE(started_at, ?), updated_at = ?,
		worker = ?, claimed_at = ? WHERE ` + s.keyIn(n)
}

// claimUpdateArgs are claimUpdateSQL's arguments for claiming keys at now.
func (s *Store) claimUpdateArgs(fence, worker string, lease, now time.Time, keys []stepKey) []any {
	return append([]any{string(persistence.StepRunning), fence, s.t(lease), s.t(now), s.t(now), worker, s.t(now)},
		pairArgs(keys)...)
}

// StepClaim implements persistence.Store. A forward claim is the one-item
// case of StepClaimMany; a compensation claim is one conditional UPDATE
// (the claim), then the run, the step and the requested outputs, and the
// attempt row, in one transaction.
func (s *Store) StepClaim(ctx context.Context, p persistence.StepClaimParams) (persistence.StepClaimResult, error) {
	if err := stepRef(p.RunID, p.Step); err != nil {
		return persistence.StepClaimResult{}, err
	}
	p.WithOutputs = storableNames(p.WithOutputs)
	if err := validToken("fence", p.Fence, MaxFenceLen); err != nil {
		return persistence.StepClaimResult{}, err
	}
	if err := validNodeToken("worker", p.Worker, MaxWorkerLen); err != nil {
		return persistence.StepClaimResult{}, err
	}
	if !p.Compensation {
		outs, err := s.claimMany(ctx, []claimItem{{stepKey: stepKey{p.RunID, p.Step}, outputs: p.WithOutputs}},
			p.Fence, p.Worker, p.LeaseUntil, p.Now, p.Handles, p.MaxRead)
		if err != nil {
			return persistence.StepClaimResult{}, err
		}
		return outs[0].Result, wrap("step claim", outs[0].Err)
	}
	return s.compensationClaim(ctx, p)
}

// compensationClaim is StepClaim for a compensation: one conditional
// UPDATE (the claim), then the run, the step and the requested outputs,
// and the attempt row, in one transaction.
func (s *Store) compensationClaim(ctx context.Context, p persistence.StepClaimParams) (persistence.StepClaimResult, error) {
	now, lease := norm(p.Now), norm(p.LeaseUntil)
	var res persistence.StepClaimResult
	err := s.write(ctx, func(q querier) error {
		res = persistence.StepClaimResult{}
		if err := s.compensationHandled(ctx, q, p); err != nil {
			return err
		}
		n, err := s.exec(ctx, q, `UPDATE step_runs SET comp_attempt = comp_attempt + 1, fence = ?,
			lease_expires_at = ?, next_attempt_at = NULL, updated_at = ?
			WHERE run_id = ? AND step = ? AND status = ?
				AND (lease_expires_at IS NULL OR lease_expires_at < ?)
				AND (next_attempt_at IS NULL OR next_attempt_at <= ?)`,
			p.Fence, s.t(lease), s.t(now), p.RunID, p.Step, string(persistence.StepCompensating), s.t(now), s.t(now))
		if err != nil {
			return err
		}
		if n == 0 {
			return s.compensationRefusal(ctx, q, p.RunID, p.Step, now)
		}
		run, err := s.runGet(ctx, q, p.RunID, false)
		if err != nil {
			return err
		}
		if run.Status != persistence.RunCompensating {
			// Rolls the claim back.
			reason := persistence.RefusedRunNotRunning
			if run.Status.Terminal() {
				reason = persistence.RefusedFinished
			}
			return &persistence.ClaimRefusedError{RunID: run.ID, Step: p.Step, Reason: reason, Status: string(run.Status)}
		}
		if run.PausedAt != nil {
			// Rolls the claim back: no new attempt of a paused run.
			return &persistence.ClaimRefusedError{RunID: run.ID, Step: p.Step, Reason: persistence.RefusedRunPaused,
				Status: string(persistence.StepCompensating)}
		}
		if res, err = s.compensationReads(ctx, q, p, run); err != nil {
			return err
		}
		return s.startCompensationAttempt(ctx, q, p, res.Step.CompAttempt, now)
	})
	return res, wrap("step claim", err)
}

// compensationHandled refuses (RefusedUnhandled) the compensation claim
// of a step that p.Handles rejects, before the claim writes: it reads the
// step's workflow, locked. A missing step is left to the claim to report.
func (s *Store) compensationHandled(ctx context.Context, q querier, p persistence.StepClaimParams) error {
	if p.Handles == nil {
		return nil
	}
	var rows []stepRow
	if err := s.selectAll(ctx, q, &rows, s.claimSelectSQL(1), pairArgs([]stepKey{{p.RunID, p.Step}})...); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	if e := unhandledRefusal(p.Handles, &rows[0]); e != nil {
		return e
	}
	return nil
}

// compensationReads returns a claimed compensation's step and run, with
// the outputs of the steps it asked for.
func (s *Store) compensationReads(ctx context.Context, q querier, p persistence.StepClaimParams, run persistence.Run) (persistence.StepClaimResult, error) {
	res := persistence.StepClaimResult{Run: run}
	names := append([]any{p.Step}, anys(p.WithOutputs)...)
	var rows []stepRow
	if err := s.selectAll(ctx, q, &rows, `SELECT `+stepCols+` FROM step_runs WHERE run_id = ? AND step IN (`+
		in(len(names))+`)`, append([]any{p.RunID}, names...)...); err != nil {
		return res, err
	}
	for _, r := range rows {
		if r.Step == p.Step {
			res.Step = r.record()
		}
		if len(r.Output) > 0 && slices.Contains(p.WithOutputs, r.Step) {
			if res.Outputs == nil {
				res.Outputs = make(map[string][]byte, len(p.WithOutputs))
			}
			res.Outputs[r.Step] = r.Output
		}
	}
	return res, nil
}

// startCompensationAttempt writes the history of a compensation claim: the
// previous attempt, if one still runs, is lost (a takeover); the new one
// runs.
func (s *Store) startCompensationAttempt(ctx context.Context, q querier, p persistence.StepClaimParams, attempt int, now time.Time) error {
	kind := string(persistence.AttemptCompensation)
	if attempt > 1 {
		if _, err := s.exec(ctx, q, `UPDATE step_attempts SET outcome = ?, finished_at = ?
			WHERE run_id = ? AND step = ? AND kind = ? AND outcome = ?`,
			string(persistence.OutcomeLost), s.t(now), p.RunID, p.Step, kind,
			string(persistence.OutcomeRunning)); err != nil {
			return err
		}
	}
	_, err := s.exec(ctx, q, `INSERT INTO step_attempts (run_id, step, kind, attempt, worker, fence, outcome, started_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		p.RunID, p.Step, kind, attempt, p.Worker, p.Fence, string(persistence.OutcomeRunning), s.t(now))
	return err
}

// compensationRefusal says why the compensation claim of a step changed
// no row: the step is gone, not compensating, leased, or its retry is not
// due.
func (s *Store) compensationRefusal(ctx context.Context, q querier, runID, step string, now time.Time) error {
	var rows []struct {
		Status         string   `db:"status"`
		LeaseExpiresAt nullTime `db:"lease_expires_at"`
		NextAttemptAt  nullTime `db:"next_attempt_at"`
	}
	if err := s.selectAll(ctx, q, &rows, `SELECT status, lease_expires_at, next_attempt_at FROM step_runs
		WHERE run_id = ? AND step = ?`, runID, step); err != nil {
		return err
	}
	if len(rows) == 0 {
		return fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, runID, step)
	}
	r := rows[0]
	e := &persistence.ClaimRefusedError{RunID: runID, Step: step, Status: r.Status}
	switch {
	case persistence.StepStatus(r.Status) != persistence.StepCompensating:
		e.Reason = persistence.RefusedFinished
		if persistence.StepStatus(r.Status).Pending() || r.Status == string(persistence.StepRunning) {
			e.Reason = persistence.RefusedNotReady
		}
	case r.LeaseExpiresAt.Valid && !r.LeaseExpiresAt.T.Before(now):
		e.Reason, e.DueAt = persistence.RefusedOwned, r.LeaseExpiresAt.T
	default:
		e.Reason, e.DueAt = persistence.RefusedNotDue, r.NextAttemptAt.T
	}
	return e
}

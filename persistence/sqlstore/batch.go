package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
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

// maxBatch bounds the items of one batch call (placeholders stay well
// under MySQL's 65,535).
const maxBatch = 512

// pairWhere returns "((run_id = ? AND step = ?) OR ...)" for n pairs.
func pairWhere(n int) string {
	var b strings.Builder
	b.WriteString("(")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(run_id = ? AND step = ?)")
	}
	b.WriteString(")")
	return b.String()
}

// keyIn returns a condition on n (run_id, step) pairs, for pairArgs.
// One pair is always written as "run_id = ? AND step = ?": MariaDB
// plans an UPDATE whose WHERE is an IN of a single row value as a scan
// of the whole primary key (for two or more it reads their ranges), so
// a claim of one step on a table of a million runs took seconds.
func (s *Store) keyIn(n int) string {
	if !s.d.RowValueIn || n == 1 {
		return pairWhere(n)
	}
	var b strings.Builder
	b.Grow(20 + 8*n)
	b.WriteString("(run_id, step) IN (")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?)")
	}
	b.WriteString(")")
	return b.String()
}

type stepKey struct{ run, step string }

func pairArgs(keys []stepKey) []any {
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k.run, k.step)
	}
	return args
}

func sortKeys(keys []stepKey) {
	slices.SortFunc(keys, func(a, b stepKey) int {
		if c := strings.Compare(a.run, b.run); c != 0 {
			return c
		}
		return strings.Compare(a.step, b.step)
	})
}

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
	return s.claimMany(ctx, items, p.Fence, p.Worker, p.LeaseUntil, p.Now)
}

// startDueRuns starts the delayed (pending) runs among runs whose start
// has come, in the claim's transaction: the first tasks of a delayed run
// are its root steps, due at its StartAt, and the claim of one of them is
// what starts the run on time (RunStart is the reconciler's safety net).
// The runs become running and their root steps queued; runs and rows (the
// claim's locked steps) are updated to match.
func (s *Store) startDueRuns(ctx context.Context, q querier, runs map[string]persistence.Run, rows map[stepKey]*stepRow, now time.Time) error {
	var due []string
	for id, r := range runs {
		if r.Status == persistence.RunPending && !r.StartAt.After(now) {
			due = append(due, id)
		}
	}
	if len(due) == 0 {
		return nil
	}
	slices.Sort(due)
	args := append([]any{string(persistence.RunRunning), s.t(now), s.t(now)}, anys(due)...)
	if _, err := s.exec(ctx, q, `UPDATE workflow_runs SET status = ?, started_at = ?, updated_at = ?
		WHERE id IN (`+in(len(due))+`) AND status = ?`, append(args, string(persistence.RunPending))...); err != nil {
		return err
	}
	args = append([]any{string(persistence.StepQueued), s.t(now), s.t(now)}, anys(due)...)
	if _, err := s.exec(ctx, q, `UPDATE step_runs SET status = ?, queued_at = ?, updated_at = ?
		WHERE run_id IN (`+in(len(due))+`) AND status = ? AND pending_deps = 0`, append(args, string(persistence.StepWaiting))...); err != nil {
		return err
	}
	for _, id := range due {
		r := runs[id]
		r.Status, r.StartedAt, r.UpdatedAt = persistence.RunRunning, &now, now
		runs[id] = r
	}
	for k, r := range rows {
		if slices.Contains(due, k.run) && r.Status == string(persistence.StepWaiting) && r.PendingDeps == 0 {
			r.Status = string(persistence.StepQueued)
			r.QueuedAt = nullTime{T: now, Valid: true}
			r.UpdatedAt = dbTime{now}
		}
	}
	return nil
}

// forwardRefusal says why r, a step of run, cannot be claimed for a
// forward attempt at now, or returns nil when it can: the run is running
// and the step is queued, retrying with its retry due, or running under a
// lease that expired. This is the one place that decides a forward claim.
func forwardRefusal(r *stepRow, run persistence.Run, now time.Time) *persistence.ClaimRefusedError {
	e := &persistence.ClaimRefusedError{RunID: r.RunID, Step: r.Step, Status: r.Status}
	switch {
	case run.Status == persistence.RunPending:
		e.Reason, e.Status, e.DueAt = persistence.RefusedRunPending, string(run.Status), run.StartAt
		return e
	case run.Status.Terminal():
		e.Reason, e.Status = persistence.RefusedFinished, string(run.Status)
		return e
	case run.Status != persistence.RunRunning:
		e.Reason, e.Status = persistence.RefusedRunNotRunning, string(run.Status)
		return e
	}
	switch persistence.StepStatus(r.Status) {
	case persistence.StepQueued:
		return nil
	case persistence.StepRetrying:
		if r.NextAttemptAt.Valid && !r.NextAttemptAt.T.After(now) {
			return nil
		}
		e.Reason, e.DueAt = persistence.RefusedNotDue, r.NextAttemptAt.T
		return e
	case persistence.StepRunning:
		if r.LeaseExpiresAt.Valid && r.LeaseExpiresAt.T.Before(now) {
			return nil
		}
		e.Reason, e.DueAt = persistence.RefusedOwned, r.LeaseExpiresAt.T
		return e
	case persistence.StepWaiting, persistence.StepCompensating:
		e.Reason = persistence.RefusedNotReady
	default:
		e.Reason = persistence.RefusedFinished
	}
	return e
}

func (s *Store) claimMany(ctx context.Context, items []claimItem, fence, worker string, leaseUntil, now time.Time) ([]persistence.StepClaimOutcome, error) {
	if err := validToken("fence", fence, MaxFenceLen); err != nil {
		return nil, err
	}
	if err := validToken("worker", worker, MaxWorkerLen); err != nil {
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
		// The steps, locked, and their runs, in one round trip on MySQL.
		var rows []stepRow
		var rr []runRow
		if err := s.selectSets(ctx, q,
			rowSet{&rows, s.claimSelectSQL(len(keys)), pairArgs(keys)},
			rowSet{&rr, `SELECT ` + runCols + ` FROM workflow_runs WHERE id IN (` + in(len(runIDs)) + `)`, anys(runIDs)},
		); err != nil {
			return err
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
				return err
			}
			runs[run.ID] = run
		}
		if err := s.startDueRuns(ctx, q, runs, byKey, now); err != nil {
			return err
		}
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
			r.Status = string(persistence.StepRunning)
			r.Attempt++
			r.Fence = fence
			r.Worker = worker
			r.ClaimedAt = nullTime{T: now, Valid: true}
			r.LeaseExpiresAt = nullTime{T: lease, Valid: true}
			r.NextAttemptAt = nullTime{}
			if !r.StartedAt.Valid {
				r.StartedAt = nullTime{T: now, Valid: true}
			}
			r.UpdatedAt = dbTime{now}
			out[i].Result = persistence.StepClaimResult{Step: r.record(), Run: run}
		}
		if len(claimed) == 0 {
			return nil
		}
		upd := stmt{s.claimUpdateSQL(len(claimed)), s.claimUpdateArgs(fence, worker, lease, now, claimed)}
		// The writes go with the next query on MySQL.
		if err := s.execLater(ctx, q, append([]stmt{upd}, s.endedStmts(ended)...)...); err != nil {
			return err
		}
		// Outputs (and statuses) of what each claimed step may read: every
		// step upstream of it, or the named steps.
		claimedRuns := make([]string, 0, len(claimed))
		for _, k := range claimed {
			claimedRuns = append(claimedRuns, k.run)
		}
		slices.Sort(claimedRuns)
		claimedRuns = slices.Compact(claimedRuns)
		var all []struct {
			RunID  string `db:"run_id"`
			Step   string `db:"step"`
			Deps   string `db:"deps"`
			Status string `db:"status"`
			Output []byte `db:"output"`
		}
		if err := s.selectAll(ctx, q, &all, `SELECT run_id, step, deps, status, output FROM step_runs WHERE run_id IN (`+
			in(len(claimedRuns))+`)`, anys(claimedRuns)...); err != nil {
			return err
		}
		type info struct {
			deps   []string
			status string
			output []byte
		}
		steps := make(map[stepKey]info, len(all))
		for _, r := range all {
			steps[stepKey{r.RunID, r.Step}] = info{splitNames(r.Deps), r.Status, r.Output}
		}
		for i, it := range items {
			if out[i].Err != nil {
				continue
			}
			names := it.outputs
			if it.deps {
				names = upstream(it.stepKey, func(k stepKey) []string { return steps[k].deps })
			}
			res := &out[i].Result
			for _, n := range names {
				inf, ok := steps[stepKey{it.run, n}]
				if !ok {
					continue
				}
				if it.deps {
					if res.Upstream == nil {
						res.Upstream = make(map[string]persistence.StepStatus, len(names))
					}
					res.Upstream[n] = persistence.StepStatus(inf.status)
				}
				if len(inf.output) > 0 {
					if res.Outputs == nil {
						res.Outputs = make(map[string][]byte, len(names))
					}
					res.Outputs[n] = inf.output
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("step claim", err)
	}
	return out, nil
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

// StepCompleteMany implements persistence.Store.
func (s *Store) StepCompleteMany(ctx context.Context, mp persistence.StepCompleteManyParams) ([]persistence.StepCompleteOutcome, error) {
	ps, rc := mp.Items, mp.ClaimReleased
	if rc != nil {
		if err := validToken("fence", rc.Fence, MaxFenceLen); err != nil {
			return nil, err
		}
		if err := validToken("worker", rc.Worker, MaxWorkerLen); err != nil {
			return nil, err
		}
	}
	if len(ps) > maxBatch {
		return nil, fmt.Errorf("sqlstore: step complete: %d items, over the batch limit of %d", len(ps), maxBatch)
	}
	out := make([]persistence.StepCompleteOutcome, len(ps))
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
	runIDs = slices.Compact(runIDs)
	err := s.write(ctx, func(q querier) error {
		for i := range out {
			out[i] = persistence.StepCompleteOutcome{Err: pre[i]}
		}
		if len(runIDs) == 0 {
			return nil
		}
		var locked []runRow
		cols := "id, status"
		if rc != nil {
			cols = runCols // a claimed step needs its run's input
		}
		// The runs, then every step of them, locked in that order, in one
		// round trip on MySQL. Sized for runs of four steps (the slice
		// grows for more): stepRow is large, and a batch reads hundreds.
		rows := make([]stepRow, 0, 4*len(runIDs))
		if err := s.selectSets(ctx, q,
			rowSet{&locked, `SELECT ` + cols + ` FROM workflow_runs WHERE id IN (` + in(len(runIDs)) +
				`) ORDER BY id` + s.d.ForUpdate, anys(runIDs)},
			rowSet{&rows, `SELECT ` + stepCols + ` FROM step_runs WHERE run_id IN (` + in(len(runIDs)) +
				`) ORDER BY run_id, step` + s.d.ForUpdate, anys(runIDs)},
		); err != nil {
			return err
		}
		runStatus := make(map[string]string, len(locked))
		lockedRuns := make(map[string]runRow, len(locked))
		for _, r := range locked {
			runStatus[r.ID] = r.Status
			lockedRuns[r.ID] = r
		}
		queues := map[string]bool{}
		budget := 0
		if rc != nil {
			for _, q := range rc.Queues {
				queues[q] = true
			}
			budget = rc.Max
		}
		type claimRef struct {
			item int
			key  stepKey
		}
		var claimRefs []claimRef
		byKey := make(map[stepKey]*stepRow, len(rows))
		byRun := map[string][]*stepRow{}
		for i := range rows {
			r := &rows[i]
			byKey[stepKey{r.RunID, r.Step}] = r
			byRun[r.RunID] = append(byRun[r.RunID], r)
		}
		// changed holds the rows this batch changes, as they were read.
		changed := map[stepKey]stepWas{}
		touch := func(k stepKey, r *stepRow) {
			if _, ok := changed[k]; !ok {
				changed[k] = stepWas{setOf(r), r.Output}
			}
		}
		var ended []endedAttempt
		lastOfRun := map[string]int{}
		// The batch writes at one instant, the latest of its items' (so
		// that the rows it writes alike share a statement: writeSteps).
		holds := func(p persistence.StepCompleteParams, r *stepRow) bool {
			return p.Fence != "" && r.Fence == p.Fence && r.Status == string(persistence.StepRunning)
		}
		var now time.Time
		for i, p := range ps {
			if r := byKey[stepKey{p.RunID, p.Step}]; out[i].Err == nil && r != nil && holds(p, r) {
				if n := norm(p.Now); n.After(now) {
					now = n
				}
			}
		}
		for i, p := range ps {
			if out[i].Err != nil {
				continue
			}
			k := stepKey{p.RunID, p.Step}
			r := byKey[k]
			if r == nil {
				out[i].Err = fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, p.RunID, p.Step)
				continue
			}
			if !holds(p, r) {
				out[i].Err = fmt.Errorf("%w: run %s step %q", persistence.ErrFenceMismatch, p.RunID, p.Step)
				continue
			}
			status := persistence.StepSucceeded
			if p.Skipped {
				status = persistence.StepSkipped
			}
			if !r.ClaimedAt.Valid {
				// Claimed before the step row held its attempt: its
				// attempt row exists and is finished by an update.
				ended = append(ended, attemptEnd(r, doneOutcome(status), "", now))
			}
			// Otherwise the step row keeps the ended attempt (number,
			// worker, claimed_at, finished_at) and no attempt row is
			// written: see heldAttempt.
			touch(k, r)
			r.Status = string(status)
			r.Output = nonEmpty(p.Output)
			r.Error.String, r.Error.Valid = "", false
			r.Fence, r.LeaseExpiresAt, r.NextAttemptAt = "", nullTime{}, nullTime{}
			r.FinishedAt = nullTime{T: now, Valid: true}
			r.UpdatedAt = dbTime{now}
			res := persistence.StepCompleteResult{Step: r.record()}
			for _, dn := range splitNames(r.Dependents) {
				d := byKey[stepKey{p.RunID, dn}]
				if d == nil || d.Status != string(persistence.StepWaiting) {
					continue // cancelled, or queued by other means
				}
				dk := stepKey{p.RunID, dn}
				touch(dk, d)
				d.UpdatedAt = dbTime{now}
				if d.PendingDeps <= 1 {
					d.PendingDeps = 0
					d.Status = string(persistence.StepQueued)
					d.QueuedAt = nullTime{T: now, Valid: true}
					if budget > 0 && queues[d.Queue] && runStatus[p.RunID] == string(persistence.RunRunning) {
						// Claimed for the caller in this transaction.
						budget--
						d.Status = string(persistence.StepRunning)
						d.Attempt++
						d.Fence = rc.Fence
						d.Worker = rc.Worker
						d.ClaimedAt = nullTime{T: now, Valid: true}
						d.LeaseExpiresAt = nullTime{T: norm(rc.LeaseUntil), Valid: true}
						d.NextAttemptAt = nullTime{}
						d.StartedAt = nullTime{T: now, Valid: true}
						claimRefs = append(claimRefs, claimRef{i, dk})
						continue
					}
					res.Ready = append(res.Ready, d.record())
				} else {
					d.PendingDeps--
				}
			}
			slices.SortFunc(res.Ready, func(a, b persistence.StepRun) int { return strings.Compare(a.Step, b.Step) })
			out[i].Result = res
			lastOfRun[p.RunID] = i
		}
		if len(changed) == 0 {
			return nil
		}
		// Runs whose every step is now succeeded or skipped are finished.
		var finished []string
		for runID, i := range lastOfRun {
			if runStatus[runID] != string(persistence.RunRunning) {
				continue
			}
			done := true
			for _, r := range byRun[runID] {
				if r.Status != string(persistence.StepSucceeded) && r.Status != string(persistence.StepSkipped) {
					done = false
					break
				}
			}
			if done {
				finished = append(finished, runID)
				runStatus[runID] = string(persistence.RunSucceeded)
				out[i].Result.RunFinished = true
			}
		}
		for i, p := range ps {
			if out[i].Err == nil {
				out[i].Result.RunStatus = persistence.RunStatus(runStatus[p.RunID])
			}
		}
		for _, cr := range claimRefs {
			run, err := lockedRuns[cr.key.run].record()
			if err != nil {
				return err
			}
			d := byKey[cr.key]
			res := persistence.StepClaimResult{Step: d.record(), Run: run}
			for _, n := range upstream(cr.key, func(k stepKey) []string {
				if r := byKey[k]; r != nil {
					return splitNames(r.Deps)
				}
				return nil
			}) {
				u := byKey[stepKey{cr.key.run, n}]
				if u == nil {
					continue
				}
				if res.Upstream == nil {
					res.Upstream = map[string]persistence.StepStatus{}
				}
				res.Upstream[n] = persistence.StepStatus(u.Status)
				if len(u.Output) > 0 {
					if res.Outputs == nil {
						res.Outputs = map[string][]byte{}
					}
					res.Outputs[n] = u.Output
				}
			}
			out[cr.item].Result.Claimed = append(out[cr.item].Result.Claimed, res)
		}
		// The writes, with the COMMIT in one round trip on MySQL.
		writes := append(s.writeSteps(byKey, changed), s.endedStmts(ended)...)
		if len(finished) > 0 {
			slices.Sort(finished)
			args := append([]any{string(persistence.RunSucceeded), s.t(now), s.t(now), string(persistence.RunRunning)}, anys(finished)...)
			writes = append(writes, stmt{`UPDATE workflow_runs SET status = ?, finished_at = ?, updated_at = ?
				WHERE status = ? AND id IN (` + in(len(finished)) + `)`, args})
		}
		return s.execLater(ctx, q, writes...)
	})
	if err != nil {
		return nil, wrap("step complete", err)
	}
	return out, nil
}

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

// upstream returns every step that k depends on, directly or not, in no
// particular order.
func upstream(k stepKey, deps func(stepKey) []string) []string {
	seen := map[string]bool{}
	var out []string
	stack := deps(k)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		stack = append(stack, deps(stepKey{k.run, n})...)
	}
	return out
}

// doneOutcome is the outcome of the forward attempt that left a step
// succeeded or skipped.
func doneOutcome(st persistence.StepStatus) persistence.AttemptOutcome {
	if st == persistence.StepSkipped {
		return persistence.OutcomeSkipped
	}
	return persistence.OutcomeSucceeded
}

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
	// legacy: claimed before the step row held its attempt (migration
	// 00005 MySQL / 00004 SQLite), so its row exists and is updated.
	legacy bool
}

// attemptEnd describes the forward attempt that r (as locked, before this
// transaction changed it) holds, ending now with outcome.
func attemptEnd(r *stepRow, outcome persistence.AttemptOutcome, msg string, now time.Time) endedAttempt {
	return endedAttempt{
		stepKey: stepKey{r.RunID, r.Step}, attempt: r.Attempt, worker: r.Worker, fence: r.Fence,
		outcome: outcome, msg: msg, started: r.ClaimedAt.T, finished: &now, legacy: !r.ClaimedAt.Valid,
	}
}

// recordEnded writes the rows of ended forward attempts.
func (s *Store) recordEnded(ctx context.Context, q querier, ended []endedAttempt) error {
	return s.execAll(ctx, q, s.endedStmts(ended)...)
}

// endedStmts returns the statements that record ended forward attempts:
// one INSERT for all of them, and an UPDATE of its running row for a
// legacy one.
func (s *Store) endedStmts(ended []endedAttempt) []stmt {
	var out []stmt
	var rows [][]any
	for _, e := range ended {
		if e.legacy {
			if e.outcome == persistence.OutcomeRunning {
				continue // its row already says so
			}
			out = append(out, stmt{`UPDATE step_attempts SET outcome = ?, error = ?, finished_at = ?
				WHERE run_id = ? AND step = ? AND kind = ? AND fence = ? AND outcome = ?`,
				[]any{string(e.outcome), nullString(e.msg), s.tp(e.finished), e.run, e.step,
					string(persistence.AttemptForward), e.fence, string(persistence.OutcomeRunning)}})
			continue
		}
		rows = append(rows, []any{e.run, e.step, string(persistence.AttemptForward), e.attempt, e.worker, e.fence,
			string(e.outcome), nullString(e.msg), s.t(norm(e.started)), s.tp(e.finished)})
	}
	return append(out, valuesStmts(`INSERT INTO step_attempts (run_id, step, kind, attempt, worker, fence, outcome, error, started_at, finished_at) VALUES `,
		"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", "", rows)...)
}

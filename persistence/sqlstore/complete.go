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

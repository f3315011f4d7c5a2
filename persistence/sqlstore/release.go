package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Releasing the leases of nodes presumed dead (the node registry's
// takeover). A forward attempt's worker is on its step row (the worker
// column); a compensation's is on its attempt row, found by (run, step,
// fence). Both reads are one range of idx_steps_wf_due (status, workflow,
// due_at, ...) each: the entries of the running, or compensating, steps
// of every workflow, which are what is in flight, never history; due_at
// (lease_expires_at for a running step and for a compensating one that
// holds a lease) is checked from the index before a row is read.
//
// And handing back a claim a node will not run (StepHandBack): the claim
// is undone, not ended, so that it costs the step no attempt.

// MaxReleaseWorkers is the most workers one StepReleaseLeases call names.
const MaxReleaseWorkers = 100

// StepReleaseLeases implements persistence.Store: it lists the steps the
// workers hold under an unexpired lease, then ends each lease with an
// UPDATE fenced by (run, step, fence, status) and by the lease being
// still unexpired, so that a step claimed by another worker meanwhile (a
// new fence) is not touched.
func (s *Store) StepReleaseLeases(ctx context.Context, p persistence.StepReleaseLeasesParams) ([]persistence.StepRun, error) {
	if len(p.Workers) == 0 || len(p.Workers) > MaxReleaseWorkers {
		return nil, invalid("release workers", fmt.Sprint(len(p.Workers)), fmt.Sprintf("must name 1 to %d workers", MaxReleaseWorkers))
	}
	for _, w := range p.Workers {
		if err := validNodeToken("worker", w, MaxWorkerLen); err != nil {
			return nil, err
		}
	}
	if p.Now.IsZero() {
		return nil, invalid("release time", "", "is zero")
	}
	now := norm(p.Now)
	var out []persistence.StepRun
	for _, q := range s.releaseLeasesQueries(p) {
		var rows []stepRow
		if err := s.selectAll(ctx, s.db, &rows, q.SQL, q.Args...); err != nil {
			return nil, wrap("step release leases", err)
		}
		for _, r := range rows {
			n, err := s.exec1(ctx, `UPDATE step_runs SET lease_expires_at = ?, updated_at = ?
				WHERE run_id = ? AND step = ? AND fence = ? AND status = ? AND lease_expires_at >= ?`,
				s.t(now), s.t(now), r.RunID, r.Step, r.Fence, string(r.Status), s.t(now))
			if err != nil {
				return out, wrap("step release leases", err)
			}
			if n == 0 {
				continue // finished, or claimed by another worker, meanwhile
			}
			rec := r.record()
			rec.LeaseExpiresAt, rec.UpdatedAt = &now, now
			out = append(out, rec)
		}
	}
	return out, nil
}

// releaseLeasesQueries are StepReleaseLeases' reads: the running steps
// whose worker is one of p.Workers and the compensating steps whose
// running compensation attempt (by fence) is one of theirs, each under
// a lease unexpired at p.Now, at most p.Limit of each.
func (s *Store) releaseLeasesQueries(p persistence.StepReleaseLeasesParams) []Query {
	now, limit := s.t(norm(p.Now)), clampLimit(p.Limit, 100, 10000)
	in := strings.TrimSuffix(strings.Repeat("?, ", len(p.Workers)), ", ")
	workers := make([]any, len(p.Workers))
	for i, w := range p.Workers {
		workers[i] = w
	}
	args := func(st persistence.StepStatus, extra ...any) []any {
		a := append([]any{string(st), now, now}, workers...)
		return append(append(a, extra...), limit)
	}
	return []Query{
		{Name: "StepReleaseLeases/running", SQL: `SELECT ` + stepCols + ` FROM step_runs` + s.d.useIndex("idx_steps_wf_due") + `
			WHERE status = ? AND due_at >= ? AND lease_expires_at >= ? AND worker IN (` + in + `)
			LIMIT ?`, Args: args(persistence.StepRunning)},
		{Name: "StepReleaseLeases/compensating", SQL: `SELECT ` + stepCols + ` FROM step_runs` + s.d.useIndex("idx_steps_wf_due") + `
			WHERE status = ? AND due_at >= ? AND lease_expires_at >= ? AND EXISTS (SELECT 1 FROM step_attempts a
				WHERE a.run_id = step_runs.run_id AND a.step = step_runs.step AND a.fence = step_runs.fence
				AND a.worker IN (` + in + `) AND a.kind = ? AND a.outcome = ?)
			LIMIT ?`, Args: args(persistence.StepCompensating, string(persistence.AttemptCompensation), string(persistence.OutcomeRunning))},
	}
}

// ReleaseLeasesQueries returns StepReleaseLeases' reads for workers at
// now, for tests to EXPLAIN.
func (s *Store) ReleaseLeasesQueries(workers []string, now time.Time) []Query {
	return s.releaseLeasesQueries(persistence.StepReleaseLeasesParams{Workers: workers, Now: now})
}

// StepHandBack implements persistence.Store: one UPDATE fenced by the
// claim (run, step, fence, running) that undoes what the claim wrote
// (claimRow): the step is queued again, its attempt number is the one
// before the claim, and fence, worker, lease and claimed_at are cleared;
// its start is cleared too when the claim set it (started_at is the
// claim's claimed_at only then). No attempt row is written. MySQL applies
// a single-table UPDATE's assignments in order, so started_at is decided
// before claimed_at is cleared; SQLite reads the old row for every one.
func (s *Store) StepHandBack(ctx context.Context, p persistence.StepHandBackParams) error {
	if err := stepRef(p.RunID, p.Step); err != nil {
		return err
	}
	if err := validToken("fence", p.Fence, MaxFenceLen); err != nil {
		return err
	}
	if p.Now.IsZero() {
		return invalid("hand-back time", "", "is zero")
	}
	now := s.t(norm(p.Now))
	n, err := s.exec1(ctx, `UPDATE step_runs SET status = ?, attempt = attempt - 1, fence = '', lease_expires_at = NULL,
			next_attempt_at = NULL, queued_at = COALESCE(queued_at, ?),
			started_at = CASE WHEN started_at = claimed_at THEN NULL ELSE started_at END,
			worker = '', claimed_at = NULL, updated_at = ?
		WHERE run_id = ? AND step = ? AND fence = ? AND status = ? AND attempt > 0`,
		string(persistence.StepQueued), now, now, p.RunID, p.Step, p.Fence, string(persistence.StepRunning))
	if err != nil {
		return wrap("step hand back", err)
	}
	if n == 0 {
		return s.fenceError(ctx, p.RunID, p.Step)
	}
	return nil
}

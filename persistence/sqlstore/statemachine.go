package sqlstore

import (
	"context"
	"slices"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// The step state machine's rules, each decided in one place and used by
// every path that applies it: a forward claim (a batch claim, a claim at
// release, a claim at create), the start of a due delayed run, and what a
// claimed step may read.

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

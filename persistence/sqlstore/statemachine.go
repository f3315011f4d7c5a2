package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
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
// lease that expired, and the run is not paused. This is the one place
// that decides a forward claim.
func forwardRefusal(r *stepRow, run persistence.Run, now time.Time) *persistence.ClaimRefusedError {
	e := stepRefusal(r, run, now)
	if e == nil && run.PausedAt != nil {
		// Claimable but for the pause: RunSetPaused resumes it.
		e = &persistence.ClaimRefusedError{RunID: r.RunID, Step: r.Step, Status: r.Status, Reason: persistence.RefusedRunPaused}
	}
	return e
}

// stepRefusal is forwardRefusal without the run's pause.
func stepRefusal(r *stepRow, run persistence.Run, now time.Time) *persistence.ClaimRefusedError {
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

// handled reports whether a claim limited by h may take a step of
// workflow named step: the one test every claim path makes (a nil h
// takes every step).
func handled(h persistence.Handles, workflow, step string) bool {
	return h == nil || h(workflow, step)
}

// unhandledRefusal refuses the claim of r, a step the claiming node
// cannot run (h rejects it), or returns nil when h accepts it. It is
// decided before anything else about the claim, and before anything is
// written.
func unhandledRefusal(h persistence.Handles, r *stepRow) *persistence.ClaimRefusedError {
	if handled(h, r.Workflow, r.Step) {
		return nil
	}
	return &persistence.ClaimRefusedError{RunID: r.RunID, Step: r.Step, Reason: persistence.RefusedUnhandled,
		Workflow: r.Workflow, Status: r.Status}
}

// startDueRuns starts the delayed (pending) runs among runs whose start
// has come, in the claim's transaction: the first tasks of a delayed run
// are its root steps, due at its StartAt, and the claim of one of them is
// what starts the run on time (RunStart is the reconciler's safety net).
// The runs become running and their root steps queued; runs and rows (the
// claim's locked steps) are updated to match. Only the runs in claiming
// are started: those of which the batch claims a step (not one refused
// before, say because the node cannot run it).
func (s *Store) startDueRuns(ctx context.Context, q querier, runs map[string]persistence.Run, rows map[stepKey]*stepRow,
	claiming map[string]bool, now time.Time) error {
	var due []string
	for id, r := range runs {
		if claiming[id] && r.Status == persistence.RunPending && !r.StartAt.After(now) {
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

// claimRow moves a step row to running for one more forward attempt,
// held by fence and worker until lease: the in-memory claim every path
// applies (a batch claim, a claim at release) before writing the row.
func claimRow(r *stepRow, fence, worker string, lease, now time.Time) {
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
}

// claimBudget is what a ReleaseClaim allows: steps of which queues may be
// claimed for the caller, and how many more. A nil budget allows none.
type claimBudget struct {
	queues        map[string]bool
	handles       persistence.Handles
	left          int
	fence, worker string
	lease         time.Time
}

func newClaimBudget(rc *persistence.ReleaseClaim) *claimBudget {
	if rc == nil {
		return nil
	}
	b := &claimBudget{queues: make(map[string]bool, len(rc.Queues)), handles: rc.Handles, left: rc.Max, fence: rc.Fence,
		worker: rc.Worker, lease: norm(rc.LeaseUntil)}
	for _, q := range rc.Queues {
		b.queues[q] = true
	}
	return b
}

// take reports whether a ready step (of workflow, named step, in queue)
// is claimed for the caller, and counts it: a step the caller cannot run
// (handles) is left queued.
func (b *claimBudget) take(workflow, step, queue string) bool {
	if b == nil || b.left <= 0 || !b.queues[queue] || !handled(b.handles, workflow, step) {
		return false
	}
	b.left--
	return true
}

// readable is what a claimed step may read of another step of its run.
// Outputs are measured before they are loaded: size is the output's
// length, 0 when the step has none.
type readable struct {
	deps   string // as stored: split only when the walk goes through it
	status string
	size   int64
	inline []byte // the output, when the measuring query brought it (small)
}

// fillReads gives a claimed step (k) what it may read, and returns the
// steps whose outputs are to be loaded for it: with all, the statuses and
// outputs of every step upstream of it (its dependencies, theirs, and so
// on: the contract of steps.Context.Outputs); otherwise the outputs of the
// named steps.
// When the run's input and those outputs together are over maxRead (if
// positive), none is loaded and the result says so (OverMaxRead). look
// finds a step of the run.
func fillReads(res *persistence.StepClaimResult, k stepKey, all bool, names []string, maxRead int64, look func(stepKey) (readable, bool)) []string {
	if all {
		up := upstream(k, func(k stepKey) []string { r, _ := look(k); return splitNames(r.deps) })
		names = up
		for _, n := range up {
			if u, ok := look(stepKey{k.run, n}); ok {
				if res.Upstream == nil {
					res.Upstream = make(map[string]persistence.StepStatus, len(up))
				}
				res.Upstream[n] = persistence.StepStatus(u.status)
			}
		}
	}
	var load []string
	for _, n := range names {
		if u, ok := look(stepKey{k.run, n}); ok && u.size > 0 && !slices.Contains(load, n) {
			load = append(load, n)
			res.OutputBytes += u.size
		}
	}
	res.OutputCount = len(load)
	if maxRead > 0 && int64(len(res.Run.Input))+res.OutputBytes > maxRead {
		res.OverMaxRead = true
		return nil
	}
	return load
}

// putOutput adds a loaded output to a claim's result.
func putOutput(res *persistence.StepClaimResult, step string, output []byte) {
	if len(output) == 0 {
		return
	}
	if res.Outputs == nil {
		res.Outputs = make(map[string][]byte, res.OutputCount)
	}
	res.Outputs[step] = output
}

// stepReset is what an operator's retry, rerun or skip does to one step
// of a finished run (retryPlan).
type stepReset int

const (
	keepStep    stepReset = iota // stays as it is: a success (or skip) kept
	retryStep                    // dead: runs again, a fresh attempt budget, the same idempotency key
	rerunStep                    // completed (its work done, or done and undone): runs again under a new key
	releaseStep                  // cancelled or skipped: never ran to its end; waits for its dependencies again
	skipStep                     // dead: succeeded with the operator's output, no handler runs
)

// retryPlan is the one place that decides what an operator's action on a
// finished run does to each of its steps (rows, locked), or why the
// action is refused. action is ActionRetry (mode failed: every dead step,
// or the one named step), ActionRerun (from step) or ActionSkip (of
// step). The rules (docs/operations.md has them as a table):
//
//   - Which actions a run's status allows is persistence.RunStatus's
//     ActionRefusal: a failed run takes each; a compensated run only a
//     rerun (its completed work was undone); a succeeded run only a
//     rerun; a run in flight or compensating is the engine's, and a
//     cancelled run was stopped on purpose.
//   - A run with a compensation that failed (or still runs) is refused:
//     what its undo did is unknown, so neither redoing nor keeping its
//     work is safe.
//   - Undone work is never reused: on a compensated run rerun from a
//     step, every compensated step runs again, under a new idempotency
//     key.
//   - Whatever runs again takes everything downstream of it that had
//     completed along (it consumed the old output): a rerun.
//   - Dead steps are retried, cancelled and skipped ones released, so
//     that the run can finish.
func retryPlan(runID, runStatus string, rows []stepRow, action persistence.RunActionKind, step string) (map[string]stepReset, error) {
	refuse := func(format string, args ...any) error {
		return &persistence.RetryRefusedError{RunID: runID, Step: step, Action: action, Reason: fmt.Sprintf(format, args...)}
	}
	byName := make(map[string]*stepRow, len(rows))
	for i := range rows {
		byName[rows[i].Step] = &rows[i]
	}
	if step != "" && byName[step] == nil {
		return nil, fmt.Errorf("%w: run %s step %q", persistence.ErrStepNotFound, runID, step)
	}
	if why := persistence.RunStatus(runStatus).ActionRefusal(action); why != "" {
		return nil, refuse("%s", why)
	}
	for _, r := range rows {
		switch persistence.StepStatus(r.Status) {
		case persistence.StepCompensationFailed, persistence.StepCompensating:
			return nil, refuse("the compensation of step %q failed: what it undid is unknown; resolve it by hand and trigger a new run", r.Step)
		}
	}
	plan := make(map[string]stepReset, len(rows))
	// What did not end well runs again, or is released.
	for _, r := range rows {
		switch persistence.StepStatus(r.Status) {
		case persistence.StepDead:
			if action != persistence.ActionRetry || step == "" || step == r.Step {
				plan[r.Step] = retryStep
			}
		case persistence.StepCompensated:
			plan[r.Step] = rerunStep
		case persistence.StepCancelled:
			plan[r.Step] = releaseStep
		}
	}
	switch action {
	case persistence.ActionRetry:
		if step != "" && byName[step].Status != string(persistence.StepDead) {
			return nil, refuse("step is %s, not dead", byName[step].Status)
		}
		if !slices.ContainsFunc(rows, func(r stepRow) bool { return plan[r.Step] == retryStep || plan[r.Step] == rerunStep }) {
			return nil, refuse("run has no dead step")
		}
	case persistence.ActionSkip:
		if byName[step].Status != string(persistence.StepDead) {
			return nil, refuse("step is %s, not dead: only a dead step can be skipped", byName[step].Status)
		}
		plan[step] = skipStep
	case persistence.ActionRerun:
		if step == "" {
			return nil, refuse("a rerun names the step to rerun from")
		}
		plan[step] = resetOf(persistence.StepStatus(byName[step].Status))
	default:
		return nil, refuse("unknown action")
	}
	// Downstream of what runs again, every completed step runs again too.
	var stack []string
	for _, r := range rows {
		if plan[r.Step] == rerunStep {
			stack = append(stack, r.Step)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range splitNames(byName[n].Dependents) {
			r := byName[d]
			if r == nil || plan[d] != keepStep {
				continue
			}
			if plan[d] = resetOf(persistence.StepStatus(r.Status)); plan[d] == rerunStep {
				stack = append(stack, d)
			}
		}
	}
	return plan, nil
}

// resetOf is what running a step again means for a step in status st.
func resetOf(st persistence.StepStatus) stepReset {
	switch st {
	case persistence.StepDead:
		return retryStep
	case persistence.StepSucceeded, persistence.StepCompensated:
		return rerunStep
	default: // skipped, cancelled
		return releaseStep
	}
}

// resetRow applies a plan's reset to r at now: the in-memory change the
// store then writes. done says whether a step counts as done once the
// plan is applied (for the pending dependencies of the steps that wait).
func resetRow(r *stepRow, how stepReset, output []byte, done func(string) bool, now time.Time) {
	r.Fence, r.LeaseExpiresAt, r.NextAttemptAt = "", nullTime{}, nullTime{}
	r.Error = sql.NullString{}
	r.UpdatedAt = dbTime{now}
	r.ClaimedAt = nullTime{} // the attempt it held has its row (recordHeld)
	if how == skipStep {
		r.Status = string(persistence.StepSucceeded)
		r.Output = output
		r.FinishedAt = nullTime{T: now, Valid: true}
		return
	}
	switch how {
	case retryStep:
		r.Attempt = 0
	case rerunStep:
		// A rerun's attempts go on numbering after the completed
		// execution's (its budget moved along): the history keeps both
		// apart, whatever the clocks say.
		r.MaxAttempts += r.Attempt
		r.CompAttempt, r.Output, r.StartedAt = 0, nil, nullTime{}
		r.Reruns++
	}
	r.FinishedAt = nullTime{}
	r.PendingDeps = 0
	for _, d := range splitNames(r.Deps) {
		if !done(d) {
			r.PendingDeps++
		}
	}
	if r.PendingDeps == 0 {
		r.Status = string(persistence.StepQueued)
		r.QueuedAt = nullTime{T: now, Valid: true}
	} else {
		r.Status = string(persistence.StepWaiting)
		r.QueuedAt = nullTime{}
	}
}

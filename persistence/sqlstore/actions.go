package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Operator actions on finished runs: a retry of the failed steps, a rerun
// from a step, a skip of a dead step. retryPlan (statemachine.go) decides
// what each does to every step; resume applies it and records the action
// in run_actions, whose primary key (run_id, seq) serves every read and
// the delete of a run's actions.

// MaxActorLen is the longest actor name of an operator action, in bytes.
const MaxActorLen = 255

// actionDetail is run_actions.detail: what the action did beyond its
// step. The skipped step's output is on its row only (it may be
// encrypted there; the detail is not).
type actionDetail struct {
	Steps []string `json:"steps,omitempty"`
}

type actionRow struct {
	RunID  string `db:"run_id"`
	Seq    int    `db:"seq"`
	At     dbTime `db:"at"`
	Actor  string `db:"actor"`
	Action string `db:"action"`
	Step   string `db:"step"`
	Detail []byte `db:"detail"`
}

const actionCols = "run_id, seq, at, actor, action, step, detail"

func (r actionRow) record() persistence.RunAction {
	a := persistence.RunAction{RunID: r.RunID, Seq: r.Seq, At: r.At.T, Actor: r.Actor,
		Action: persistence.RunActionKind(r.Action), Step: r.Step}
	var d actionDetail
	if len(r.Detail) > 0 && json.Unmarshal(r.Detail, &d) == nil {
		a.Steps = d.Steps
	}
	return a
}

// RunRetry implements persistence.Store.
func (s *Store) RunRetry(ctx context.Context, p persistence.RunRetryParams) (persistence.RunRetryResult, error) {
	action := persistence.ActionRetry
	switch p.Mode {
	case persistence.RetryFailed:
	case persistence.RetryFromStep:
		action = persistence.ActionRerun
		if p.Step == "" {
			return persistence.RunRetryResult{}, invalid("retry step", "", "a rerun from a step must name the step")
		}
	default:
		return persistence.RunRetryResult{}, invalid("retry mode", string(p.Mode), `must be "failed" or "from_step"`)
	}
	res, err := s.resume(ctx, p.RunID, action, p.Step, nil, p.Actor, p.Now)
	return res, wrap("run retry", err)
}

// StepSkip implements persistence.Store.
func (s *Store) StepSkip(ctx context.Context, p persistence.StepSkipParams) (persistence.RunRetryResult, error) {
	if p.Step == "" {
		return persistence.RunRetryResult{}, invalid("skip step", "", "is empty")
	}
	if err := s.validJSON(fmt.Sprintf("step %q output", p.Step), p.Output); err != nil {
		return persistence.RunRetryResult{}, err
	}
	res, err := s.resume(ctx, p.RunID, persistence.ActionSkip, p.Step, p.Output, p.Actor, p.Now)
	return res, wrap("step skip", err)
}

// resume applies an operator's action to a finished run in one
// transaction: the run's row locked, then its steps, the plan decided
// (retryPlan), the attempts the reset rows hold written to their own
// rows, the rows reset, the run running again (or succeeded, when the
// action left nothing to run) and the action recorded.
func (s *Store) resume(ctx context.Context, runID string, action persistence.RunActionKind, step string, output []byte,
	actor string, at time.Time) (persistence.RunRetryResult, error) {
	if err := validToken("actor", actor, MaxActorLen); err != nil {
		return persistence.RunRetryResult{}, err
	}
	if err := runRef(runID); err != nil {
		return persistence.RunRetryResult{}, err
	}
	if step != "" {
		if err := stepRef(runID, step); err != nil {
			return persistence.RunRetryResult{}, err
		}
	}
	now := norm(at)
	var res persistence.RunRetryResult
	err := s.write(ctx, func(q querier) error {
		res = persistence.RunRetryResult{}
		run, err := s.lockRun(ctx, q, runID)
		if err != nil {
			return err
		}
		var rows []stepRow
		if err := s.selectAll(ctx, q, &rows, `SELECT `+stepCols+` FROM step_runs WHERE run_id = ? ORDER BY seq`+s.d.ForUpdate, runID); err != nil {
			return err
		}
		plan, err := retryPlan(runID, run.Status, rows, action, step)
		if err != nil {
			return err
		}
		var held []stepRow
		for _, r := range rows {
			if plan[r.Step] != keepStep {
				held = append(held, r)
			}
		}
		if err := s.recordHeld(ctx, q, runID, held); err != nil {
			return err
		}
		steps, unfinished, err := s.resetSteps(ctx, q, rows, plan, output, now, &res)
		if err != nil {
			return err
		}
		runTo, finished := persistence.RunRunning, any(nil)
		if !unfinished {
			runTo, finished = persistence.RunSucceeded, s.t(now)
		}
		if _, err := s.exec(ctx, q, `UPDATE workflow_runs SET status = ?, output = NULL, error = NULL, finished_at = ?, updated_at = ?
			WHERE id = ? AND status = ?`, string(runTo), finished, s.t(now), runID, run.Status); err != nil {
			return err
		}
		res.Action, err = s.recordAction(ctx, q, persistence.RunAction{RunID: runID, At: now, Actor: actor, Action: action,
			Step: step, Steps: steps})
		return err
	})
	return res, err
}

// resetSteps resets the locked rows of a run as plan says (resetRow,
// writeReset), in order, and adds the rows it queues to res.Queued. It
// returns the steps that run again (retried or rerun) and whether the run
// has a step left to finish.
func (s *Store) resetSteps(ctx context.Context, q querier, rows []stepRow, plan map[string]stepReset, output []byte,
	now time.Time, res *persistence.RunRetryResult) ([]string, bool, error) {
	status := make(map[string]string, len(rows))
	for _, r := range rows {
		status[r.Step] = r.Status
	}
	done := func(n string) bool {
		switch plan[n] {
		case keepStep:
			return persistence.StepStatus(status[n]).Done()
		case skipStep:
			return true
		}
		return false
	}
	var steps []string
	unfinished := false
	for i := range rows {
		r := &rows[i]
		how := plan[r.Step]
		if how == keepStep {
			unfinished = unfinished || !persistence.StepStatus(r.Status).Done()
			continue
		}
		was := r.Status
		resetRow(r, how, output, done, now)
		if err := s.writeReset(ctx, q, r, was); err != nil {
			return nil, false, err
		}
		if how == retryStep || how == rerunStep {
			steps = append(steps, r.Step)
		}
		unfinished = unfinished || how != skipStep
		if r.Status == string(persistence.StepQueued) {
			res.Queued = append(res.Queued, r.record())
		}
	}
	return steps, unfinished, nil
}

// writeReset writes a row that resetRow changed, fenced by the status it
// had when it was locked.
func (s *Store) writeReset(ctx context.Context, q querier, r *stepRow, was string) error {
	n, err := s.exec(ctx, q, `UPDATE step_runs SET status = ?, attempt = ?, max_attempts = ?, pending_deps = ?, comp_attempt = ?,
		reruns = ?, fence = '', lease_expires_at = NULL, next_attempt_at = NULL, output = ?, error = NULL, queued_at = ?,
		started_at = ?, finished_at = ?, claimed_at = NULL, updated_at = ?
		WHERE run_id = ? AND step = ? AND status = ?`,
		r.Status, r.Attempt, r.MaxAttempts, r.PendingDeps, r.CompAttempt, r.Reruns, nullBytes(r.Output), s.nt(r.QueuedAt),
		s.nt(r.StartedAt), s.nt(r.FinishedAt), s.t(r.UpdatedAt.T), r.RunID, r.Step, was)
	if err != nil {
		return err
	}
	if n != 1 {
		return &persistence.TransitionError{RunID: r.RunID, Step: r.Step, From: was, To: r.Status}
	}
	return nil
}

// recordAction appends a to its run's history, numbered after the run's
// last action (the caller holds the run's row lock).
func (s *Store) recordAction(ctx context.Context, q querier, a persistence.RunAction) (persistence.RunAction, error) {
	var last int
	lq := s.actionQueries(a.RunID)[1]
	if err := q.QueryRowContext(ctx, s.d.rebind(lq.SQL), lq.Args...).Scan(&last); err != nil {
		return a, err
	}
	a.Seq = last + 1
	detail, err := json.Marshal(actionDetail{Steps: a.Steps})
	if err != nil {
		return a, err
	}
	_, err = s.exec(ctx, q, `INSERT INTO run_actions (`+actionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		a.RunID, a.Seq, s.t(a.At), a.Actor, string(a.Action), a.Step, detail)
	return a, err
}

// RunActionList implements persistence.Store.
func (s *Store) RunActionList(ctx context.Context, runID string) ([]persistence.RunAction, error) {
	if runRef(runID) != nil {
		return nil, nil
	}
	var rows []actionRow
	q := s.actionQueries(runID)[0]
	if err := s.selectAll(ctx, s.db, &rows, q.SQL, q.Args...); err != nil {
		return nil, wrap("run action list", err)
	}
	out := make([]persistence.RunAction, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// actionQueries are the reads of run_actions: a run's actions, and its
// last action's number.
func (s *Store) actionQueries(runID string) []Query {
	return []Query{
		{Name: "RunActionList", SQL: `SELECT ` + actionCols + ` FROM run_actions WHERE run_id = ? ORDER BY seq`, Args: []any{runID}},
		{Name: "RunAction/last", SQL: `SELECT COALESCE(MAX(seq), 0) FROM run_actions WHERE run_id = ?`, Args: []any{runID}},
	}
}

// ActionQueries returns the reads of run_actions for runID, for tests to
// EXPLAIN.
func (s *Store) ActionQueries(runID string) []Query { return s.actionQueries(runID) }

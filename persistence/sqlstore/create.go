package sqlstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dagflow/dagflow/persistence"
)

// Creating runs: a run's plan (checks, record, step graph), RunCreate
// and its transaction variant, and RunCreateMany, which creates a batch
// in one transaction and may claim root steps for the caller.

// RunCreate implements persistence.Store.
func (s *Store) RunCreate(ctx context.Context, p persistence.RunCreateParams) (persistence.RunCreateResult, error) {
	plan, err := s.planRun(p)
	if err != nil {
		return persistence.RunCreateResult{}, err
	}
	var res persistence.RunCreateResult
	err = s.write(ctx, func(q querier) error {
		var err error
		res, err = s.runCreate(ctx, q, plan)
		return err
	})
	return res, wrap("run create", err)
}

// RunCreateTx implements persistence.TxStore: the run is created in the
// caller's transaction and commits or rolls back with it. On SQLite the
// caller's transaction should begin IMMEDIATE (transactions on DB() do).
func (s *Store) RunCreateTx(ctx context.Context, tx persistence.DBTX, p persistence.RunCreateParams) (persistence.RunCreateResult, error) {
	plan, err := s.planRun(p)
	if err != nil {
		return persistence.RunCreateResult{}, err
	}
	res, err := s.runCreate(ctx, tx, plan)
	return res, wrap("run create", err)
}

// runPlan is a validated RunCreateParams with the rows to insert.
type runPlan struct {
	// claimWorker is the worker of root steps claimed at create (they are
	// the plan's running steps).
	claimWorker string
	run         persistence.Run
	metadata    []byte
	steps       []persistence.StepRun
	seqs        []int
	dependents  [][]string
}

func (s *Store) planRun(p persistence.RunCreateParams) (runPlan, error) {
	var plan runPlan
	if err := s.checkRunCreate(p); err != nil {
		return plan, err
	}
	if len(p.Metadata) > 0 {
		b, err := s.encodeMetadata(p.Metadata)
		if err != nil {
			return plan, err
		}
		plan.metadata = b
	}
	plan.run = runRecord(p)
	if err := planGraph(&plan, p); err != nil {
		return plan, err
	}
	return plan, nil
}

// checkRunCreate refuses a run whose id, names, key or input the store
// cannot take.
func (s *Store) checkRunCreate(p persistence.RunCreateParams) error {
	if err := validRunID(p.ID); err != nil {
		return err
	}
	if err := validName("workflow name", p.Workflow); err != nil {
		return err
	}
	if p.IdempotencyKey != "" {
		if err := validKey(p.IdempotencyKey); err != nil {
			return err
		}
	}
	if err := validPriority(p.Priority); err != nil {
		return err
	}
	if p.Schedule != "" {
		if err := validName("schedule name", p.Schedule); err != nil {
			return err
		}
	}
	if p.Definition != "" {
		if err := validDefinitionVersion(p.Definition); err != nil {
			return err
		}
	}
	if p.ParentRunID != "" || p.ParentStep != "" {
		if err := stepRef(p.ParentRunID, p.ParentStep); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
	}
	return s.validJSON("input", p.Input)
}

// encodeMetadata returns a run's metadata as stored: JSON, within the
// payload limit, of valid UTF-8 keys and values without NUL.
func (s *Store) encodeMetadata(md map[string]string) ([]byte, error) {
	for k, v := range md {
		if !validUTF8NoNUL(k) || !validUTF8NoNUL(v) {
			return nil, invalid("metadata", k, "keys and values must be valid UTF-8 without NUL")
		}
	}
	b, err := json.Marshal(md)
	if err != nil {
		return nil, invalid("metadata", "", err.Error())
	}
	if len(b) > s.maxPayload {
		return nil, &persistence.LimitError{Field: "metadata", Size: len(b), Limit: s.maxPayload}
	}
	return b, nil
}

// runRecord is the run p creates: running now, or pending until a later
// StartAt.
func runRecord(p persistence.RunCreateParams) persistence.Run {
	now := norm(p.Now)
	startAt := now
	if !p.StartAt.IsZero() {
		startAt = norm(p.StartAt)
	}
	status := persistence.RunRunning
	var startedAt *time.Time
	if startAt.After(now) {
		status = persistence.RunPending
	} else {
		startedAt = &now
	}
	run := persistence.Run{
		ID:             p.ID,
		Workflow:       p.Workflow,
		Version:        p.Version,
		Definition:     p.Definition,
		Status:         status,
		Input:          nonEmpty(p.Input),
		IdempotencyKey: p.IdempotencyKey,
		Metadata:       p.Metadata,
		Schedule:       p.Schedule,
		ScheduledTick:  normPtr(p.ScheduledTick),
		StartAt:        startAt,
		CreatedAt:      now,
		StartedAt:      startedAt,
		UpdatedAt:      now,
		Priority:       p.Priority,
		ParentRunID:    p.ParentRunID,
		ParentStep:     p.ParentStep,
	}
	if len(p.Metadata) == 0 {
		run.Metadata = nil
	}
	return run
}

// planGraph checks p's steps (names, queues, dependencies, no cycle) and
// plans their rows: roots queued in a run that starts now, every other
// step waiting.
func planGraph(plan *runPlan, p persistence.RunCreateParams) error {
	index := make(map[string]int, len(p.Steps))
	for i, sp := range p.Steps {
		if err := validName("step name", sp.Name); err != nil {
			return err
		}
		if _, dup := index[sp.Name]; dup {
			return invalid("step name", sp.Name, "declared twice")
		}
		index[sp.Name] = i
		if sp.Queue != "" {
			if err := validName("queue name", sp.Queue); err != nil {
				return err
			}
		}
		if sp.MaxAttempts < 0 {
			return invalid("max attempts", fmt.Sprint(sp.MaxAttempts), "negative")
		}
	}
	plan.dependents = make([][]string, len(p.Steps))
	indeg := make([]int, len(p.Steps))
	for i, sp := range p.Steps {
		seen := make(map[string]bool, len(sp.Deps))
		for _, dep := range sp.Deps {
			j, ok := index[dep]
			switch {
			case !ok:
				return invalid("dependency", dep, fmt.Sprintf("step %q depends on an unknown step", sp.Name))
			case j == i:
				return invalid("dependency", dep, "a step cannot depend on itself")
			case seen[dep]:
				return invalid("dependency", dep, fmt.Sprintf("step %q lists it twice", sp.Name))
			}
			seen[dep] = true
			plan.dependents[j] = append(plan.dependents[j], sp.Name)
			indeg[i]++
		}
	}
	if err := acyclic(p.Steps, plan.dependents, index, indeg); err != nil {
		return err
	}
	now := plan.run.CreatedAt
	for i, sp := range p.Steps {
		st := persistence.StepRun{
			RunID:       p.ID,
			Step:        sp.Name,
			Queue:       sp.Queue,
			Status:      persistence.StepWaiting,
			Deps:        slices.Clone(sp.Deps),
			MaxAttempts: sp.MaxAttempts,
			PendingDeps: len(sp.Deps),
			UpdatedAt:   now,
			Priority:    p.Priority,
		}
		if st.Queue == "" {
			st.Queue = DefaultQueue
		}
		if len(st.Deps) == 0 {
			st.Deps = nil
			if plan.run.Status == persistence.RunRunning {
				st.Status = persistence.StepQueued
				st.QueuedAt = &now
			}
		}
		plan.steps = append(plan.steps, st)
		plan.seqs = append(plan.seqs, i)
	}
	return nil
}

func acyclic(steps []persistence.StepSpec, dependents [][]string, index map[string]int, indeg []int) error {
	deg := slices.Clone(indeg)
	var queue []int
	for i, d := range deg {
		if d == 0 {
			queue = append(queue, i)
		}
	}
	seen := 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		seen++
		for _, name := range dependents[i] {
			j := index[name]
			if deg[j]--; deg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	if seen != len(steps) {
		for i, d := range deg {
			if d > 0 {
				return invalid("dependency", steps[i].Name, "steps depend on each other in a cycle")
			}
		}
	}
	return nil
}

func validUTF8NoNUL(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

func (s *Store) runCreate(ctx context.Context, q querier, plan runPlan) (persistence.RunCreateResult, error) {
	r := plan.run
	if r.IdempotencyKey != "" {
		if res, ok, err := s.runByKey(ctx, q, r, false); ok || err != nil {
			return res, err
		}
	}
	if err := s.insertRuns(ctx, q, []runPlan{plan}); err != nil {
		if !s.d.IsDuplicate(err) {
			return persistence.RunCreateResult{}, err
		}
		// A concurrent create with the same key committed first: read
		// the winner with a locking (current) read.
		if r.IdempotencyKey != "" {
			if res, ok, err := s.runByKey(ctx, q, r, true); ok || err != nil {
				return res, err
			}
		}
		return persistence.RunCreateResult{}, invalid("run id", r.ID, "already used by another run")
	}
	return persistence.RunCreateResult{Run: r, Steps: slices.Clone(plan.steps), Created: true}, nil
}

// runByKey returns the run holding r's idempotency key, if any.
func (s *Store) runByKey(ctx context.Context, q querier, r persistence.Run, lock bool) (persistence.RunCreateResult, bool, error) {
	query := `SELECT ` + runCols + ` FROM workflow_runs WHERE workflow = ? AND idempotency_key = ?`
	if lock {
		query += s.d.ForUpdate
	}
	var rows []runRow
	if err := s.selectAll(ctx, q, &rows, query, r.Workflow, r.IdempotencyKey); err != nil {
		return persistence.RunCreateResult{}, false, err
	}
	if len(rows) == 0 {
		return persistence.RunCreateResult{}, false, nil
	}
	existing, err := rows[0].record()
	if err != nil {
		return persistence.RunCreateResult{}, true, err
	}
	if !bytes.Equal(existing.Input, r.Input) {
		return persistence.RunCreateResult{}, true, &persistence.IdempotencyConflictError{
			Workflow: r.Workflow, Key: r.IdempotencyKey, RunID: existing.ID}
	}
	steps, err := s.stepList(ctx, q, existing.ID)
	if err != nil {
		return persistence.RunCreateResult{}, true, err
	}
	return persistence.RunCreateResult{Run: existing, Steps: steps}, true, nil
}

// insertRuns inserts runs and all their steps, a few multi-row statements
// for any number of runs.
func (s *Store) insertRuns(ctx context.Context, q querier, plans []runPlan) error {
	return s.execAll(ctx, q, s.insertRunsStmts(plans)...)
}

// insertRunsStmts returns the statements that insert plans' runs and
// steps.
func (s *Store) insertRunsStmts(plans []runPlan) []stmt {
	runs := make([][]any, len(plans))
	var steps, waiting [][]any
	for i, plan := range plans {
		r, md := plan.run, plan.metadata
		runs[i] = []any{r.ID, r.Workflow, r.Version, string(r.Status), nullBytes(r.Input), nil, nil, nullString(r.IdempotencyKey),
			nullBytes(md), r.Schedule, s.tp(r.ScheduledTick), s.t(r.StartAt), s.t(r.CreatedAt),
			s.tp(r.StartedAt), nil, s.t(r.UpdatedAt), r.Definition, r.Priority, nil, r.ParentRunID, r.ParentStep}
		for j, st := range plan.steps {
			if st.Status == persistence.StepWaiting && st.Attempt == 0 && st.Fence == "" &&
				st.LeaseExpiresAt == nil && st.QueuedAt == nil && st.StartedAt == nil {
				// Most steps of a new run: attempt, fence, lease, start,
				// worker and claim left to their column defaults (0, '',
				// NULL), which is less for the server to parse.
				waiting = append(waiting, []any{st.RunID, st.Step, plan.seqs[j], plan.run.Workflow, st.Queue, string(st.Status),
					joinNames(st.Deps), joinNames(plan.dependents[j]), st.MaxAttempts, st.PendingDeps, s.t(st.UpdatedAt), st.Priority})
				continue
			}
			// attempt, fence, lease, started_at, worker and claimed_at
			// are set for a root step claimed at create (RunCreateMany's
			// ClaimRoots).
			worker, claimedAt := "", (*time.Time)(nil)
			if st.Status == persistence.StepRunning {
				worker, claimedAt = plan.claimWorker, st.StartedAt
			}
			steps = append(steps, []any{st.RunID, st.Step, plan.seqs[j], plan.run.Workflow, st.Queue, string(st.Status),
				joinNames(st.Deps), joinNames(plan.dependents[j]), st.Attempt, st.MaxAttempts, st.PendingDeps,
				st.Fence, s.tp(st.LeaseExpiresAt), s.tp(st.QueuedAt), s.tp(st.StartedAt), s.t(st.UpdatedAt),
				worker, s.tp(claimedAt), st.Priority})
		}
	}
	// Runs first (their steps refer to them), in one round trip on MySQL.
	stmts := valuesStmts(`INSERT INTO workflow_runs (`+runCols+`) VALUES `, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", "", runs)
	stmts = append(stmts, valuesStmts(`INSERT INTO step_runs (run_id, step, seq, workflow, queue, status, deps, dependents,
		attempt, max_attempts, pending_deps, comp_attempt, fence, lease_expires_at, queued_at, started_at, updated_at,
		worker, claimed_at, priority) VALUES `, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?)", "", steps)...)
	stmts = append(stmts, valuesStmts(`INSERT INTO step_runs (run_id, step, seq, workflow, queue, status, deps, dependents,
		max_attempts, pending_deps, updated_at, priority) VALUES `, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", "", waiting)...)
	return stmts
}

// RunCreateMany implements persistence.Store: runs without an idempotency
// key are inserted together (a couple of multi-row statements for the
// whole batch); runs with one go through RunCreate's path, in the same
// transaction.
func (s *Store) RunCreateMany(ctx context.Context, mp persistence.RunCreateManyParams) ([]persistence.RunCreateOutcome, error) {
	ps, rc := mp.Items, mp.ClaimRoots
	if len(ps) > maxBatch {
		return nil, fmt.Errorf("sqlstore: run create: %d items, over the batch limit of %d", len(ps), maxBatch)
	}
	if rc != nil {
		if err := validToken("fence", rc.Fence, MaxFenceLen); err != nil {
			return nil, err
		}
		if err := validNodeToken("worker", rc.Worker, MaxWorkerLen); err != nil {
			return nil, err
		}
	}
	out := make([]persistence.RunCreateOutcome, len(ps))
	plans := make([]runPlan, len(ps))
	pre := make([]error, len(ps))
	for i, p := range ps {
		plans[i], pre[i] = s.planRun(p)
	}
	// Claim at create: decided before the transaction (which may be
	// retried), from the plans alone.
	claims := claimAtCreate(plans, pre, newClaimBudget(rc))
	err := s.write(ctx, func(q querier) error {
		var bulk []runPlan
		var bulkIdx []int
		for i := range out {
			out[i] = persistence.RunCreateOutcome{Err: pre[i]}
			if pre[i] != nil {
				continue
			}
			if plans[i].run.IdempotencyKey != "" {
				res, err := s.runCreate(ctx, q, plans[i])
				if err != nil && !isItemErr(err) {
					return err
				}
				out[i] = persistence.RunCreateOutcome{Result: res, Err: err}
				continue
			}
			bulk = append(bulk, plans[i])
			bulkIdx = append(bulkIdx, i)
		}
		if len(bulk) > 0 {
			// With the COMMIT, in one round trip on MySQL.
			if err := s.execLater(ctx, q, s.insertRunsStmts(bulk)...); err != nil {
				return err
			}
			for j, i := range bulkIdx {
				out[i].Result = persistence.RunCreateResult{Run: bulk[j].run, Steps: slices.Clone(bulk[j].steps), Created: true}
			}
		}
		// Answers for the roots claimed in runs this transaction created (a
		// run that existed for its key keeps its own steps).
		for i := range out {
			if out[i].Err != nil || !out[i].Result.Created {
				continue
			}
			for _, j := range claims[i] {
				out[i].Claimed = append(out[i].Claimed, persistence.StepClaimResult{Step: plans[i].steps[j], Run: plans[i].run})
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("run create", err)
	}
	for i := range out {
		out[i].Err = wrap("run create", out[i].Err)
	}
	return out, nil
}

// claimAtCreate claims, within budget, the queued root steps of the runs
// that start at once, in their plans: each such step is planned running,
// in its first attempt, for the budget's fence and worker. It returns the
// claimed steps' indexes in each plan.
func claimAtCreate(plans []runPlan, pre []error, budget *claimBudget) [][]int {
	claims := make([][]int, len(plans))
	if budget == nil {
		return claims
	}
	for i := range plans {
		if pre[i] != nil || plans[i].run.Status != persistence.RunRunning {
			continue
		}
		for j := range plans[i].steps {
			st := &plans[i].steps[j]
			if st.Status != persistence.StepQueued || !budget.take(plans[i].run.Workflow, st.Step, st.Queue) {
				continue
			}
			started, lease := plans[i].run.CreatedAt, budget.lease
			st.Status = persistence.StepRunning
			st.Attempt = 1
			st.Fence = budget.fence
			st.LeaseExpiresAt = &lease
			st.StartedAt = &started
			claims[i] = append(claims[i], j)
		}
		if len(claims[i]) > 0 {
			plans[i].claimWorker = budget.worker
		}
	}
	return claims
}

// isItemErr reports an error about one item that does not spoil its batch.
func isItemErr(err error) bool {
	return errors.Is(err, persistence.ErrIdempotencyConflict) || errors.Is(err, persistence.ErrInvalid) ||
		errors.Is(err, persistence.ErrTooLarge)
}

package faults

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// checkInvariants checks, for the runs ids, what dagflow promises
// whatever failed:
//
//  1. every run reaches a terminal state (within timeout);
//  2. at most one success per (run, step), for steps and compensations;
//  3. no effect twice: one effects row per (run, step, kind), keyed by the
//     stable idempotency key, and every succeeded step (compensated step)
//     made its effect (undo effect), except wait and sleep steps, which
//     run no handler and make none;
//  4. no step started before its dependencies succeeded;
//  5. compensations in a valid reverse order: a step's compensation
//     starts only after the compensations of its completed dependents
//     finished, and only for a step that succeeded;
//  6. once idle, no running step has an expired lease, and Redis holds
//     only tasks that the store says are queued, running, retrying or
//     compensating.
func checkInvariants(t *testing.T, c *cluster, ids []string, timeout time.Duration) map[string]persistence.Run {
	t.Helper()
	runs := c.waitRuns(ids, timeout)
	wfs, err := workflows(nil)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]*dag.Workflow{}
	for _, w := range wfs {
		defs[w.Name()] = w
	}
	ctx := context.Background()
	for _, id := range ids {
		run := runs[id]
		w := defs[run.Workflow]
		sts, err := c.store.StepList(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := c.store.AttemptList(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		status := map[string]persistence.StepStatus{}
		for _, s := range sts {
			status[s.Step] = s.Status
		}
		// 2. One success per step and per compensation.
		succ := map[string]persistence.Attempt{}
		for _, a := range atts {
			if a.Outcome != persistence.OutcomeSucceeded && a.Outcome != persistence.OutcomeSkipped {
				continue
			}
			k := a.Step + "/" + string(a.Kind)
			if prev, dup := succ[k]; dup {
				t.Errorf("run %s: %s %q succeeded twice (attempts %d and %d)", id, a.Kind, a.Step, prev.Attempt, a.Attempt)
			}
			succ[k] = a
		}
		// 3. No effect twice; every success has its effect.
		effs := c.effects(id)
		var n int
		if err := c.db.QueryRow(`SELECT COUNT(*) FROM effects WHERE run_id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != len(effs) {
			t.Errorf("run %s: %d effect rows for %d (step, kind) pairs: an effect was made twice under different keys", id, n, len(effs))
		}
		for k, e := range effs {
			if e.Key != id+"/"+e.Step {
				t.Errorf("run %s: effect %s made with key %q, want the stable %q", id, k, e.Key, id+"/"+e.Step)
			}
		}
		for _, s := range sts {
			_, did := effs[s.Step+"/"+effectDo]
			_, undid := effs[s.Step+"/"+effectUndo]
			if d := w.Step(s.Step); d != nil && d.Wait != nil {
				// A wait or sleep step runs no handler: it has no effect.
				if did || undid {
					t.Errorf("run %s: wait step %q made an effect", id, s.Step)
				}
				continue
			}
			switch s.Status {
			case persistence.StepSucceeded, persistence.StepCompensating, persistence.StepCompensated, persistence.StepCompensationFailed:
				if !did {
					t.Errorf("run %s: step %q is %s but made no effect", id, s.Step, s.Status)
				}
			}
			if s.Status == persistence.StepCompensated && !undid {
				t.Errorf("run %s: step %q is compensated but made no undo effect", id, s.Step)
			}
			if undid && s.Status != persistence.StepCompensated && s.Status != persistence.StepCompensating && s.Status != persistence.StepCompensationFailed {
				t.Errorf("run %s: step %q was undone but is %s", id, s.Step, s.Status)
			}
		}
		// 4 and 5: from the handlers' own record of their calls.
		invs := c.invocationList(id)
		for _, inv := range invs {
			d := w.Step(inv.Step)
			if d == nil {
				t.Errorf("run %s: invocation of unknown step %q", id, inv.Step)
				continue
			}
			if inv.Kind == effectDo {
				for _, dep := range d.Deps {
					a, ok := succ[dep+"/"+string(persistence.AttemptForward)]
					if !ok || a.FinishedAt == nil || a.FinishedAt.After(inv.Started) {
						t.Errorf("run %s: step %q (attempt %d) started at %v before its dependency %q succeeded (%v)",
							id, inv.Step, inv.Attempt, inv.Started.Format(time.RFC3339Nano), dep, a.FinishedAt)
					}
				}
				continue
			}
			if _, ok := succ[inv.Step+"/"+string(persistence.AttemptForward)]; !ok {
				t.Errorf("run %s: compensation of %q ran but the step never succeeded", id, inv.Step)
			}
			for _, dependent := range w.Dependents(inv.Step) {
				dd := w.Step(dependent)
				if dd.Compensation == nil {
					continue
				}
				if _, ok := succ[dependent+"/"+string(persistence.AttemptForward)]; !ok {
					continue // never completed: nothing to undo first
				}
				a, ok := succ[dependent+"/"+string(persistence.AttemptCompensation)]
				if !ok || a.FinishedAt == nil || a.FinishedAt.After(inv.Started) {
					t.Errorf("run %s: compensation of %q started at %v before the compensation of its dependent %q finished (%v)",
						id, inv.Step, inv.Started.Format(time.RFC3339Nano), dependent, a.FinishedAt)
				}
			}
		}
		if run.Status == persistence.RunCompensated {
			for _, s := range sts {
				if d := w.Step(s.Step); d.Compensation != nil && s.Status == persistence.StepSucceeded {
					t.Errorf("run %s is compensated but step %q is still succeeded (not undone)", id, s.Step)
				}
			}
		}
	}
	// 6. Idle: no expired running lease; Redis only holds live tasks.
	var why string
	testenv.Eventually(t, 20*time.Second, func() bool {
		why = c.idleProblem(ctx)
		return why == ""
	}, "idle state: %s", &lazy{&why})
	return runs
}

// lazy prints a string that is filled in later.
type lazy struct{ s *string }

func (l *lazy) String() string { return *l.s }

// idleProblem returns what is wrong with the idle state, or "".
func (c *cluster) idleProblem(ctx context.Context) string {
	var n int
	if err := c.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM step_runs WHERE status IN ('running', 'compensating')
		AND lease_expires_at IS NOT NULL AND lease_expires_at < ?`, time.Now().UTC()).Scan(&n); err != nil {
		return err.Error()
	}
	if n > 0 {
		return fmt.Sprintf("%d running steps with an expired lease", n)
	}
	q, err := queue.New(queue.Config{Client: c.rdb, Prefix: c.prefix})
	if err != nil {
		return err.Error()
	}
	defer q.Close()
	for _, state := range []queue.State{queue.StateReady, queue.StateDelayed, queue.StateLeased} {
		tasks, err := q.List(ctx, "default", state, 0, 1000)
		if err != nil {
			return err.Error()
		}
		for _, task := range tasks {
			run, step, comp, err := parseTask(task.ID)
			if err != nil {
				return err.Error()
			}
			s, err := c.store.StepGet(ctx, run, step)
			if err != nil {
				return fmt.Sprintf("task %s (%s) names no step: %v", task.ID, state, err)
			}
			ok := slices.Contains([]persistence.StepStatus{persistence.StepQueued, persistence.StepRunning, persistence.StepRetrying}, s.Status)
			if comp {
				ok = s.Status == persistence.StepCompensating
			}
			if !ok {
				return fmt.Sprintf("Redis holds task %s (%s) of a step that is %s", task.ID, state, s.Status)
			}
		}
	}
	return ""
}

// parseTask splits "<run>/<step>/<attempt>" (or "c<attempt>").
func parseTask(id string) (run, step string, comp bool, err error) {
	parts := strings.Split(id, "/")
	if len(parts) != 3 {
		return "", "", false, fmt.Errorf("malformed task id %q", id)
	}
	a := parts[2]
	comp = strings.HasPrefix(a, "c")
	if _, err := strconv.Atoi(strings.TrimPrefix(a, "c")); err != nil {
		return "", "", false, fmt.Errorf("malformed task id %q", id)
	}
	return parts[0], parts[1], comp, nil
}

// invocationRow is one handler call.
type invocationRow struct {
	Step, Kind string
	Attempt    int
	Pid        int
	Started    time.Time
	Outcome    string
}

func (c *cluster) invocationList(run string) []invocationRow {
	c.t.Helper()
	rows, err := c.db.Query(`SELECT step, kind, attempt, pid, started_at, COALESCE(outcome, '') FROM invocations WHERE run_id = ? ORDER BY id`, run)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	var out []invocationRow
	for rows.Next() {
		var r invocationRow
		if err := rows.Scan(&r.Step, &r.Kind, &r.Attempt, &r.Pid, &r.Started, &r.Outcome); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

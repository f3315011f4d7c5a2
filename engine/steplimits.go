package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// Per-step limits (dag.ConcurrencyKey, dag.RateLimit): a queue that
// holds a registered step with limits of its own is made a PerTask queue
// (queue.Limit.PerTask), and the forward tasks of its steps carry their
// limit (queue.TaskLimit), with the keys evaluated on the run's input
// (decoded, with a codec) when the task is enqueued. The dequeue script
// holds them before the lease, as it holds a queue's limits. A queue
// without such a step pays nothing: its tasks are enqueued as they were,
// without a store read.

// markStepLimited records that queue holds a step with limits. Called
// with e.mu held.
func (e *Engine) markStepLimited(queue string) {
	if e.stepLimited == nil {
		e.stepLimited = map[string]bool{}
	}
	e.stepLimited[queue] = true
	e.q.SetPerTask(queue)
}

// markPlanLimits marks the queues of p's steps with limits, for a plan
// read from the store (a version this node did not register, or a
// workflow it does not have): their tasks then carry their limits when
// this node enqueues them, and are never claimed here at create or
// release, past the dequeue that holds the limits.
func (e *Engine) markPlanLimits(p *dag.Workflow) {
	var limited []string
	for _, s := range p.Steps() {
		if s.Limits != nil {
			limited = append(limited, s.Queue)
		}
	}
	if len(limited) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range limited {
		if !e.stepLimited[name] {
			e.markStepLimited(name)
		}
	}
}

// markStoredLimits marks the queues of the steps with limits in the
// current stored version of every workflow, at start: a node learns the
// limits of the workflows it does not register (started through the API,
// or registered by a newer deploy) before it enqueues or claims any of
// their steps. Older versions are marked as planFor reads them. A store
// that cannot list them is logged, not fatal: planFor marks them later.
func (e *Engine) markStoredLimits(ctx context.Context) {
	defs, err := e.store.DefinitionList(ctx, persistence.DefinitionListParams{})
	if err != nil {
		e.log.Warn("the stored workflow definitions could not be read for their step limits; they are learnt as runs of them are read", "err", err)
		return
	}
	for _, r := range defs {
		var d dag.Definition
		if err := json.Unmarshal(r.Spec, &d); err != nil {
			continue
		}
		if p, err := dag.FromDefinition(d, nil); err == nil {
			e.markPlanLimits(p)
		}
	}
}

// isStepLimited reports whether queue holds a registered step with limits.
func (e *Engine) isStepLimited(queue string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.stepLimited[queue]
}

// anyStepLimited reports whether some registered step has limits.
func (e *Engine) anyStepLimited() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.stepLimited) > 0
}

// withStepLimits gives the forward tasks of byQueue whose step has limits
// their queue.TaskLimit, reading their runs from known or else from the
// store (once per run). A task whose run or keys cannot be read is left
// out, and logged: enqueued without its limit it would bypass it; the
// reconciler enqueues it later.
func (e *Engine) withStepLimits(ctx context.Context, byQueue map[string][]queue.Item, known map[string]persistence.Run) {
	if !e.anyStepLimited() {
		return
	}
	runs := map[string]*persistence.Run{}
	for name, items := range byQueue {
		if !e.isStepLimited(name) {
			continue
		}
		kept := items[:0]
		for _, it := range items {
			lim, err := e.stepLimit(ctx, it.ID, known, runs)
			if err != nil {
				e.log.Warn("a step's limit could not be read; its task is enqueued later by the reconciler",
					"task", it.ID, "queue", name, "err", err)
				continue
			}
			it.Limit = lim
			kept = append(kept, it)
		}
		byQueue[name] = kept
	}
}

// stepLimit returns the limit of task id (nil for none).
func (e *Engine) stepLimit(ctx context.Context, id string, known map[string]persistence.Run, runs map[string]*persistence.Run) (*queue.TaskLimit, error) {
	ref, err := parseTaskID(id)
	if err != nil || ref.Compensation {
		return nil, nil // limits hold the forward steps only
	}
	run, ok := runs[ref.RunID]
	if !ok {
		if r, ok := known[ref.RunID]; ok {
			run = &r
		} else {
			r, err := e.store.RunGet(ctx, ref.RunID)
			if err != nil {
				return nil, fmt.Errorf("read run %s: %w", ref.RunID, err)
			}
			run = &r
		}
		runs[ref.RunID] = run
	}
	plan, err := e.planFor(ctx, *run)
	if err != nil {
		return nil, err
	}
	if plan == nil {
		return nil, nil
	}
	s := plan.Step(ref.Step)
	if s == nil || s.Limits == nil {
		return nil, nil
	}
	var key, rateKey string
	if l := s.Limits; l.Key != "" || l.RateKey != "" {
		// The keys are read from the input the handler sees, not from
		// the codec's encoding of it (the same for every run).
		input, err := e.decodePayload(ctx, codec.Input, run.Input)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", run.ID, err)
		}
		key, rateKey, err = s.LimitKeys(e.exprBudget(ctx), input)
		if err != nil {
			// A key that does not evaluate is the empty key: the step is
			// still held by its limit, with the others whose key is missing.
			e.log.Warn("a step's limit key did not evaluate; the step counts under the empty key", "task", id, "err", err)
		}
	}
	l := s.Limits
	tl := &queue.TaskLimit{Rate: l.Rate, Per: l.Per, Burst: l.Burst}
	if l.Concurrency > 0 {
		// Steps of the queue with the same key expression share its slots.
		tl.Concurrency, tl.Key = l.Concurrency, l.Key+"="+key
	}
	if l.Rate > 0 {
		tl.RateKey = run.Workflow + "/" + ref.Step
		if l.RateKey != "" {
			tl.RateKey += "=" + rateKey
		}
	}
	return tl, nil
}

// whyStepLimited tells, for a queued step with limits of its own,
// whether its key is at its concurrency limit (WaitLimited, naming the
// key's value) or its rate limits it; it reports whether it said so.
func (e *Engine) whyStepLimited(ctx context.Context, w *StepWait) bool {
	if !e.isStepLimited(w.Queue) {
		return false
	}
	run, err := e.store.RunGet(ctx, w.RunID)
	if err != nil {
		return false
	}
	plan, err := e.planFor(ctx, run)
	if err != nil || plan == nil {
		return false
	}
	s := plan.Step(w.Step)
	if s == nil || s.Limits == nil {
		return false
	}
	tl, err := e.stepLimit(ctx, taskRef{RunID: w.RunID, Step: w.Step, Attempt: 1}.String(),
		map[string]persistence.Run{run.ID: run}, map[string]*persistence.Run{})
	if err != nil || tl == nil {
		return false
	}
	l := s.Limits
	if tl.Concurrency > 0 {
		held, _, err := e.q.KeyHeld(ctx, w.Queue, tl.Key)
		if err == nil && held >= int64(tl.Concurrency) {
			value := strings.TrimPrefix(tl.Key, l.Key+"=")
			w.Reason = WaitLimited
			w.Detail = fmt.Sprintf("step %q is at its concurrency limit for key %s = %q: %d of %d running on all nodes; it starts when one ends",
				w.Step, l.Key, value, held, tl.Concurrency)
			return true
		}
	}
	if l.Rate > 0 {
		w.Reason = WaitLimited
		w.Detail = fmt.Sprintf("step %q is rate limited to %d per %v", w.Step, l.Rate, l.Per)
		if l.RateKey != "" {
			_, value, _ := strings.Cut(tl.RateKey, "=")
			w.Detail += fmt.Sprintf(" for key %s = %q", l.RateKey, value)
		}
		w.Detail += "; it starts when its turn comes"
		return true
	}
	return false
}

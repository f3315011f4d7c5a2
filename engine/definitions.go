package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
)

// Workflow definitions in the store: every node records the plans of the
// workflows it registers (Start, or Register after Start), so that any
// node — one without the handlers too — can list them, draw them and
// start runs of them, and every run follows the plan it started with
// (persistence.Run.Definition), whatever version the node that runs a
// step has registered since.

// WorkflowDefinition is one version of a workflow as the engine knows it.
type WorkflowDefinition struct {
	// Name is the workflow's name and Version its plan's hash
	// (dag.Definition.Hash); Declared is the version the workflow
	// declares (dag.Version).
	Name     string
	Version  string
	Declared int
	// Definition is the plan.
	Definition dag.Definition
	// CreatedAt is when a node first registered this version,
	// RegisteredAt when one last did (zero for a version registered on
	// this node that is not stored yet: before Start).
	CreatedAt    time.Time
	RegisteredAt time.Time
	// Handlers reports that this node registered the workflow at this
	// version, with its handlers.
	Handlers bool
}

// Definitions returns the current version of every workflow known to the
// store or registered on this node, by name. The current version is the
// one registered last (a deploy's, or a rollback's).
func (e *Engine) Definitions(ctx context.Context) ([]WorkflowDefinition, error) {
	rows, err := e.store.DefinitionList(ctx, persistence.DefinitionListParams{})
	if err != nil {
		return nil, fmt.Errorf("engine: list workflow definitions: %w", err)
	}
	out := make([]WorkflowDefinition, 0, len(rows))
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Workflow] = true
		if wd, ok := e.workflowDefinition(r); ok {
			out = append(out, wd)
		}
	}
	for _, rw := range e.registeredPlans() {
		if !seen[rw.Name] {
			out = append(out, rw)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DefinitionVersions returns every stored version of the named workflow,
// the one registered last first (with this node's own version when it is
// not stored yet). An unknown workflow gives an error wrapping
// ErrUnknownWorkflow.
func (e *Engine) DefinitionVersions(ctx context.Context, name string) ([]WorkflowDefinition, error) {
	rows, err := e.store.DefinitionList(ctx, persistence.DefinitionListParams{Workflow: name})
	if err != nil {
		return nil, fmt.Errorf("engine: list versions of workflow %q: %w", name, err)
	}
	out := make([]WorkflowDefinition, 0, len(rows)+1)
	for _, r := range rows {
		if wd, ok := e.workflowDefinition(r); ok {
			out = append(out, wd)
		}
	}
	if _, hash := e.registered(name); hash != "" {
		stored := false
		for _, wd := range out {
			stored = stored || wd.Version == hash
		}
		if !stored {
			for _, rw := range e.registeredPlans() {
				if rw.Name == name {
					out = append([]WorkflowDefinition{rw}, out...)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, &WorkflowError{Workflow: name, Err: ErrUnknownWorkflow}
	}
	return out, nil
}

// Definition returns one stored version of the named workflow: the plan
// a run of that version follows. A version that is not stored gives an
// error wrapping persistence.ErrDefinitionNotFound, one this binary
// cannot read an error saying why.
func (e *Engine) Definition(ctx context.Context, name, version string) (WorkflowDefinition, error) {
	r, err := e.store.DefinitionGet(ctx, name, version)
	if err != nil {
		return WorkflowDefinition{}, fmt.Errorf("engine: workflow %q version %s: %w", name, version, err)
	}
	var d dag.Definition
	if err := json.Unmarshal(r.Spec, &d); err != nil {
		return WorkflowDefinition{}, fmt.Errorf("engine: workflow %q version %s cannot be read: %w", name, version, err)
	}
	return e.described(r, d), nil
}

// workflowDefinition decodes a stored version; one this binary cannot
// read (a newer binary's form?) is left out of listings, with a warning,
// rather than fail them.
func (e *Engine) workflowDefinition(r persistence.Definition) (WorkflowDefinition, bool) {
	var d dag.Definition
	if err := json.Unmarshal(r.Spec, &d); err != nil {
		e.log.Warn("a stored workflow definition cannot be read; left out", "workflow", r.Workflow, "version", r.Version, "err", err)
		return WorkflowDefinition{}, false
	}
	return e.described(r, d), true
}

// described is a stored version with its plan decoded.
func (e *Engine) described(r persistence.Definition, d dag.Definition) WorkflowDefinition {
	_, hash := e.registered(r.Workflow)
	return WorkflowDefinition{
		Name: r.Workflow, Version: r.Version, Declared: r.Declared, Definition: d,
		CreatedAt: r.CreatedAt, RegisteredAt: r.RegisteredAt, Handlers: hash == r.Version,
	}
}

// registeredPlans describes the workflows registered on this node.
func (e *Engine) registeredPlans() []WorkflowDefinition {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]WorkflowDefinition, 0, len(e.workflows))
	for name, w := range e.workflows {
		d := w.Definition()
		out = append(out, WorkflowDefinition{Name: name, Version: e.hashes[name], Declared: d.Declared, Definition: d, Handlers: true})
	}
	return out
}

// registered returns the workflow registered on this node under name and
// its plan's hash; nil and "" when there is none.
func (e *Engine) registered(name string) (*dag.Workflow, string) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.workflows[name], e.hashes[name]
}

// storeDefinitions records the plans of workflows.
func (e *Engine) storeDefinitions(ctx context.Context, workflows []*dag.Workflow) error {
	now := e.clock.Now()
	for _, w := range workflows {
		d := w.Definition()
		spec, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("engine: workflow %q: definition: %w", w.Name(), err)
		}
		_, err = e.store.DefinitionUpsert(ctx, persistence.Definition{
			Workflow: w.Name(), Version: d.Hash(), Declared: d.Declared, Spec: spec, RegisteredAt: now,
		})
		if err != nil {
			return fmt.Errorf("engine: store the definition of workflow %q: %w", w.Name(), err)
		}
	}
	return nil
}

// registeredWorkflows returns the workflows registered on this node.
func (e *Engine) registeredWorkflows() []*dag.Workflow {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*dag.Workflow, 0, len(e.workflows))
	for _, w := range e.workflows {
		out = append(out, w)
	}
	return out
}

// plans caches the plans built from stored definitions: by (workflow,
// version) for runs that follow another version than this node's (a
// version never changes, so they are kept), and by workflow for the
// current version of a workflow this node only knows from the store
// (Trigger on a node without its handlers; read again after
// currentPlanTTL, by one caller at a time). Register empties it: a plan
// built before holds none of the new handlers.
type plans struct {
	mu       sync.Mutex
	versions map[planKey]*dag.Workflow
	current  map[string]currentPlan
	// gen counts resets: a plan built from a registration that a
	// Register replaced meanwhile is not cached.
	gen uint64
	// refresh lets one caller at a time read a current version, so that
	// the triggers waiting on an expired entry cost one query.
	refresh sync.Mutex
}

type planKey struct{ workflow, version string }

// currentPlan is a workflow's current version as last read; plan is nil
// for a workflow the store did not know then.
type currentPlan struct {
	plan    *dag.Workflow
	version string
	read    time.Time
}

// maxCachedPlans bounds each cache: past it, the cache starts over
// (plans are rebuilt from the store on demand).
const maxCachedPlans = 1024

// currentPlanTTL is how long a node without a workflow's handlers starts
// its runs on the version it read last (or answers that the workflow is
// unknown) before it reads the current version again: a deploy reaches
// such nodes within it. The age is wall-clock time, not the engine's
// Clock: it measures a cache, not a due time.
const currentPlanTTL = 2 * time.Second

// unknownPlanTTL is how long a workflow the store did not know stays
// unknown to such a node: short, so that a workflow is known within a
// moment of its first node's start, and enough that a caller repeating a
// wrong name does not cost a query per call.
const unknownPlanTTL = 500 * time.Millisecond

func (p *plans) reset() {
	p.mu.Lock()
	p.versions, p.current = nil, nil
	p.gen++
	p.mu.Unlock()
}

// planFor returns the plan a run follows: the registered workflow when
// the run started on its version (or on none recorded: runs created
// before versions were recorded follow each node's own version), else
// the run's version from the store, with this node's handlers where it
// has them. It returns nil for a workflow this node neither has nor
// finds. A version the store no longer has falls back, with a warning,
// to the registered workflow (the same steps and handlers, perhaps other
// conditions or policies); a store that does not answer (after
// readVersion's tries) is an error, and the caller leaves the step for
// later, at the cost of its attempt, rather than follow the wrong plan.
func (e *Engine) planFor(ctx context.Context, run persistence.Run) (*dag.Workflow, error) {
	w, hash := e.registered(run.Workflow)
	if run.Definition == "" || run.Definition == hash {
		return w, nil
	}
	key := planKey{run.Workflow, run.Definition}
	e.plans.mu.Lock()
	p, gen := e.plans.versions[key], e.plans.gen
	e.plans.mu.Unlock()
	if p == nil {
		// Read again after gen: a Register that reset the cache before
		// this point is seen, one after it keeps this plan out.
		w, _ = e.registered(run.Workflow)
	}
	if p != nil {
		return p, nil
	}
	r, err := e.readVersion(ctx, run.Workflow, run.Definition)
	switch {
	case errors.Is(err, persistence.ErrDefinitionNotFound):
		e.log.Warn("the run's workflow version is not in the store; following this node's version",
			"run_id", run.ID, "workflow", run.Workflow, "version", run.Definition, "node_version", hash)
		return w, nil
	case err != nil:
		return nil, fmt.Errorf("engine: run %s: read version %s of workflow %q: %w", run.ID, run.Definition, run.Workflow, err)
	}
	var d dag.Definition
	if err = json.Unmarshal(r.Spec, &d); err == nil {
		p, err = dag.FromDefinition(d, w)
	}
	if err == nil {
		e.markPlanLimits(p)
	}
	if err != nil {
		// A definition this binary cannot read (a newer binary's?):
		// the node's own version is the best it can follow.
		e.log.Warn("the run's workflow version cannot be read; following this node's version",
			"run_id", run.ID, "workflow", run.Workflow, "version", run.Definition, "node_version", hash, "err", err)
		return w, nil
	}
	e.plans.mu.Lock()
	if e.plans.gen == gen {
		if e.plans.versions == nil || len(e.plans.versions) >= maxCachedPlans {
			e.plans.versions = map[planKey]*dag.Workflow{}
		}
		e.plans.versions[key] = p
	}
	e.plans.mu.Unlock()
	return p, nil
}

// versionReadTries is how often planFor reads a version before it gives
// the step up for later: the step holds an attempt meanwhile, so a blip
// of the store must not cost it one.
var versionReadTries = []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, time.Second}

// readVersion reads one stored version, trying again over a blip of the
// store; a version that does not exist is answered at once.
func (e *Engine) readVersion(ctx context.Context, workflow, version string) (persistence.Definition, error) {
	var r persistence.Definition
	var err error
	for _, wait := range versionReadTries {
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return r, err
			}
		}
		r, err = e.store.DefinitionGet(ctx, workflow, version)
		if err == nil || errors.Is(err, persistence.ErrDefinitionNotFound) {
			return r, err
		}
	}
	return r, err
}

// triggerPlan returns the plan a new run of workflow follows and its
// version: this node's registered workflow, or the current stored
// definition for a workflow this node does not have.
func (e *Engine) triggerPlan(ctx context.Context, workflow string) (*dag.Workflow, string, error) {
	if w, hash := e.registered(workflow); w != nil {
		return w, hash, nil
	}
	c, ok := e.plans.fresh(workflow)
	if !ok {
		e.plans.refresh.Lock()
		defer e.plans.refresh.Unlock()
		if c, ok = e.plans.fresh(workflow); !ok {
			var err error
			if c, err = e.readCurrent(ctx, workflow); err != nil {
				return nil, "", err
			}
		}
	}
	if c.plan == nil {
		return nil, "", &WorkflowError{Workflow: workflow, Err: ErrUnknownWorkflow}
	}
	return c.plan, c.version, nil
}

// fresh returns the cached current version of workflow if it was read
// within currentPlanTTL.
func (p *plans) fresh(workflow string) (currentPlan, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.current[workflow]
	ttl := currentPlanTTL
	if c.plan == nil {
		ttl = unknownPlanTTL
	}
	return c, ok && time.Since(c.read) < ttl
}

// readCurrent reads workflow's current version from the store (one index
// lookup; the plan is rebuilt only when the version changed) and caches
// it, an unknown workflow included.
func (e *Engine) readCurrent(ctx context.Context, workflow string) (currentPlan, error) {
	now := time.Now()
	r, err := e.store.DefinitionCurrent(ctx, workflow)
	var c currentPlan
	switch {
	case errors.Is(err, persistence.ErrDefinitionNotFound), errors.Is(err, persistence.ErrInvalid):
		c = currentPlan{read: now}
	case err != nil:
		return currentPlan{}, fmt.Errorf("engine: workflow %q: read its definition: %w", workflow, err)
	default:
		e.plans.mu.Lock()
		old := e.plans.current[workflow]
		e.plans.mu.Unlock()
		if old.plan != nil && old.version == r.Version {
			c = currentPlan{plan: old.plan, version: r.Version, read: now}
			break
		}
		var d dag.Definition
		if err := json.Unmarshal(r.Spec, &d); err != nil {
			return currentPlan{}, fmt.Errorf("engine: workflow %q version %s: stored definition: %w", workflow, r.Version, err)
		}
		p, err := dag.FromDefinition(d, nil)
		if err != nil {
			return currentPlan{}, fmt.Errorf("engine: workflow %q version %s: stored definition: %w", workflow, r.Version, err)
		}
		e.markPlanLimits(p)
		c = currentPlan{plan: p, version: r.Version, read: now}
	}
	e.plans.mu.Lock()
	if e.plans.current == nil || len(e.plans.current) >= maxCachedPlans {
		e.plans.current = map[string]currentPlan{}
	}
	e.plans.current[workflow] = c
	e.plans.mu.Unlock()
	return c, nil
}

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
		wd, err := e.workflowDefinition(r)
		if err != nil {
			return nil, err
		}
		seen[r.Workflow] = true
		out = append(out, wd)
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
		wd, err := e.workflowDefinition(r)
		if err != nil {
			return nil, err
		}
		out = append(out, wd)
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

func (e *Engine) workflowDefinition(r persistence.Definition) (WorkflowDefinition, error) {
	var d dag.Definition
	if err := json.Unmarshal(r.Spec, &d); err != nil {
		return WorkflowDefinition{}, fmt.Errorf("engine: workflow %q version %s: stored definition: %w", r.Workflow, r.Version, err)
	}
	_, hash := e.registered(r.Workflow)
	return WorkflowDefinition{
		Name: r.Workflow, Version: r.Version, Declared: r.Declared, Definition: d,
		CreatedAt: r.CreatedAt, RegisteredAt: r.RegisteredAt, Handlers: hash == r.Version,
	}, nil
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

// storeDefinitions records the plans of the given registered workflows
// (all of them when names is empty).
func (e *Engine) storeDefinitions(ctx context.Context, names ...string) error {
	now := e.clock.Now()
	for _, wd := range e.registeredPlans() {
		if len(names) > 0 && !contains(names, wd.Name) {
			continue
		}
		spec, err := json.Marshal(wd.Definition)
		if err != nil {
			return fmt.Errorf("engine: workflow %q: definition: %w", wd.Name, err)
		}
		_, err = e.store.DefinitionUpsert(ctx, persistence.Definition{
			Workflow: wd.Name, Version: wd.Version, Declared: wd.Declared, Spec: spec, RegisteredAt: now,
		})
		if err != nil {
			return fmt.Errorf("engine: store the definition of workflow %q: %w", wd.Name, err)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// plans caches the plans built from stored definitions: by (workflow,
// version) for runs that follow another version than this node's (a
// version never changes, so they are kept), and by workflow for the
// current version of a workflow this node only knows from the store
// (Trigger on a node without its handlers; refreshed after
// currentPlanTTL).
type plans struct {
	mu       sync.Mutex
	versions map[planKey]*dag.Workflow
	current  map[string]currentPlan
}

type planKey struct{ workflow, version string }

type currentPlan struct {
	plan    *dag.Workflow
	version string
	read    time.Time
}

// maxCachedPlans bounds the version cache: past it, the cache starts
// over (plans are rebuilt from the store on demand).
const maxCachedPlans = 1024

// currentPlanTTL is how long a node without a workflow's handlers starts
// its runs on the version it read last, before it reads the current
// version again: a deploy reaches such nodes within it.
const currentPlanTTL = 2 * time.Second

// planFor returns the plan a run follows: the registered workflow when
// the run started on its version (or on none recorded), else the run's
// version from the store, with this node's handlers where it has them.
// It returns nil for a workflow this node neither has nor finds. A
// version the store cannot give (an outage; rows deleted) falls back to
// the registered workflow: the same steps and handlers, perhaps other
// conditions or policies, which is logged.
func (e *Engine) planFor(ctx context.Context, run persistence.Run) *dag.Workflow {
	w, hash := e.registered(run.Workflow)
	if run.Definition == "" || run.Definition == hash {
		return w
	}
	key := planKey{run.Workflow, run.Definition}
	e.plans.mu.Lock()
	p := e.plans.versions[key]
	e.plans.mu.Unlock()
	if p != nil {
		return p
	}
	r, err := e.store.DefinitionGet(ctx, run.Workflow, run.Definition)
	if err == nil {
		var d dag.Definition
		if err = json.Unmarshal(r.Spec, &d); err == nil {
			p, err = dag.FromDefinition(d, w)
		}
	}
	if err != nil {
		e.log.Warn("the run's workflow version could not be read; following this node's version",
			"run_id", run.ID, "workflow", run.Workflow, "version", run.Definition, "node_version", hash, "err", err)
		return w
	}
	e.plans.mu.Lock()
	if e.plans.versions == nil || len(e.plans.versions) >= maxCachedPlans {
		e.plans.versions = map[planKey]*dag.Workflow{}
	}
	e.plans.versions[key] = p
	e.plans.mu.Unlock()
	return p
}

// triggerPlan returns the plan a new run of workflow follows and its
// version: this node's registered workflow, or the current stored
// definition for a workflow this node does not have.
func (e *Engine) triggerPlan(ctx context.Context, workflow string) (*dag.Workflow, string, error) {
	if w, hash := e.registered(workflow); w != nil {
		return w, hash, nil
	}
	now := time.Now()
	e.plans.mu.Lock()
	c, ok := e.plans.current[workflow]
	e.plans.mu.Unlock()
	if ok && now.Sub(c.read) < currentPlanTTL {
		return c.plan, c.version, nil
	}
	rows, err := e.store.DefinitionList(ctx, persistence.DefinitionListParams{Workflow: workflow})
	if err != nil {
		if errors.Is(err, persistence.ErrInvalid) {
			return nil, "", &WorkflowError{Workflow: workflow, Err: ErrUnknownWorkflow}
		}
		return nil, "", fmt.Errorf("engine: workflow %q: read its definition: %w", workflow, err)
	}
	if len(rows) == 0 {
		return nil, "", &WorkflowError{Workflow: workflow, Err: ErrUnknownWorkflow}
	}
	r := rows[0]
	if ok && c.version == r.Version {
		c.read = now
	} else {
		var d dag.Definition
		if err := json.Unmarshal(r.Spec, &d); err != nil {
			return nil, "", fmt.Errorf("engine: workflow %q version %s: stored definition: %w", workflow, r.Version, err)
		}
		p, err := dag.FromDefinition(d, nil)
		if err != nil {
			return nil, "", fmt.Errorf("engine: workflow %q version %s: stored definition: %w", workflow, r.Version, err)
		}
		c = currentPlan{plan: p, version: r.Version, read: now}
	}
	e.plans.mu.Lock()
	if e.plans.current == nil {
		e.plans.current = map[string]currentPlan{}
	}
	e.plans.current[workflow] = c
	e.plans.mu.Unlock()
	return c.plan, c.version, nil
}

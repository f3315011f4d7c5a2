package engine

// TEMPORARY (issue #22): the engine methods of the contract, written on
// the workflows registered here only, so that package api builds before
// the engine's own versions land. The integrator deletes this file.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
)

// WorkflowDefinition is one version of a workflow as the engine knows it.
type WorkflowDefinition struct {
	Name                    string
	Version                 string
	Declared                int
	Definition              dag.Definition
	CreatedAt, RegisteredAt time.Time
	Handlers                bool
}

// Definitions returns the current version of every workflow, by name.
func (e *Engine) Definitions(ctx context.Context) ([]WorkflowDefinition, error) {
	names := e.Workflows()
	sort.Strings(names)
	out := make([]WorkflowDefinition, 0, len(names))
	for _, n := range names {
		d := e.Workflow(n).Definition()
		out = append(out, WorkflowDefinition{Name: n, Version: d.Hash(), Declared: d.Declared, Definition: d, Handlers: true})
	}
	return out, nil
}

// DefinitionVersions returns every version of a workflow, newest first.
func (e *Engine) DefinitionVersions(ctx context.Context, name string) ([]WorkflowDefinition, error) {
	w := e.Workflow(name)
	if w == nil {
		return nil, &WorkflowError{Workflow: name, Err: ErrUnknownWorkflow}
	}
	d := w.Definition()
	return []WorkflowDefinition{{Name: name, Version: d.Hash(), Declared: d.Declared, Definition: d, Handlers: true}}, nil
}

// RetryRun queues every dead step of a failed run again.
func (e *Engine) RetryRun(ctx context.Context, runID string) ([]string, error) {
	sts, err := e.store.StepList(ctx, runID)
	if err != nil {
		return nil, err
	}
	if _, err := e.store.RunGet(ctx, runID); err != nil {
		return nil, err
	}
	var dead []string
	for _, s := range sts {
		if s.Status == persistence.StepDead {
			dead = append(dead, s.Step)
		}
	}
	if len(dead) == 0 {
		return nil, &RetryRefusedError{RunID: runID, Reason: "the run has no dead step"}
	}
	for _, s := range dead {
		if err := e.RetryDead(ctx, runID, s); err != nil {
			return nil, fmt.Errorf("engine: retry run %s: %w", runID, err)
		}
	}
	return dead, nil
}

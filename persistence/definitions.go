package persistence

import "context"

// Definitions is the part of a Store that keeps the workflows' plans,
// one row per version.
type Definitions interface {
	// DefinitionUpsert records a workflow definition version: inserted
	// when new (CreatedAt = RegisteredAt = d.RegisteredAt), otherwise only
	// RegisteredAt is updated (Spec and CreatedAt are kept: a version is
	// its hash). Returns the stored row.
	DefinitionUpsert(ctx context.Context, d Definition) (Definition, error)
	// DefinitionGet returns one version, or ErrDefinitionNotFound.
	DefinitionGet(ctx context.Context, workflow, version string) (Definition, error)
	// DefinitionCurrent returns a workflow's current version (the one
	// registered last, as DefinitionList lists it), or
	// ErrDefinitionNotFound: one index lookup, for nodes that start runs
	// of a workflow they know only from the store.
	DefinitionCurrent(ctx context.Context, workflow string) (Definition, error)
	// DefinitionList with p.Workflow empty lists the current version
	// (latest RegisteredAt, ties by the greater Version) of every
	// workflow, by name; with p.Workflow set, every version of that
	// workflow, latest RegisteredAt first (empty slice when none).
	// Index-served.
	DefinitionList(ctx context.Context, p DefinitionListParams) ([]Definition, error)
}

// DefinitionListParams are the arguments of Store.DefinitionList.
type DefinitionListParams struct {
	// Workflow lists every version of one workflow; empty lists the
	// current version of every workflow.
	Workflow string
}

package dashboard

import (
	"context"
	"encoding/json"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// Engine is what the dashboard reads and does, all through the engine's
// operator calls, so that payloads are decoded (Config.Codec), reads go
// to the read replica where the engine routes them, and every action is
// the one the HTTP API and the CLI make. *engine.Engine implements it.
type Engine interface {
	RunOperator
	ScheduleOperator
	QueueOperator
	// Workflows, Workflow, Definitions, DefinitionVersions and Definition
	// describe the workflows registered here and their stored versions.
	Workflows() []string
	Workflow(name string) *dag.Workflow
	Definitions(ctx context.Context) ([]engine.WorkflowDefinition, error)
	DefinitionVersions(ctx context.Context, name string) ([]engine.WorkflowDefinition, error)
	Definition(ctx context.Context, name, version string) (engine.WorkflowDefinition, error)
	// AllNodes lists the nodes, live and gone.
	AllNodes(ctx context.Context) ([]engine.NodeInfo, error)
	// ChangeFeed is what live pages poll; nil refreshes them in full.
	ChangeFeed() persistence.ChangeFeed
}

// RunOperator is the dashboard's part of the engine for runs, their steps
// and their dead letters.
type RunOperator interface {
	Get(ctx context.Context, runID string) (engine.RunInfo, error)
	GetRun(ctx context.Context, runID string) (persistence.Run, error)
	GetStep(ctx context.Context, runID, step string) (persistence.StepRun, error)
	Runs(ctx context.Context, f engine.RunFilter) (persistence.RunPage, error)
	ResolveRunID(ctx context.Context, idOrPrefix string) (string, error)
	WhyWaiting(ctx context.Context, runID, step string) (engine.StepWait, error)
	Trigger(ctx context.Context, workflow string, input any, opts ...engine.TriggerOption) (string, error)
	Cancel(ctx context.Context, runID string) error
	PauseRun(ctx context.Context, runID string) error
	ResumeRun(ctx context.Context, runID string) error
	RetryRun(ctx context.Context, runID string, opts ...engine.ActionOption) ([]string, error)
	RetryFrom(ctx context.Context, runID, step string, opts ...engine.ActionOption) ([]string, error)
	SkipStep(ctx context.Context, runID, step string, output json.RawMessage, opts ...engine.ActionOption) error
	DeadLetters(ctx context.Context, p persistence.StepListDeadParams) (persistence.StepPage, error)
	RetryDead(ctx context.Context, runID, step string, opts ...engine.ActionOption) error
	DiscardDead(ctx context.Context, runID, step string) error
}

// ScheduleOperator is the dashboard's part of the engine for schedules.
type ScheduleOperator interface {
	Schedules(ctx context.Context) ([]engine.ScheduleInfo, error)
	GetSchedule(ctx context.Context, name string) (engine.ScheduleInfo, error)
	ScheduleHistory(ctx context.Context, name string, limit int) ([]persistence.ScheduleTick, error)
	CreateSchedule(ctx context.Context, d engine.ScheduleDefinition) (engine.ScheduleInfo, error)
	EditSchedule(ctx context.Context, name string, c engine.ScheduleChange) (engine.ScheduleInfo, error)
	DeleteSchedule(ctx context.Context, name string) error
	PauseSchedule(ctx context.Context, name string) error
	ResumeSchedule(ctx context.Context, name string) error
	TriggerSchedule(ctx context.Context, name string) (string, error)
}

// QueueOperator is the dashboard's part of the engine for queues (their
// depths come through Config.Queues, from the HTTP API).
type QueueOperator interface {
	PauseQueue(ctx context.Context, name string) error
	ResumeQueue(ctx context.Context, name string) error
}

var _ Engine = (*engine.Engine)(nil)

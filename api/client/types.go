package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// The JSON bodies of dagflow's HTTP API (api/openapi.yaml describes them).
// The server encodes these same types, so the client and the server cannot
// disagree on a field.

// Run is a workflow run.
type Run struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	// Version is the workflow's declared version number.
	Version int `json:"version"`
	// Definition is the hash of the definition the run started with; empty
	// for runs created before definitions were stored.
	Definition string `json:"definition,omitempty"`
	Status     string `json:"status"`
	// Input and Output are the run's payloads (null for none). A payload
	// over the API's inline limit is null here, and InputRef or OutputRef
	// says where to read it whole. GET /v1/runs leaves both out unless
	// asked for them (RunFilter.Include).
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	// InputRef and OutputRef are set when Input or Output is left out
	// for its size.
	InputRef       *PayloadRef       `json:"input_ref,omitempty"`
	OutputRef      *PayloadRef       `json:"output_ref,omitempty"`
	Error          string            `json:"error,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Schedule       string            `json:"schedule,omitempty"`
	ScheduledTick  *time.Time        `json:"scheduled_tick,omitempty"`
	StartAt        time.Time         `json:"start_at"`
	CreatedAt      time.Time         `json:"created_at"`
	StartedAt      *time.Time        `json:"started_at,omitempty"`
	FinishedAt     *time.Time        `json:"finished_at,omitempty"`
	UpdatedAt      time.Time         `json:"updated_at"`
	// Priority orders the run's steps within their queues (higher first).
	Priority int `json:"priority"`
	// PausedAt is set while the run is paused.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// PayloadError says why Input, Output or Error are missing: the
	// server's codec could not decode them (sealed under a key its
	// keyring lacks).
	PayloadError string `json:"payload_error,omitempty"`
}

// PayloadRef stands for a payload too large to be inline in an answer
// (over 64 KiB of JSON): its size, and the path (under the API's base)
// that serves it whole, as application/json, to a key of the read scope.
type PayloadRef struct {
	Bytes int    `json:"bytes"`
	URL   string `json:"url"`
}

// Step is the state of one step of a run.
type Step struct {
	RunID       string   `json:"run_id"`
	Step        string   `json:"step"`
	Queue       string   `json:"queue"`
	Status      string   `json:"status"`
	Deps        []string `json:"deps"`
	Attempt     int      `json:"attempt"`
	MaxAttempts int      `json:"max_attempts"`
	CompAttempt int      `json:"compensation_attempt"`
	// Output is the step's output (null for none); one over the API's
	// inline limit is null, and OutputRef says where to read it whole.
	Output         json.RawMessage `json:"output"`
	OutputRef      *PayloadRef     `json:"output_ref,omitempty"`
	Error          string          `json:"error,omitempty"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at,omitempty"`
	NextAttemptAt  *time.Time      `json:"next_attempt_at,omitempty"`
	QueuedAt       *time.Time      `json:"queued_at,omitempty"`
	StartedAt      *time.Time      `json:"started_at,omitempty"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
	UpdatedAt      time.Time       `json:"updated_at"`
	// PayloadError says why Output or Error are missing (see Run).
	PayloadError string `json:"payload_error,omitempty"`
}

// Attempt is one execution of a step's handler or compensation.
type Attempt struct {
	ID         int64      `json:"id"`
	Step       string     `json:"step"`
	Kind       string     `json:"kind"`
	Attempt    int        `json:"attempt"`
	Worker     string     `json:"worker"`
	Outcome    string     `json:"outcome"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// DurationMS is how long the attempt took, in milliseconds; 0 while it
	// runs.
	DurationMS float64 `json:"duration_ms"`
	// PayloadError says why Error is missing (see Run).
	PayloadError string `json:"payload_error,omitempty"`
}

// RunDetail is a run with its steps, its history and its result.
type RunDetail struct {
	Run      Run       `json:"run"`
	Steps    []Step    `json:"steps"`
	Attempts []Attempt `json:"attempts"`
	// Actions are the operator actions on the run, oldest first.
	Actions []RunAction `json:"actions"`
	// Output is the run's result: its output when it succeeded, else an
	// object mapping each final step that succeeded to its output. Over
	// the API's inline limit it is null, and OutputRef says where to read
	// it whole.
	Output    json.RawMessage `json:"output"`
	OutputRef *PayloadRef     `json:"output_ref,omitempty"`
	// Parent is the run and `child` step that started this run (a child
	// workflow); nil for other runs.
	Parent *RunParent `json:"parent,omitempty"`
	// Children are the child runs this run's `child` steps started, by
	// step, oldest first.
	Children []ChildRun `json:"children"`
}

// RunParent names the parent of a child run.
type RunParent struct {
	RunID string `json:"run_id"`
	Step  string `json:"step"`
}

// ChildRun is a child run as its parent's RunDetail lists it.
type ChildRun struct {
	RunID    string `json:"run_id"`
	Workflow string `json:"workflow"`
	// Step is the parent's step that started it.
	Step   string `json:"step"`
	Status string `json:"status"`
}

// RunList is one page of runs, newest first.
type RunList struct {
	Runs []Run `json:"runs"`
	// NextCursor continues the listing (the cursor parameter); empty on
	// the last page.
	NextCursor string `json:"next_cursor"`
}

// PublishRequest is the body of POST /v1/events.
type PublishRequest struct {
	// Name is the event's name ("order.placed").
	Name string `json:"name"`
	// ID is the event's id: a repeat starts nothing and answers the runs
	// the first publication started. Generated when empty.
	ID string `json:"id,omitempty"`
	// Payload is the event's payload, any JSON value; it becomes the
	// started runs' input.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Correlation completes the steps waiting for an event of this name
	// with this correlation value, with Payload as their output.
	Correlation string `json:"correlation,omitempty"`
}

// SignalRequest is the body of POST /v1/runs/{id}/steps/{step}/signal.
type SignalRequest struct {
	// Payload becomes the signalled step's output (any JSON value).
	Payload json.RawMessage `json:"payload,omitempty"`
}

// EventRun is a run an event started.
type EventRun struct {
	Workflow string `json:"workflow"`
	RunID    string `json:"run_id"`
}

// Event is a published event with the runs it started.
type Event struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Payload     json.RawMessage `json:"payload"`
	PublishedAt time.Time       `json:"published_at"`
	// DispatchedAt is when its runs were enqueued; nil while an event
	// published in an application's transaction waits for an engine.
	DispatchedAt *time.Time `json:"dispatched_at,omitempty"`
	Runs         []EventRun `json:"runs"`
	// PayloadError says why Payload is null (see Run).
	PayloadError string `json:"payload_error,omitempty"`
	// Warning, only in the answer to a publication, says why the event
	// started no run when no workflow subscribes to its name.
	Warning string `json:"warning,omitempty"`
}

// EventList is the answer of GET /v1/events.
type EventList struct {
	Events []Event `json:"events"`
	// NextCursor continues the listing; empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// TriggerRequest is the body of POST /v1/workflows/{name}/runs.
type TriggerRequest struct {
	// Input is the run's input, any JSON value.
	Input json.RawMessage `json:"input,omitempty"`
	// Metadata is handed to every step (steps.Context.Metadata).
	Metadata map[string]string `json:"metadata,omitempty"`
	// StartAt delays the run's first steps until then.
	StartAt *time.Time `json:"start_at,omitempty"`
	// IdempotencyKey makes a repeat return the run the first call started
	// (the Idempotency-Key header does the same and wins).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Priority orders the run's steps within their queues: -10..10, higher
	// first, 0 the default.
	Priority int `json:"priority,omitempty"`
}

// Retry modes of POST /v1/runs/{id}/retry.
const (
	// RetryFailed retries the dead steps, keeping every success (and
	// redoing, on a compensated run, what was undone).
	RetryFailed = "failed"
	// RetryFromStep reruns the run from a step: it and everything
	// downstream of it run again.
	RetryFromStep = "from_step"
)

// RetryRequest is the (optional) body of POST /v1/runs/{id}/retry.
type RetryRequest struct {
	// Mode is RetryFailed (the default) or RetryFromStep.
	Mode string `json:"mode,omitempty"`
	// Step is the step to rerun from (RetryFromStep).
	Step string `json:"step,omitempty"`
}

// RetryRunResult is the answer of POST /v1/runs/{id}/retry.
type RetryRunResult struct {
	Run Run `json:"run"`
	// Steps are the steps that run again: dead ones retried, completed
	// ones rerun.
	Steps []string `json:"steps"`
}

// SkipRequest is the body of POST /v1/runs/{id}/steps/{step}/skip.
type SkipRequest struct {
	// Output is the dead step's output from now on (any JSON value; none
	// when absent): what its dependents read.
	Output json.RawMessage `json:"output,omitempty"`
}

// RunAction is an operator action in a run's history.
type RunAction struct {
	Seq    int       `json:"seq"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"` // retry, rerun or skip
	Step   string    `json:"step,omitempty"`
	// Steps are the steps the action ran again.
	Steps []string `json:"steps"`
}

// DeadLetterList is one page of dead steps, newest first.
type DeadLetterList struct {
	DeadLetters []Step `json:"dead_letters"`
	NextCursor  string `json:"next_cursor"`
}

// ScheduleTick is one tick of a schedule's history.
type ScheduleTick struct {
	Tick    time.Time `json:"tick"`
	Outcome string    `json:"outcome"`
	RunID   string    `json:"run_id,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

// Schedule is a cron schedule with its next fire times and its last ticks.
type Schedule struct {
	Name     string          `json:"name"`
	Spec     string          `json:"spec"`
	TimeZone string          `json:"time_zone"`
	Workflow string          `json:"workflow"`
	Input    json.RawMessage `json:"input"`
	Overlap  string          `json:"overlap"`
	CatchUp  string          `json:"catch_up"`
	// CatchUpWindow is a Go duration ("1h0m0s"); "0s" means no limit.
	CatchUpWindow string     `json:"catch_up_window"`
	Paused        bool       `json:"paused"`
	Disabled      bool       `json:"disabled"`
	LastTick      *time.Time `json:"last_tick,omitempty"`
	// Next are the next fire times; empty when paused or disabled.
	Next []time.Time `json:"next"`
	// LastRuns are the latest ticks, newest first.
	LastRuns []ScheduleTick `json:"last_runs"`
	// Error says why the stored spec or time zone does not parse.
	Error string `json:"error,omitempty"`
	// PayloadError says why Input is missing: the server's codec could
	// not decode it (see Run).
	PayloadError string `json:"payload_error,omitempty"`
	// Owner is "code" for a schedule a node declares, "operator" for one
	// created or edited at run time (a node's code never overwrites it).
	Owner string `json:"owner"`
}

// ScheduleDefinition is the body of POST /v1/schedules (Name required)
// and of PUT /v1/schedules/{name} (Name may be left out). Fields left
// out take their defaults: time zone UTC, no input, overlap "allow",
// catch-up "latest", no catch-up window.
type ScheduleDefinition struct {
	Name     string          `json:"name,omitempty"`
	Spec     string          `json:"spec"`
	TimeZone string          `json:"time_zone,omitempty"`
	Workflow string          `json:"workflow"`
	Input    json.RawMessage `json:"input,omitempty"`
	Overlap  string          `json:"overlap,omitempty"`
	CatchUp  string          `json:"catch_up,omitempty"`
	// CatchUpWindow is a Go duration ("6h"); empty or "0s" means no limit.
	CatchUpWindow string `json:"catch_up_window,omitempty"`
}

// ScheduleEdit is the body of PATCH /v1/schedules/{name}: only the
// fields given change. An input of null removes the input.
type ScheduleEdit struct {
	Spec          *string         `json:"spec,omitempty"`
	TimeZone      *string         `json:"time_zone,omitempty"`
	Workflow      *string         `json:"workflow,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	Overlap       *string         `json:"overlap,omitempty"`
	CatchUp       *string         `json:"catch_up,omitempty"`
	CatchUpWindow *string         `json:"catch_up_window,omitempty"`
}

// ScheduleList lists every schedule, by name.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}

// ScheduleTriggerResult is the answer of POST /v1/schedules/{name}/trigger.
type ScheduleTriggerResult struct {
	Schedule string `json:"schedule"`
	RunID    string `json:"run_id"`
}

// Queue is the depth of one Redis queue.
type Queue struct {
	Name    string `json:"name"`
	Ready   int64  `json:"ready"`
	Delayed int64  `json:"delayed"`
	Leased  int64  `json:"leased"`
	// Paused is true while no node takes the queue's tasks.
	Paused bool `json:"paused"`
	// OldestReadyAgeSeconds is how long the next ready task has been
	// ready; 0 with no ready task.
	OldestReadyAgeSeconds float64 `json:"oldest_ready_age_seconds"`
	// OldestReadyTask is the id of the next ready task, if any.
	OldestReadyTask string `json:"oldest_ready_task,omitempty"`
}

// QueueList lists the queues the node knows, by name.
type QueueList struct {
	Queues []Queue `json:"queues"`
}

// Health is the answer of /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
	// Checks maps each dependency checked ("store", "redis") to "ok" or
	// the reason it failed.
	Checks map[string]string `json:"checks,omitempty"`
}

// Problem is an error answer of the API, an RFC 9457 problem detail
// (application/problem+json). The client returns it as an error (*Problem).
type Problem struct {
	// Type is a URI naming the kind of problem.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Code is a short machine-readable name ("run_not_found",
	// "idempotency_conflict"...).
	Code string `json:"code"`
	// RunID is the run the problem is about, when there is one (for an
	// idempotency conflict, the existing run).
	RunID string `json:"run_id,omitempty"`
	// Matches are, for ambiguous_id, the ids of the runs the prefix
	// matches (the first ten, in id order).
	Matches []string `json:"matches,omitempty"`
}

func (p *Problem) Error() string {
	if p.RunID != "" {
		return fmt.Sprintf("dagflow api: %d %s (run %s): %s", p.Status, p.Code, p.RunID, p.Detail)
	}
	return fmt.Sprintf("dagflow api: %d %s: %s", p.Status, p.Code, p.Detail)
}

// Workflow is the current version of a workflow.
type Workflow struct {
	Name string `json:"name"`
	// Version is the hash of the definition (16 hex characters).
	Version string `json:"version"`
	// Declared is the version number the workflow declares.
	Declared     int       `json:"declared_version"`
	CreatedAt    time.Time `json:"created_at"`
	RegisteredAt time.Time `json:"registered_at"`
	// Handlers says the serving node has the workflow's code at this
	// version (it can run its steps, not only start runs).
	Handlers bool `json:"handlers"`
}

// WorkflowList lists the current version of every workflow, by name.
type WorkflowList struct {
	Workflows []Workflow `json:"workflows"`
}

// GraphNode is a step of a workflow's graph.
type GraphNode struct {
	ID           string `json:"id"`
	Queue        string `json:"queue"`
	When         string `json:"when,omitempty"`
	Compensation bool   `json:"compensation"`
}

// GraphEdge goes from a dependency to its dependent; Kind is "needs" or
// "after".
type GraphEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
}

// Graph is a workflow's plan as nodes and edges.
type Graph struct {
	Nodes []GraphNode `json:"nodes"`
	Edges []GraphEdge `json:"edges"`
}

// WorkflowDetail is a workflow's current definition, its graph, and its
// versions.
type WorkflowDetail struct {
	Workflow
	// Definition is the plan (steps, dependencies, conditions, queues,
	// retry and timeout policies), as the engine stores it.
	Definition json.RawMessage `json:"definition"`
	Graph      Graph           `json:"graph"`
	// Mermaid draws the graph as a Mermaid flowchart.
	Mermaid string `json:"mermaid"`
	// Versions are every stored version, newest registration first.
	Versions []Workflow `json:"versions"`
}

// APIKey is an API key as listed: never its secret, only its first 12
// characters (Hint).
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scope     string     `json:"scope"`
	Hint      string     `json:"hint"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// APIKeyList lists every key, revoked ones too, oldest first.
type APIKeyList struct {
	Keys []APIKey `json:"keys"`
}

// CreateAPIKeyRequest is the body of POST /v1/api-keys.
type CreateAPIKeyRequest struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
}

// CreatedAPIKey is a new key with its secret, which is shown this once.
type CreatedAPIKey struct {
	APIKey
	Secret string `json:"secret"`
}

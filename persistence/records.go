package persistence

import "time"

// Run is one execution of a workflow.
type Run struct {
	ID             string
	Workflow       string
	Version        int
	Definition     string // Definition.Version the run started with; "" for runs created before, or without one
	Status         RunStatus
	Input          []byte // JSON
	Output         []byte // JSON, set when the run succeeds (may be nil)
	Error          string // why the run failed or compensated
	IdempotencyKey string // empty when the run was started without one
	Metadata       map[string]string
	Schedule       string     // name of the schedule that fired the run, if any
	ScheduledTick  *time.Time // the schedule tick the run belongs to, if any
	StartAt        time.Time  // when the run may start (delayed start)
	CreatedAt      time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	UpdatedAt      time.Time
	// Priority orders the run's steps within their queues (higher first;
	// MinPriority..MaxPriority, 0 the default).
	Priority int
	// PausedAt is set while the run is paused: no new step of it starts.
	PausedAt *time.Time
	// ParentRunID and ParentStep name the `child` step of the parent run
	// that started this run (a child workflow); empty for other runs.
	ParentRunID string
	ParentStep  string
	// PayloadError is set by a reader that could not decode the run's
	// Input, Output or Error (the engine's codec lacks the key one was
	// encoded with): those are left empty, and it says why. Stores never
	// set it.
	PayloadError string
}

// QueuePause is a paused queue.
type QueuePause struct {
	Queue    string
	PausedAt time.Time
}

// StepRun is the state of one step within one run.
type StepRun struct {
	RunID   string
	Step    string
	Queue   string // Redis queue the step's tasks go to
	Status  StepStatus
	Deps    []string // steps this one waits for (declaration order)
	Attempt int      // forward attempts started so far
	// MaxAttempts is the forward attempt budget of the step's retry policy.
	MaxAttempts int
	// PendingDeps counts dependencies not yet succeeded or skipped; the
	// step is queued when it reaches zero.
	PendingDeps int
	// CompAttempt counts compensation attempts started so far.
	CompAttempt int
	// Reruns counts how often an operator put the step back to run after
	// it had completed (succeeded, or succeeded and was compensated): see
	// Store.RunRetry. It makes the step's idempotency key a new one.
	Reruns int
	// Fence is the token of the current lease holder; empty when unclaimed.
	Fence          string
	LeaseExpiresAt *time.Time
	NextAttemptAt  *time.Time // due time of a retry (forward or compensation)
	Output         []byte     // JSON
	Error          string
	QueuedAt       *time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	UpdatedAt      time.Time
	// Priority is its run's Priority, kept on the step so that whatever
	// enqueues it has it.
	Priority int
	// PayloadError is set by a reader that could not decode the step's
	// Output or Error: those are left empty, and it says why. Stores
	// never set it.
	PayloadError string
}

// Attempt is one row of a run's history: one execution of a step's handler
// or compensation.
type Attempt struct {
	// ID identifies the attempt within its run. It is positive for an
	// attempt recorded in a row of its own, 0 for a handler execution in
	// progress (AttemptList shows it from its step), and negative for a
	// handler execution that succeeded or was skipped and that its step
	// still holds (a store may keep the last forward attempt of a
	// succeeded or skipped step on the step instead of a row of its own;
	// it writes the row when the step moves on, and the ID changes then).
	ID         int64
	RunID      string
	Step       string
	Kind       AttemptKind
	Attempt    int
	Worker     string
	Outcome    AttemptOutcome
	Error      string // error message; for panics, includes the stack
	StartedAt  time.Time
	FinishedAt *time.Time
	// PayloadError is set by a reader that could not decode Error (left
	// empty): why. Stores never set it.
	PayloadError string
}

// Duration returns how long the attempt took, or zero while it runs.
func (a Attempt) Duration() time.Duration {
	if a.FinishedAt == nil {
		return 0
	}
	return a.FinishedAt.Sub(a.StartedAt)
}

// Overlap policies of a schedule.
const (
	OverlapAllow     = "allow"
	OverlapSkip      = "skip"
	OverlapBufferOne = "buffer_one"
)

// Catch-up policies of a schedule.
const (
	CatchUpNone   = "none"
	CatchUpLatest = "latest"
	CatchUpAll    = "all"
)

// Schedule is a cron schedule that starts runs of a workflow.
type Schedule struct {
	Name          string
	Spec          string // cron spec as written by the user
	TimeZone      string // IANA name; empty means UTC
	Workflow      string
	Input         []byte // JSON
	Overlap       string // OverlapAllow, OverlapSkip or OverlapBufferOne
	CatchUp       string // CatchUpNone, CatchUpLatest or CatchUpAll
	CatchUpWindow time.Duration
	Paused        bool
	// Disabled is set for a schedule that is no longer declared in code; it
	// is kept (with its history) rather than deleted.
	Disabled  bool
	LastTick  *time.Time // the last tick that was handled (fired or skipped)
	CreatedAt time.Time
	UpdatedAt time.Time
	// Owner is OwnerCode for a schedule declared by a node's code and
	// OwnerOperator once an operator created, edited or deleted it at run
	// time; a node's declaration never overwrites an operator's schedule.
	// Empty in a ScheduleUpsert means OwnerCode.
	Owner string
	// Deleted marks a deleted schedule; only ScheduleListChanged lists
	// one (so that every node learns of the deletion).
	Deleted bool
	// ChangedAt is the time of the last change of the schedule's
	// definition or flags (not of its LastTick); ScheduleListChanged
	// reads by it.
	ChangedAt time.Time
}

// Schedule owners.
const (
	OwnerCode     = "code"
	OwnerOperator = "operator"
)

// Tick outcomes recorded in a schedule's history.
const (
	TickFired    = "fired"
	TickSkipped  = "skipped"
	TickBuffered = "buffered"
)

// ScheduleTick is one row of a schedule's history.
type ScheduleTick struct {
	Schedule  string
	Tick      time.Time
	Outcome   string // TickFired, TickSkipped, TickBuffered
	RunID     string // run started for the tick, if any
	Reason    string
	CreatedAt time.Time
}

// Definition is one version of a workflow's definition as stored: the
// plan only (steps, dependencies, queues, retries), never code. A version
// is named by the hash of its content, so a node that registers the same
// plan again registers the same version.
type Definition struct {
	Workflow string
	// Version is the content hash of the plan, e.g. "a1b2c3d4e5f60718":
	// 1 to 64 characters of [a-z0-9:_-].
	Version string
	// Declared is the workflow's declared version number (dag.Version),
	// at least 1.
	Declared int
	// Spec is the definition as JSON (dag.Definition), at most
	// MaxDefinitionSpec bytes.
	Spec []byte
	// CreatedAt is the first registration of this version (kept on
	// upsert).
	CreatedAt time.Time
	// RegisteredAt is the latest registration of this version (set on
	// every upsert).
	RegisteredAt time.Time
}

// MaxDefinitionSpec is the largest Definition.Spec a store takes, in bytes.
const MaxDefinitionSpec = 1 << 20

// Scopes of an API key: what a request made with it may do.
const (
	// ScopeRead may read runs, steps, definitions and schedules.
	ScopeRead = "read"
	// ScopeOperate may also trigger, cancel and retry runs.
	ScopeOperate = "operate"
	// ScopeAdmin may also manage API keys.
	ScopeAdmin = "admin"
)

// APIKey is an HTTP API key as stored: never the secret, only its
// SHA-256.
type APIKey struct {
	ID string // caller-generated (UUID)
	// Name is unique among keys that are not revoked: 1 to 100
	// characters of [A-Za-z0-9._-].
	Name  string
	Scope string // ScopeRead, ScopeOperate or ScopeAdmin
	// Hash is the SHA-256 of the secret, 32 bytes.
	Hash []byte
	// Hint is the start of the secret (its first 12 characters), shown in
	// listings so that a person can tell keys apart: at most 16
	// printable ASCII characters.
	Hint      string
	CreatedAt time.Time
	RevokedAt *time.Time // nil while the key is valid
}

// RunActionKind names an operator action on a run.
type RunActionKind string

// Operator actions recorded in a run's history (Store.RunActionList).
const (
	// ActionRetry: the failed steps were retried (RetryFailed).
	ActionRetry RunActionKind = "retry"
	// ActionRerun: the run was rerun from a step (RetryFromStep).
	ActionRerun RunActionKind = "rerun"
	// ActionSkip: a dead step was skipped with an output (Store.StepSkip).
	ActionSkip RunActionKind = "skip"
)

// RunAction is one operator action in a run's history: what was done,
// by whom and when.
type RunAction struct {
	RunID  string
	Seq    int // 1 for the run's first action, then 2, ...
	At     time.Time
	Actor  string // an API key's name, "cli", or a name given by a Go caller
	Action RunActionKind
	Step   string // the step named by the action, if any
	// Steps are the steps the action runs again (dead ones retried,
	// completed ones rerun), in declaration order; the cancelled steps
	// that wait for them again are not listed.
	Steps []string
}

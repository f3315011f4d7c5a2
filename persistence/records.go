package persistence

import "time"

// Run is one execution of a workflow.
type Run struct {
	ID             string
	Workflow       string
	Version        int
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
}

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

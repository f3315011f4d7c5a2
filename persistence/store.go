package persistence

import (
	"context"
	"database/sql"
	"time"
)

// Store is dagflow's durable state. Every method is atomic (one
// transaction), takes the caller's notion of "now" in its params (the
// engine's injected clock), and returns the sentinel or typed errors of
// this package. Implementations must be safe for concurrent use by many
// goroutines and many processes.
type Store interface {
	// QueueSetPaused records a queue as paused or not, and reports
	// whether that changed anything. The engine mirrors the paused queues
	// into Redis (QueueListPaused), where the dequeue reads them.
	QueueSetPaused(ctx context.Context, p QueueSetPausedParams) (bool, error)
	// QueueListPaused lists the paused queues, by name.
	QueueListPaused(ctx context.Context) ([]QueuePause, error)

	// AttemptList returns a run's history in the order a person reads
	// it: step by step in plan order (the order of RunCreateParams.Steps,
	// which StepList keeps), and for each step its forward attempts
	// (handler executions) by attempt number, then its compensation
	// attempts by attempt number. An attempt in progress (outcome
	// running; ID 0 for a handler execution) has its place by its number
	// like the others: after the ended attempts of its step and kind.
	// An unknown run has no attempts.
	AttemptList(ctx context.Context, runID string) ([]Attempt, error)

	// Scheduling is what a scheduler node uses to fire the schedules.
	Scheduling

	// ScheduleCreate creates an operator-owned schedule (a deleted one of
	// the same name is replaced, with a fresh LastTick and history kept).
	// A live schedule of that name gives ErrScheduleExists.
	ScheduleCreate(ctx context.Context, s Schedule) (Schedule, error)
	// ScheduleEdit replaces the definition of a live schedule (spec, time
	// zone, workflow, input and policies; not its flags) and makes it
	// operator-owned, or gives ErrScheduleNotFound.
	ScheduleEdit(ctx context.Context, p ScheduleEditParams) (Schedule, error)
	// ScheduleDelete deletes a live schedule (its row stays as an
	// operator-owned tombstone that ScheduleListChanged lists, its history
	// is kept), or gives ErrScheduleNotFound.
	ScheduleDelete(ctx context.Context, p ScheduleDeleteParams) error
	// ScheduleTickList lists a schedule's history, newest first.
	ScheduleTickList(ctx context.Context, p ScheduleTickListParams) ([]ScheduleTick, error)

	// APIKeys keeps the API keys.
	APIKeys

	// StoreID returns the database's identity: a random id written once
	// by the migrations, the same for every connection and every process.
	// An engine binds its Redis prefix to it, so that a prefix is never
	// served by two databases.
	StoreID(ctx context.Context) (string, error)
	// LeaseAcquire takes the named lease for p.Holder until p.Until, or
	// extends it, when it is free (never taken, or expired before p.Now)
	// or already p.Holder's; it reports whether p.Holder holds it now.
	// One row, one conditional write: of concurrent callers at most one
	// gets a free lease.
	LeaseAcquire(ctx context.Context, p LeaseParams) (bool, error)
	// LeaseRelease frees the named lease if p.Holder holds it; a lease
	// held by another is left alone.
	LeaseRelease(ctx context.Context, p LeaseParams) error

	// Now returns the database server's clock. Engines compare their own
	// clock with it to find a node whose clock is too far off to judge
	// leases and due times (see engine.Config.MaxClockSkew).
	Now(ctx context.Context) (time.Time, error)

	// SealedColumns lists the columns whose values the engine's payload
	// codec encodes (inputs, outputs, error texts, event payloads, the
	// codec probe), in the order SealedList and SealedUpdate take them.
	SealedColumns() []SealedColumn
	// SealedList reads one batch of a sealed column's values (the empty
	// ones left out) in its rows' primary key order, after p.Cursor: one
	// range of the primary key, no lock held. Pass the page's NextCursor
	// back until it is empty.
	SealedList(ctx context.Context, p SealedListParams) (SealedPage, error)
	// SealedUpdate writes new values of a sealed column, each only where
	// the row still holds the value read (Old), in one short transaction
	// by primary key, and returns how many it wrote: a row changed
	// meanwhile is left as it is.
	SealedUpdate(ctx context.Context, p SealedUpdateParams) (int, error)
	// CodecProbe returns the store's codec probe, nil when it has none.
	// With p.Create set and no probe stored, it stores p.Create first; of
	// concurrent creators one wins, and every one gets the stored probe.
	CodecProbe(ctx context.Context, p CodecProbeParams) ([]byte, error)

	// SchemaVersion reads which migrations the database has, without
	// changing anything (a user that may only read and write rows can
	// call it), beside the newest this binary ships. Engines refuse to
	// start on a database behind the binary (SchemaVersion.Check).
	SchemaVersion(ctx context.Context) (SchemaVersion, error)
	// Close releases the store's connections.
	Close() error

	// Events keeps published events (events.go).
	Events
	// Nodes keeps the node registry (nodes.go).
	Nodes
	// Definitions keeps the workflows' plans (definitions.go).
	Definitions
	// Runs (runs.go).
	Runs
	// Steps (steps.go).
	Steps
}

// DBTX is the part of *sql.Tx (and *sql.DB, *sqlx.Tx) that TxStore needs:
// standard-library types only.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// TxStore is implemented by stores that can create a run inside a
// transaction the caller owns, so that the caller's own rows and the run
// commit or roll back together (the outbox pattern). The caller commits; the
// engine finds the run's queued steps afterwards.
type TxStore interface {
	// RunCreateTx is RunCreate inside the caller's transaction tx, which
	// must be on DB().
	RunCreateTx(ctx context.Context, tx DBTX, p RunCreateParams) (RunCreateResult, error)
	// EventCreateTx is EventCreate inside the caller's transaction tx,
	// which must be on DB(). The event is stored not dispatched
	// (p.Dispatched is ignored): the engine dispatches it once it can see
	// it, that is once tx has committed.
	EventCreateTx(ctx context.Context, tx DBTX, p EventCreateParams) (EventCreateResult, error)
	// DB is the store's database, on which callers begin the
	// transactions they pass to RunCreateTx and EventCreateTx.
	DB() *sql.DB
}

// QueueSetPausedParams are the arguments of Store.QueueSetPaused.
type QueueSetPausedParams struct {
	Queue  string
	Paused bool
	Now    time.Time
}

// APIKeyRevokeParams are the arguments of Store.APIKeyRevoke: exactly one
// of ID and Name names the key.
type APIKeyRevokeParams struct {
	ID   string
	Name string
	Now  time.Time
}

// Valid reports whether k is one of the defined wait kinds.
func (k WaitKind) Valid() bool {
	return k == WaitEvent || k == WaitSignal || k == WaitSleep || k == WaitChild
}

// Valid reports whether m is a known retry mode.
func (m RetryMode) Valid() bool { return m == RetryFailed || m == RetryFromStep }

// ScheduleUpdateParams are the arguments of Store.ScheduleUpdate; nil
// fields are left as they are.
type ScheduleUpdateParams struct {
	Name     string
	Paused   *bool
	Disabled *bool
	Now      time.Time
}

// ScheduleEditParams are the arguments of Store.ScheduleEdit.
type ScheduleEditParams struct {
	// Schedule is the new definition; its Name names the schedule, its
	// flags, times and owner are ignored.
	Schedule Schedule
	// ResetCursor sets LastTick to Now, so that a new spec or time zone
	// fires from its next tick after Now rather than catching up the
	// ticks it would have had since the last one.
	ResetCursor bool
	Now         time.Time
}

// ScheduleDeleteParams are the arguments of Store.ScheduleDelete.
type ScheduleDeleteParams struct {
	Name string
	Now  time.Time
}

// ScheduleListChangedParams are the arguments of
// Store.ScheduleListChanged. The listing starts after After, exclusive;
// AfterName, set to the last row of a full page, continues after that
// row (After being its ChangedAt). Limit is 1000 when zero or negative,
// at most 10000.
type ScheduleListChangedParams struct {
	After     time.Time
	AfterName string
	Limit     int
}

// ScheduleAdvanceParams are the arguments of Store.ScheduleAdvance.
type ScheduleAdvanceParams struct {
	Name string
	From *time.Time
	To   time.Time
	Now  time.Time
}

// ScheduleTickListParams page Store.ScheduleTickList.
type ScheduleTickListParams struct {
	Name  string
	Limit int
}

// ChangeFeed is implemented by stores that can say cheaply which runs
// changed lately, for dashboards that watch the store (the MySQL and
// SQLite stores do, through an index on the steps' update time). It is
// optional: a reader without it polls what it shows instead.
type ChangeFeed interface {
	// StepListChanged lists the runs whose steps changed after p.After
	// (every transition of a step, and so of its run, sets its update
	// time), oldest change first, at most p.Limit changes. It is one
	// range of an index.
	StepListChanged(ctx context.Context, p StepListChangedParams) (StepChanges, error)
}

// StepListChangedParams are the arguments of ChangeFeed.StepListChanged.
type StepListChangedParams struct {
	// After is exclusive: changes at or before it are not listed. Zero
	// asks only for the newest change (Latest), with no runs.
	After time.Time
	// Limit bounds the changes read: 1000 when zero or negative, at most
	// 10000.
	Limit int
}

// StepChanges is what StepListChanged returns.
type StepChanges struct {
	// RunIDs are the runs that changed, each once.
	RunIDs []string
	// Latest is the newest update time read (After when nothing changed);
	// pass it as the next call's After.
	Latest time.Time
	// More reports that Limit cut the listing short: more runs changed
	// than RunIDs holds.
	More bool
	// Changes are the changes read, oldest first, each run and update
	// time once: a reader that reads an overlapping window again (update
	// times come from the writers' clocks, so a change can land behind
	// one already read) skips the ones it has seen.
	Changes []StepChange
}

// StepChange is one change StepListChanged read: a step of RunID was
// updated at At.
type StepChange struct {
	RunID string
	At    time.Time
}

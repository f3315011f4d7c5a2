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
	// RunCreate creates a run and one StepRun per step, atomically. Steps
	// without dependencies start queued (or waiting, for a run whose StartAt
	// is after Now, which starts pending); the others start waiting.
	//
	// With an IdempotencyKey, a repeat of (Workflow, IdempotencyKey) returns
	// the existing run with Created false; a repeat with a different Input
	// returns an *IdempotencyConflictError (Is ErrIdempotencyConflict).
	RunCreate(ctx context.Context, p RunCreateParams) (RunCreateResult, error)
	// RunCreateMany creates several runs in one transaction (the group
	// commit of concurrent Trigger calls), each exactly as RunCreate
	// would; outcome i answers p.Items[i]. With p.ClaimRoots it also
	// claims, for the caller, root steps of the runs it creates (see
	// RunCreateManyParams). The error is for the batch as a whole.
	RunCreateMany(ctx context.Context, p RunCreateManyParams) ([]RunCreateOutcome, error)
	// RunGet returns one run, or ErrRunNotFound.
	RunGet(ctx context.Context, id string) (Run, error)
	// RunResolve returns the ids of the runs whose id starts with prefix,
	// in id order, at most limit of them (10 when limit is 0, at most
	// 100): one range of the primary key, never a scan. The prefix is
	// normalised by RunIDPrefix first (a UUID prefix typed without dashes
	// or in capitals finds the same runs); one it refuses, such as a
	// prefix under MinRunIDPrefix characters, gives its *ValidationError.
	// No run gives an empty list and no error.
	RunResolve(ctx context.Context, prefix string, limit int) ([]string, error)
	// RunChildren returns the child runs a run's `child` steps started
	// (Run.ParentRunID is runID), by step, oldest first; an unknown run
	// has none.
	RunChildren(ctx context.Context, runID string) ([]Run, error)
	// RunList lists runs, newest first, with filters and a cursor.
	RunList(ctx context.Context, p RunListParams) (RunPage, error)
	// RunTransition moves a run to p.To if its status is one of p.From.
	// A run already in a terminal status never changes
	// (ErrRunFinished); a status not in p.From gives
	// *TransitionError (Is ErrInvalidTransition).
	RunTransition(ctx context.Context, p RunTransitionParams) (RunTransitionResult, error)
	// RunStart moves a pending run whose StartAt has come to running and
	// queues its root steps. It returns the queued steps; a run that is no
	// longer pending gives an empty result and no error.
	RunStart(ctx context.Context, p RunStartParams) ([]StepRun, error)
	// RunListDue lists pending runs whose StartAt is at or before p.Before
	// (bounded by p.Limit, served by an index).
	RunListDue(ctx context.Context, p ListDueParams) ([]Run, error)
	// RunReopen resumes a failed run from the dead-letter queue: the run
	// moves failed -> running, the named dead steps go back to queued with
	// Attempt 0, and every cancelled step goes back to waiting (or queued
	// when its PendingDeps is 0). It returns the steps it queued. A run
	// that is not failed gives *TransitionError.
	RunReopen(ctx context.Context, p RunReopenParams) ([]StepRun, error)
	// RunSetPaused pauses (p.Paused) or resumes a run that is not
	// finished: while it is paused no step of it is claimed (claims are
	// refused with RefusedRunPaused, none is claimed at release) and the
	// step lists of the reconciler (StepListQueued, StepListRetryDue,
	// StepListLeaseExpired) leave its steps out. Steps that run go on and
	// record their outcome. A finished run gives an error wrapping
	// ErrRunFinished; an unknown one ErrRunNotFound.
	RunSetPaused(ctx context.Context, p RunSetPausedParams) (RunSetPausedResult, error)
	// QueueSetPaused records a queue as paused or not, and reports
	// whether that changed anything. The engine mirrors the paused queues
	// into Redis (QueueListPaused), where the dequeue reads them.
	QueueSetPaused(ctx context.Context, p QueueSetPausedParams) (bool, error)
	// QueueListPaused lists the paused queues, by name.
	QueueListPaused(ctx context.Context) ([]QueuePause, error)
	// RunRetry puts a finished run back to running by an operator's
	// action: its failed steps (RetryFailed) or a step and everything
	// downstream of it (RetryFromStep) run again, and, on a compensated
	// run, every compensated step too, since its work was undone. The
	// action is recorded in the run's history (RunActionList) in the same
	// transaction. A run or step the rules refuse gives a
	// *RetryRefusedError (Is ErrInvalidTransition) and changes nothing.
	RunRetry(ctx context.Context, p RunRetryParams) (RunRetryResult, error)
	// StepSkip marks a dead step of a finished run succeeded with the
	// operator's output (no handler runs) and resumes the run as
	// RunRetry(RetryFailed) would, recording the action. Refusals are
	// *RetryRefusedError.
	StepSkip(ctx context.Context, p StepSkipParams) (RunRetryResult, error)
	// RunActionList returns a run's operator actions, oldest first (an
	// unknown run has none).
	RunActionList(ctx context.Context, runID string) ([]RunAction, error)
	// RunDeleteFinished deletes one batch of the runs that finished
	// before p.Before, oldest first, in one short transaction: it reads up
	// to p.Limit finished runs after p.Cursor and deletes those without a
	// dead step, with everything kept by run (steps, attempts, the
	// event_runs links and the events left without runs, the schedule
	// ticks that started them). A run with a dead step (dead-lettered,
	// waiting for an operator to retry or discard it) is kept and
	// counted. Pass the result's NextCursor to the next call until it is
	// empty. With p.DryRun nothing is deleted and the result counts what
	// would be.
	RunDeleteFinished(ctx context.Context, p RunDeleteFinishedParams) (RunDeleteFinishedResult, error)

	// StepList returns every step of a run, in creation (declaration) order.
	StepList(ctx context.Context, runID string) ([]StepRun, error)
	// StepGet returns one step, or ErrStepNotFound.
	StepGet(ctx context.Context, runID, step string) (StepRun, error)
	// StepClaim takes a step for one attempt with a fresh fence and lease;
	// see StepClaimParams for the conditions. Exactly one of many
	// concurrent callers succeeds; the others get ErrNotClaimable.
	StepClaim(ctx context.Context, p StepClaimParams) (StepClaimResult, error)
	// StepClaimMany claims several steps (forward attempts) in one
	// transaction, all under one fence, lease and worker: the group commit
	// of a worker that dequeued a batch. Each item is claimed or refused
	// exactly as StepClaim would; the result carries the statuses of every
	// step upstream of the claimed one (its dependencies, theirs, and so
	// on) and their outputs, within p.MaxRead (see StepClaimResult). Outcomes[i] answers p.Items[i].
	// The error is for the batch as a whole (the store could not be
	// asked).
	StepClaimMany(ctx context.Context, p StepClaimManyParams) ([]StepClaimOutcome, error)
	// StepHeartbeat extends the lease of the fence holder, or returns
	// ErrFenceMismatch.
	StepHeartbeat(ctx context.Context, p StepHeartbeatParams) error
	// StepHandBack gives back, un-started, a forward claim whose handler
	// the fence holder will not run (its node is stopping): the step is
	// queued again as if the claim had not been made. Its Attempt goes
	// back to what it was, no attempt is recorded (none is lost, so
	// nothing counts toward a delivery limit) and the fence is cleared,
	// so the next claim runs the same attempt number. A step the fence
	// no longer holds (claimed by another worker, or finished) is left
	// alone and gives ErrFenceMismatch; an unknown one ErrStepNotFound.
	StepHandBack(ctx context.Context, p StepHandBackParams) error
	// StepComplete records the success (or skip) of the fence holder's
	// attempt and, in the same transaction, queues every downstream step
	// whose dependencies are now all succeeded or skipped, returning them.
	// When that leaves no step of a running run unfinished (every step
	// succeeded or skipped), the run becomes succeeded in the same
	// transaction (RunFinished). A stale fence gives ErrFenceMismatch and
	// changes nothing.
	StepComplete(ctx context.Context, p StepCompleteParams) (StepCompleteResult, error)
	// StepCompleteMany records several forward completions (successes and
	// skips; Compensation must be false) in one transaction, each exactly
	// as StepComplete would; Outcomes[i] answers p.Items[i]. With
	// ClaimReleased, steps the batch releases are claimed for the caller
	// in the same transaction instead of being queued (see
	// ReleaseClaim). The error is for the batch as a whole.
	StepCompleteMany(ctx context.Context, p StepCompleteManyParams) ([]StepCompleteOutcome, error)
	// StepFail records the failure of the fence holder's attempt: a retry
	// at p.RetryAt, or dead (compensation_failed for a compensation) when
	// RetryAt is nil. A stale fence gives ErrFenceMismatch.
	StepFail(ctx context.Context, p StepFailParams) (StepRun, error)
	// StepTransition moves the named steps (all steps of the run when
	// p.Steps is empty) whose status is in p.From to p.To, clearing fence
	// and lease, and returns the steps it changed. It is how steps are
	// queued for compensation, cancelled, and requeued from the dead-letter
	// queue (To queued resets Attempt to 0 and NextAttemptAt).
	StepTransition(ctx context.Context, p StepTransitionParams) ([]StepRun, error)
	// StepListQueued lists steps that wait for a worker and have waited
	// since before p.Before: status queued, and compensating steps with no
	// lease and no pending retry. The reconciler re-enqueues them.
	StepListQueued(ctx context.Context, p ListDueParams) ([]StepRun, error)
	// StepListRetryDue lists steps whose retry (forward: retrying;
	// compensation: compensating without a lease) is due at or before
	// p.Before.
	StepListRetryDue(ctx context.Context, p ListDueParams) ([]StepRun, error)
	// StepListLeaseExpired lists running or compensating steps whose lease
	// expired before p.Before.
	StepListLeaseExpired(ctx context.Context, p ListDueParams) ([]StepRun, error)
	// StepReleaseLeases ends at p.Now the unexpired leases that the
	// workers p.Workers (nodes presumed dead) hold on running steps and
	// compensating ones, and returns the steps it released (with their
	// new lease), so that they are taken over at once instead of when
	// each lease expires. Each release is fenced: a step whose lease a
	// claim gave to another worker meanwhile is left alone. The released
	// worker's fence stays valid until the next claim: a presumed-dead
	// worker that is alive after all may still record its outcome (or
	// extend its lease) until another node claims the step.
	StepReleaseLeases(ctx context.Context, p StepReleaseLeasesParams) ([]StepRun, error)
	// StepListDead lists dead steps (the dead-letter queue), newest first.
	StepListDead(ctx context.Context, p StepListDeadParams) (StepPage, error)
	// StepPark parks the fence holder's step (a wait, a sleep or a
	// child): it becomes parked, holding no lease, with a wait row saying
	// what ends it. A WaitChild park creates its child run (p.Child) in
	// the same transaction. A WaitEvent step whose event was published within the lookback
	// window is not parked: the result's Matched is that event. A stale
	// fence gives ErrFenceMismatch.
	StepPark(ctx context.Context, p StepParkParams) (StepParkResult, error)
	// StepListChildDone lists up to limit parked `child` steps whose
	// child run is finished (succeeded, failed, cancelled or
	// compensated): the ones whose resolution a crash interrupted.
	StepListChildDone(ctx context.Context, limit int) ([]StepWait, error)
	// StepWaitGet returns a parked step's wait, or ErrStepNotFound when
	// the step is not parked.
	StepWaitGet(ctx context.Context, runID, step string) (StepWait, error)
	// StepListParkedDue lists the waits due at or before p.Before (a
	// sleep to wake, a wait timed out), soonest first, at most p.Limit,
	// and the due time of the next one after p.Before (zero for none):
	// one range and one probe of the due index.
	StepListParkedDue(ctx context.Context, p ListDueParams) ([]StepWait, time.Time, error)

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

// StepSpec describes one step of a run to create.
type StepSpec struct {
	Name        string
	Deps        []string // names of steps in the same run
	Queue       string
	MaxAttempts int
}

// RunCreateParams are the arguments of Store.RunCreate.
type RunCreateParams struct {
	ID             string // caller-generated (UUIDv7); required
	Workflow       string
	Version        int
	Definition     string // Definition.Version the run starts with (1-64 of [a-z0-9:_-]); "" for none
	Input          []byte // JSON; nil is stored as null
	IdempotencyKey string
	Metadata       map[string]string
	Schedule       string
	ScheduledTick  *time.Time
	StartAt        time.Time // zero means Now
	Now            time.Time
	Steps          []StepSpec
	// Priority is the run's priority, MinPriority..MaxPriority; 0 is the
	// default.
	Priority int
	// ParentRunID and ParentStep name the parent run's `child` step that
	// starts this run (a child workflow); both empty for other runs.
	ParentRunID string
	ParentStep  string
}

// The range of a run's priority (RunCreateParams.Priority): within a
// queue, the ready steps of a higher priority run first.
const (
	MinPriority = -10
	MaxPriority = 10
)

// RunSetPausedParams are the arguments of Store.RunSetPaused.
type RunSetPausedParams struct {
	RunID  string
	Paused bool
	Now    time.Time
}

// RunSetPausedResult is what Store.RunSetPaused returns.
type RunSetPausedResult struct {
	Run   Run       // as it is now
	Steps []StepRun // every step of the run, as it is now
	// Changed is false when the run already was paused (or not paused).
	Changed bool
}

// QueueSetPausedParams are the arguments of Store.QueueSetPaused.
type QueueSetPausedParams struct {
	Queue  string
	Paused bool
	Now    time.Time
}

// RunCreateResult is what Store.RunCreate returns.
type RunCreateResult struct {
	Run     Run
	Steps   []StepRun // the run's steps (for an existing run, as they are now)
	Created bool      // false when an existing run was returned for the key
}

// RunCreateManyParams are the arguments of Store.RunCreateMany.
type RunCreateManyParams struct {
	Items []RunCreateParams
	// ClaimRoots asks for root steps of the runs the batch creates (runs
	// that start at once; not runs that already existed for their key) to
	// be claimed for the caller in the same transaction, as StepClaimMany
	// would claim them: at most Max of them, only steps of the listed
	// queues. Such a step is stored running with the caller's fence and
	// lease and a running attempt, and never goes through the queue; the
	// others are queued as usual. If the caller dies, the lease expires and
	// the step is taken over like any other. Nil claims nothing.
	ClaimRoots *ReleaseClaim
}

// RunCreateOutcome is one item's answer in RunCreateMany.
type RunCreateOutcome struct {
	Result RunCreateResult
	// Claimed holds the root steps claimed for the caller (ClaimRoots),
	// each as StepClaimMany would return it; they also appear, running,
	// in Result.Steps.
	Claimed []StepClaimResult
	Err     error
}

// RunListParams filter and page Store.RunList. Zero values mean no filter.
type RunListParams struct {
	Workflow string
	// Schedule lists only the runs started by the named schedule.
	Schedule string
	// IdempotencyKey lists only the runs started with this key (exact
	// match, across workflows).
	IdempotencyKey string
	Status         []RunStatus
	CreatedAfter   time.Time
	CreatedBefore  time.Time
	Cursor         string // from a previous page's NextCursor
	Limit          int    // default 50, at most 1000
	// NoPayloads leaves the runs' Input and Output nil, unread: a list
	// that shows none of them reads no more than its rows' small columns.
	NoPayloads bool
}

// APIKeyRevokeParams are the arguments of Store.APIKeyRevoke: exactly one
// of ID and Name names the key.
type APIKeyRevokeParams struct {
	ID   string
	Name string
	Now  time.Time
}

// RunPage is one page of runs.
type RunPage struct {
	Runs       []Run
	NextCursor string // empty on the last page
}

// RunTransitionParams are the arguments of Store.RunTransition.
type RunTransitionParams struct {
	RunID  string
	From   []RunStatus
	To     RunStatus
	Output []byte // stored when To is succeeded
	Error  string // stored when not empty
	Now    time.Time
	// CancelPendingSteps also moves the run's waiting, queued and retrying
	// steps to cancelled in the same transaction (for compensating and
	// cancelled).
	CancelPendingSteps bool
	// Undo allows one move out of a terminal status: succeeded ->
	// compensating, for a child run whose parent compensates (From must
	// hold succeeded). Its finish time is cleared.
	Undo bool
}

// RunTransitionResult is what Store.RunTransition returns.
type RunTransitionResult struct {
	Run       Run
	Cancelled []StepRun // steps cancelled by CancelPendingSteps
}

// RunStartParams are the arguments of Store.RunStart.
type RunStartParams struct {
	RunID string
	Now   time.Time
}

// ListDueParams bound the reconciler's queries.
type ListDueParams struct {
	Before time.Time
	Limit  int // default 100, at most 10000
	// Workflows, when not empty, lists only runs and steps of these
	// workflows (an engine reconciles only what it can run), each read
	// from its own index range: a workflow with a large backlog that no
	// node of the caller's kind runs costs nothing. Empty: every
	// workflow.
	Workflows []string
}

// RunDeleteFinishedParams are the arguments of Store.RunDeleteFinished.
type RunDeleteFinishedParams struct {
	// Before: runs that finished at or after it are not read.
	Before time.Time
	// Limit bounds the finished runs one call reads (and so deletes):
	// default 1000, at most 10000.
	Limit int
	// Cursor continues after the runs a previous call read (its
	// NextCursor); empty starts at the oldest finished run.
	Cursor string
	// DryRun deletes nothing: the result counts what would be deleted.
	DryRun bool
}

// RunDeleteFinishedResult is what Store.RunDeleteFinished did (or, with
// DryRun, would do).
type RunDeleteFinishedResult struct {
	// RunIDs are the runs deleted, oldest finish first.
	RunIDs []string
	// Kept counts the runs read and kept because they have a dead step,
	// or are child runs whose parent run is kept (a child goes with its
	// parent's batch, or the first sweep after it).
	Kept int
	// Rows deleted with the runs, by table.
	Steps, Attempts, EventLinks, Events, ScheduleTicks int
	// Actions counts the operator actions (RunActionList) deleted.
	Actions int
	// NextCursor continues the sweep; empty when the call read every
	// remaining run that finished before Before.
	NextCursor string
}

// LeaseParams are the arguments of Store.LeaseAcquire and
// Store.LeaseRelease.
type LeaseParams struct {
	// Name names the lease: 1-64 of [A-Za-z0-9_-].
	Name string
	// Holder is who takes it (a node id): 1-128 printable bytes.
	Holder string
	// Until is when the lease ends unless extended (LeaseAcquire).
	Until time.Time
	// Now is the caller's clock: a lease whose end is before it is free.
	Now time.Time
}

// Handles tells a claim which steps the claiming node can run: the
// workflow's name and the step's. A claim of a step it rejects is refused
// with RefusedUnhandled and changes nothing (no attempt is used). Nil
// accepts every step.
type Handles func(workflow, step string) bool

// StepClaimParams are the arguments of Store.StepClaim.
//
// A forward claim (Compensation false) succeeds when the run is running and
// the step is queued, or retrying with NextAttemptAt at or before Now, or
// running with a lease that expired before Now (a takeover: the lost
// attempt is recorded as lost). It increments Attempt, sets status running
// and writes Fence and LeaseUntil. The claim of a root step of a pending
// run whose StartAt is at or before Now first starts the run, as RunStart
// would (this is how a delayed run starts on time). A refused claim
// returns a *ClaimRefusedError saying why, and when the step becomes
// claimable where that is known.
//
// A compensation claim succeeds when the run is compensating and the step
// is compensating with no lease (or an expired one) and no retry due after
// Now. It increments CompAttempt and writes Fence and LeaseUntil.
//
// Either way the history (AttemptList) shows the attempt, running, from then on.
type StepClaimParams struct {
	RunID        string
	Step         string
	Compensation bool
	Fence        string // fresh token chosen by the caller
	Worker       string
	LeaseUntil   time.Time
	Now          time.Time
	// WithOutputs lists steps whose outputs the result should carry (the
	// step's dependencies, or the step itself for a compensation).
	WithOutputs []string
	// Handles, when set, refuses (RefusedUnhandled) a step the caller
	// cannot run, before anything changes.
	Handles Handles
	// MaxRead bounds what a forward claim loads: see StepClaimResult.
	// Zero means no bound.
	MaxRead int64
}

// StepClaimResult is what Store.StepClaim returns.
type StepClaimResult struct {
	Step StepRun
	Run  Run
	// Outputs holds the outputs that the claimed step reads and that
	// exist: those of the steps in WithOutputs (StepClaim), of every step
	// upstream of it (StepClaimMany and the claims of ReleaseClaim).
	Outputs map[string][]byte
	// Upstream holds the statuses of every step upstream of the claimed
	// one (StepClaimMany and ReleaseClaim only).
	Upstream map[string]StepStatus
	// OutputBytes is the total size of the outputs a forward claim
	// reads, and OutputCount their number, loaded or not (zero for a
	// compensation claim).
	OutputBytes int64
	OutputCount int
	// OverMaxRead reports a forward claim whose run input and outputs
	// together are larger than the claim's MaxRead: the store measured
	// the outputs without loading them, so Outputs is nil. The step is
	// claimed all the same; the caller fails it rather than run it.
	OverMaxRead bool
}

// StepReleaseLeasesParams are the arguments of Store.StepReleaseLeases.
type StepReleaseLeasesParams struct {
	// Workers are the node ids whose leases end: 1 to 100 of them.
	Workers []string
	// Now is when the leases end; leases that expired before it are left
	// as they are.
	Now time.Time
	// Limit bounds how many steps one call releases: default 100, at
	// most 10000.
	Limit int
}

// StepHandBackParams are the arguments of Store.StepHandBack.
type StepHandBackParams struct {
	RunID string
	Step  string
	// Fence is the claim's: the hand-back changes nothing unless it still
	// holds the step's running attempt.
	Fence string
	Now   time.Time
}

// StepHeartbeatParams are the arguments of Store.StepHeartbeat.
type StepHeartbeatParams struct {
	RunID      string
	Step       string
	Fence      string
	LeaseUntil time.Time
	Now        time.Time
}

// StepCompleteParams are the arguments of Store.StepComplete.
type StepCompleteParams struct {
	RunID  string
	Step   string
	Fence  string
	Output []byte
	// Skipped records the step as skipped (its condition was false)
	// rather than succeeded; dependents are released the same way.
	Skipped bool
	// Compensation completes a compensation: the step becomes compensated.
	Compensation bool
	// Parked resolves a parked step (an event matched, a signal, a timer
	// fired) instead of completing a fenced attempt: it succeeds only
	// while the step is parked (Fence is ignored), so of two resolutions
	// racing, one wins and the other gets ErrFenceMismatch.
	Parked bool
	Now    time.Time
}

// StepCompleteResult is what Store.StepComplete returns.
type StepCompleteResult struct {
	Step  StepRun
	Ready []StepRun // downstream steps this completion queued
	// RunFinished is true when this completion moved the run to succeeded.
	RunFinished bool
	// RunParentID is the finished run's parent run (RunFinished, and the
	// run is a child workflow): its `child` step is to be resolved.
	RunParentID string
	// RunStatus is the run's status after the completion (a forward
	// completion of a compensating run needs the saga's attention).
	RunStatus RunStatus
	// Claimed are released steps claimed for the caller (ReleaseClaim),
	// each with its run and what it reads, as StepClaimMany gives them;
	// they are not in Ready.
	Claimed []StepClaimResult
}

// StepClaimItem names one step to claim in StepClaimMany.
type StepClaimItem struct {
	RunID string
	Step  string
}

// StepClaimManyParams are the arguments of Store.StepClaimMany.
type StepClaimManyParams struct {
	Items      []StepClaimItem
	Fence      string // one fresh token for the batch; (run, step, fence) identifies each claim
	Worker     string
	LeaseUntil time.Time
	Now        time.Time
	// Handles, when set, refuses (RefusedUnhandled) the items the caller
	// cannot run, before anything changes for them.
	Handles Handles
	// MaxRead bounds what each claim loads: see StepClaimResult. Zero
	// means no bound.
	MaxRead int64
}

// StepClaimOutcome is one item's answer in StepClaimMany: a result, or
// the error StepClaim would have returned (ErrNotClaimable, ...).
type StepClaimOutcome struct {
	Result StepClaimResult
	Err    error
}

// StepCompleteManyParams are the arguments of Store.StepCompleteMany.
type StepCompleteManyParams struct {
	Items         []StepCompleteParams
	ClaimReleased *ReleaseClaim
}

// ReleaseClaim asks StepCompleteMany to claim, for the caller, steps that
// the batch releases (their last dependency completed), as StepClaimMany
// would claim them, in the same transaction: at most Max of them, and only
// steps of the listed queues. Such a step goes from waiting straight to
// running with the caller's fence and lease, skipping a round trip through
// the queue; the others are queued as usual. If the caller dies, the lease
// expires and the step is taken over like any other.
type ReleaseClaim struct {
	Queues     []string
	Max        int
	Fence      string
	Worker     string
	LeaseUntil time.Time
	// Handles, when set, limits the claim to released steps the caller
	// can run; the others are queued as usual.
	Handles Handles
	// MaxRead bounds what each claim loads: see StepClaimResult. Zero
	// means no bound.
	MaxRead int64
}

// StepCompleteOutcome is one item's answer in StepCompleteMany.
type StepCompleteOutcome struct {
	Result StepCompleteResult
	Err    error
}

// StepFailParams are the arguments of Store.StepFail.
type StepFailParams struct {
	RunID        string
	Step         string
	Fence        string
	Error        string
	RetryAt      *time.Time // nil: dead (or compensation_failed)
	Compensation bool
	Now          time.Time
	// DeadRunStatus, when not empty and the step goes dead, moves a running
	// run to this status (compensating or failed) in the same transaction
	// and cancels the run's waiting, queued and retrying steps (RunReopen
	// can bring them back). A run that is no longer running is left as it
	// is.
	DeadRunStatus RunStatus
	// DeadRunError is stored as the run's error with DeadRunStatus.
	DeadRunError string
	// Parked fails a parked step (a wait's timeout) instead of a fenced
	// attempt: it succeeds only while the step is parked (Fence is
	// ignored); otherwise ErrFenceMismatch.
	Parked bool
	// TimedOut, with Parked, fails the step only if its wait's deadline
	// is at or before Now: a timer that read the wait as due, while
	// another node timed it out and its retry parked it again with a
	// later deadline, gets ErrFenceMismatch instead of failing the retry.
	TimedOut bool
}

// WaitKind is what a parked step waits for.
type WaitKind string

// Wait kinds.
const (
	// WaitEvent waits for an event of a name and correlation value (and
	// accepts a signal too).
	WaitEvent WaitKind = "event"
	// WaitSignal waits for a signal only (human approval).
	WaitSignal WaitKind = "signal"
	// WaitSleep waits until its due time (a durable timer).
	WaitSleep WaitKind = "sleep"
	// WaitChild waits for its child run (StepParkParams.Child) to finish.
	WaitChild WaitKind = "child"
)

// Valid reports whether k is one of the defined wait kinds.
func (k WaitKind) Valid() bool {
	return k == WaitEvent || k == WaitSignal || k == WaitSleep || k == WaitChild
}

// StepParkParams are the arguments of Store.StepPark.
type StepParkParams struct {
	RunID string
	Step  string
	Fence string // the claim's: the step is running under it
	Kind  WaitKind
	// Event and Correlation are what a WaitEvent step waits for.
	Event       string
	Correlation string
	// CorrelationAliases are other stored forms of the same correlation
	// value (the engine's codec hashes it under each of its keys and
	// stores the current key's hash as Correlation): a row stored with
	// any of them matches too. They are never stored; each is locked as
	// Correlation is. At most 16, each a valid correlation.
	CorrelationAliases []string
	// DueAt is when a sleep wakes, or a wait times out; nil for a wait
	// without a timeout (a sleep must have one).
	DueAt *time.Time
	// Child, for a WaitChild step, is the child run to create in the
	// park's transaction (its ParentRunID and ParentStep are RunID and
	// Step); an existing run with its idempotency key is taken instead.
	Child *RunCreateParams
	// EventsSince, for a WaitEvent step, is the start of the lookback
	// window: the newest event of (Event, Correlation) published at or
	// after it is matched at once.
	EventsSince time.Time
	Now         time.Time
}

// StepParkResult is the outcome of Store.StepPark.
type StepParkResult struct {
	// Step is the step as parked (or, with Matched, as it was: still
	// running under the caller's fence).
	Step StepRun
	// Matched is the event, published before the step parked, that
	// completes it: nothing was parked, and the caller completes the step
	// with the event's payload under its fence.
	Matched *Event
	// Child is the child run of a WaitChild park (Created false when it
	// existed), to be dispatched once the park committed.
	Child *RunCreateResult
}

// StepWait is one parked step's wait (Store.StepListParkedDue).
type StepWait struct {
	RunID       string
	Step        string
	Workflow    string
	Kind        WaitKind
	Event       string
	Correlation string
	// ChildRunID is the child run a WaitChild step waits for.
	ChildRunID string
	DueAt      *time.Time
	CreatedAt  time.Time
}

// RunReopenParams are the arguments of Store.RunReopen.
type RunReopenParams struct {
	RunID string
	Steps []string // dead steps to retry
	Now   time.Time
}

// RetryMode says what Store.RunRetry runs again.
type RetryMode string

// Retry modes.
const (
	// RetryFailed runs the dead steps again (all of them, or the one
	// named), keeping every success.
	RetryFailed RetryMode = "failed"
	// RetryFromStep runs the named step and every step downstream of it
	// again, and the run's dead steps.
	RetryFromStep RetryMode = "from_step"
)

// Valid reports whether m is a known retry mode.
func (m RetryMode) Valid() bool { return m == RetryFailed || m == RetryFromStep }

// RunRetryParams are the arguments of Store.RunRetry.
type RunRetryParams struct {
	RunID string
	Mode  RetryMode
	// Step is the step to rerun from (RetryFromStep, required), or the
	// one dead step to retry (RetryFailed; empty: every dead step).
	Step  string
	Actor string // who asked; recorded in the history
	Now   time.Time
}

// StepSkipParams are the arguments of Store.StepSkip.
type StepSkipParams struct {
	RunID  string
	Step   string
	Output []byte // JSON, as the engine stores outputs; may be nil
	Actor  string
	Now    time.Time
}

// RunRetryResult is what a retry, rerun or skip did.
type RunRetryResult struct {
	// Queued are the steps ready to run now: enqueue them.
	Queued []StepRun
	// Action is the history row the call recorded.
	Action RunAction
}

// StepTransitionParams are the arguments of Store.StepTransition.
type StepTransitionParams struct {
	RunID string
	Steps []string // empty: every step of the run
	From  []StepStatus
	To    StepStatus
	Error string // stored when not empty
	Now   time.Time
}

// StepListDeadParams page Store.StepListDead.
type StepListDeadParams struct {
	Workflow string
	Cursor   string
	Limit    int
}

// StepPage is one page of steps.
type StepPage struct {
	Steps      []StepRun
	NextCursor string
}

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

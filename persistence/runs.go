package persistence

import (
	"context"
	"time"
)

// Runs is the part of a Store that creates runs, reads and lists them,
// and moves a run from status to status (the operators' retries and
// pauses included).
type Runs interface {
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
	// RunRetry puts a finished run back to running by an operator's
	// action: its failed steps (RetryFailed) or a step and everything
	// downstream of it (RetryFromStep) run again, and, on a compensated
	// run, every compensated step too, since its work was undone. The
	// action is recorded in the run's history (RunActionList) in the same
	// transaction. A run or step the rules refuse gives a
	// *RetryRefusedError (Is ErrInvalidTransition) and changes nothing.
	RunRetry(ctx context.Context, p RunRetryParams) (RunRetryResult, error)
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

// RunRetryResult is what a retry, rerun or skip did.
type RunRetryResult struct {
	// Queued are the steps ready to run now: enqueue them.
	Queued []StepRun
	// Action is the history row the call recorded.
	Action RunAction
}

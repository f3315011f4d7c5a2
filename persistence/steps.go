package persistence

import (
	"context"
	"time"
)

// Steps is the part of a Store that moves a run's steps through their
// lives: claims and leases, completions and failures, parks and waits,
// dead letters.
type Steps interface {
	// StepSkip marks a dead step of a finished run succeeded with the
	// operator's output (no handler runs) and resumes the run as
	// RunRetry(RetryFailed) would, recording the action. Refusals are
	// *RetryRefusedError.
	StepSkip(ctx context.Context, p StepSkipParams) (RunRetryResult, error)

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

// StepSkipParams are the arguments of Store.StepSkip.
type StepSkipParams struct {
	RunID  string
	Step   string
	Output []byte // JSON, as the engine stores outputs; may be nil
	Actor  string
	Now    time.Time
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

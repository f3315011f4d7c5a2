package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/internal/jsoncheck"
	"github.com/dagflow/dagflow/persistence"
)

// Starting runs: Trigger and TriggerTx, and the trigger loop that creates
// the runs of concurrent Trigger calls in one transaction (claiming their
// root steps for this node when it has free workers).

// TriggerOption sets a per-call option of Trigger and TriggerTx.
type TriggerOption func(*triggerOptions)

type triggerOptions struct {
	key      string
	startAt  time.Time
	delay    time.Duration
	metadata map[string]string
	schedule string
	tick     *time.Time
	created  *bool
	internal string // the reserved key prefix of one of the engine's own runs (internalRun)
	priority int
}

// IdempotencyKey makes Trigger return the existing run when a run of the
// same workflow was already started with key (a repeat with a different
// input is an error wrapping persistence.ErrIdempotencyConflict). Keys
// starting with one of ReservedKeyPrefixes ("child:", "event:",
// "schedule:") belong to the runs dagflow starts itself: Trigger and
// TriggerTx refuse them with a *ReservedKeyError (ErrReservedKey), and a
// key of only whitespace with ErrInvalidKey (see CheckIdempotencyKey).
func IdempotencyKey(key string) TriggerOption { return func(o *triggerOptions) { o.key = key } }

// StartAt delays the run's first steps until t.
func StartAt(t time.Time) TriggerOption { return func(o *triggerOptions) { o.startAt = t } }

// Delay delays the run's first steps by d.
func Delay(d time.Duration) TriggerOption { return func(o *triggerOptions) { o.delay = d } }

// Metadata attaches string metadata to the run; handlers see it in
// steps.Context.Metadata, without the reserved trace keys
// (MetadataTraceparent, MetadataTracestate), which a tracing node sets.
func Metadata(md map[string]string) TriggerOption {
	return func(o *triggerOptions) { o.metadata = md }
}

// Created makes Trigger and TriggerTx report in *created whether the call
// created the run (true) or returned the run that already had its
// idempotency key (false), exactly, on any number of nodes: the store's
// insert decides. An HTTP API answers 201 or 200 by it.
func Created(created *bool) TriggerOption { return func(o *triggerOptions) { o.created = created } }

// Priority sets the run's priority, MinPriority..MaxPriority (0, the
// default, when not given): within each queue, the ready steps of a
// higher priority run are taken first, so a run triggered behind a
// backlog of lower priority steps waits for at most the batches already
// taken. Queues keep their own order (Config.Queues): a
// priority orders steps within a queue, not across queues.
func Priority(p int) TriggerOption { return func(o *triggerOptions) { o.priority = p } }

// The range of Priority.
const (
	MinPriority = persistence.MinPriority
	MaxPriority = persistence.MaxPriority
)

// FromSchedule records that the run was started by a schedule's tick.
func FromSchedule(name string, tick time.Time) TriggerOption {
	return func(o *triggerOptions) { o.schedule = name; t := tick; o.tick = &t }
}

func (e *Engine) createParams(ctx context.Context, workflow string, input any, opts []TriggerOption) (persistence.RunCreateParams, error) {
	w, version, err := e.triggerPlan(ctx, workflow)
	if err != nil {
		return persistence.RunCreateParams{}, err
	}
	raw, err := encodeInput(input)
	if err == nil {
		// Checked on the plain input, on every node: one without the
		// handlers has the schema from the stored definition.
		err = w.CheckInput(raw)
	}
	if err != nil {
		return persistence.RunCreateParams{}, &inputError{workflow: workflow, err: err}
	}
	if raw, err = e.encodePayload(ctx, codec.Input, raw); err != nil {
		return persistence.RunCreateParams{}, fmt.Errorf("engine: workflow %q: %w", workflow, err)
	}
	var o triggerOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.checkKey(); err != nil {
		return persistence.RunCreateParams{}, err
	}
	if o.priority < MinPriority || o.priority > MaxPriority {
		return persistence.RunCreateParams{}, fmt.Errorf("%w: workflow %q: priority %d not in %d..%d", ErrInvalidPriority, workflow, o.priority, MinPriority, MaxPriority)
	}
	// The trigger span's context, for every span of the run.
	o.metadata = e.tracer.inject(ctx, o.metadata)
	id, err := uuid.NewV7()
	if err != nil {
		return persistence.RunCreateParams{}, fmt.Errorf("engine: run id: %w", err)
	}
	now := e.clock.Now()
	startAt := o.startAt
	if o.delay > 0 {
		startAt = now.Add(o.delay)
	}
	p := persistence.RunCreateParams{
		ID:             id.String(),
		Workflow:       w.Name(),
		Version:        w.Version(),
		Definition:     version,
		Input:          raw,
		IdempotencyKey: o.key,
		Metadata:       o.metadata,
		Schedule:       o.schedule,
		ScheduledTick:  o.tick,
		StartAt:        startAt,
		Now:            now,
		Priority:       o.priority,
	}
	for _, s := range w.Steps() {
		p.Steps = append(p.Steps, persistence.StepSpec{
			Name:        s.Name,
			Deps:        s.Deps,
			Queue:       s.Queue,
			MaxAttempts: s.Retry.MaxAttempts,
		})
	}
	return p, nil
}

// encodeInput returns the JSON of a run's input; its error says why the
// input is not JSON (inputError adds the rest).
func encodeInput(input any) ([]byte, error) {
	switch v := input.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, jsoncheck.Check(v)
	case []byte:
		return v, jsoncheck.Check(v)
	default:
		return json.Marshal(v)
	}
}

// inputError reports a run input that is not JSON:
// `engine: workflow "order": invalid input: not valid JSON` (or "too
// deeply nested (limit 10000)"), or that does not match the workflow's
// input schema: `engine: workflow "order": invalid input: at "/total":
// got string, want number`. It wraps ErrInvalidInput and the encoder's
// error or the *dag.InputError.
type inputError struct {
	workflow string
	err      error
}

func (e *inputError) Error() string {
	var ie *dag.InputError
	if errors.As(e.err, &ie) {
		return fmt.Sprintf("engine: workflow %q: invalid input: %s", e.workflow, ie.Detail())
	}
	return fmt.Sprintf("engine: workflow %q: invalid input: %v", e.workflow, e.err)
}

func (e *inputError) Unwrap() []error { return []error{ErrInvalidInput, e.err} }

// Trigger starts a run of workflow with input (any JSON-encodable value, or
// raw JSON as []byte/json.RawMessage) and returns its id. The run is
// committed to the store before Trigger returns and its first steps are
// enqueued (for a run delayed by StartAt or Delay, due at its start time),
// so a nil error means the run will execute, on time, with or without the
// reconciler; if Redis is unreachable the reconciler dispatches it later.
func (e *Engine) Trigger(ctx context.Context, workflow string, input any, opts ...TriggerOption) (runID string, err error) {
	if e.stopped() {
		return "", ErrStopped
	}
	ctx, span := e.tracer.startTrigger(ctx, workflow)
	created := false
	defer func() { e.tracer.endTrigger(span, runID, created, err) }()
	p, err := e.createParams(ctx, workflow, input, opts)
	if err != nil {
		return "", err
	}
	res, err := e.createRun(ctx, p)
	if id, same := e.sameInputRun(ctx, err, p); same {
		reportCreated(opts, false)
		return id, nil
	}
	if err != nil {
		if errors.Is(err, persistence.ErrTooLarge) {
			if plain, derr := e.decodePayload(ctx, codec.Input, p.Input); derr == nil {
				err = e.encodedTooLarge(err, codec.Input, len(plain), len(p.Input))
			}
		}
		return "", fmt.Errorf("engine: trigger %q: %w", workflow, err)
	}
	if res.Created {
		e.stats.runsCreated.Add(1)
		e.metrics.runStarted(p.Workflow)
	}
	created = res.Created
	reportCreated(opts, res.Created)
	return res.Run.ID, nil
}

// reportCreated tells a Created option, if one was given, whether the
// run was created.
func reportCreated(opts []TriggerOption, created bool) {
	var o triggerOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.created != nil {
		*o.created = created
	}
}

// DB returns the store's database, on which to begin the transactions
// passed to TriggerTx:
//
//	db, err := e.DB()
//	tx, err := db.BeginTx(ctx, nil)
//	... insert the order row with tx ...
//	id, err := e.TriggerTx(ctx, tx, "order", input)
//	err = tx.Commit()
//	err = e.Dispatch(ctx, id) // start now, not at the next reconcile pass
//
// A store that does not take caller transactions gives ErrNoTx.
func (e *Engine) DB() (*sql.DB, error) {
	ts, ok := e.store.(persistence.TxStore)
	if !ok {
		return nil, ErrNoTx
	}
	return ts.DB(), nil
}

// TriggerTx creates a run inside tx, a transaction the caller owns
// (*sql.Tx or *sqlx.Tx begun on DB()), so that the caller's rows and the
// run commit or roll back together. Nothing is dispatched before the
// commit: call Dispatch after the commit to start the run at once.
// Without Dispatch the reconciler finds the run's queued steps once they
// have waited one ReconcileInterval, on its next pass: between one and two
// intervals after the commit (2-4 s by default), and never with the
// reconciler off.
func (e *Engine) TriggerTx(ctx context.Context, tx persistence.DBTX, workflow string, input any, opts ...TriggerOption) (runID string, err error) {
	if e.stopped() {
		return "", ErrStopped
	}
	ts, ok := e.store.(persistence.TxStore)
	if !ok {
		return "", ErrNoTx
	}
	ctx, span := e.tracer.startTrigger(ctx, workflow)
	created := false
	defer func() { e.tracer.endTrigger(span, runID, created, err) }()
	p, err := e.createParams(ctx, workflow, input, opts)
	if err != nil {
		return "", err
	}
	res, err := ts.RunCreateTx(ctx, tx, p)
	if id, same := e.sameInputRun(ctx, err, p); same {
		reportCreated(opts, false)
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("engine: trigger %q: %w", workflow, err)
	}
	if res.Created {
		// Counted when created: a transaction the caller rolls back
		// afterwards leaves a run counted that never was.
		e.metrics.runStarted(p.Workflow)
	}
	created = res.Created
	reportCreated(opts, res.Created)
	return res.Run.ID, nil
}

// Dispatch enqueues the queued steps of a run, e.g. right after the
// transaction of a TriggerTx committed; a run that starts later (StartAt,
// Delay) is enqueued for its start time. It is idempotent.
func (e *Engine) Dispatch(ctx context.Context, runID string) error {
	run, err := e.store.RunGet(ctx, runID)
	if err != nil {
		return fmt.Errorf("engine: dispatch run %s: %w", runID, err)
	}
	sts, err := e.store.StepList(ctx, runID)
	if err != nil {
		return fmt.Errorf("engine: dispatch run %s: %w", runID, err)
	}
	if err := e.enqueueCreated(ctx, []persistence.RunCreateResult{{Run: run, Steps: sts}}); err != nil {
		return fmt.Errorf("engine: dispatch run %s: %w", runID, err)
	}
	return nil
}

// triggerReq is one Trigger call waiting for a trigger loop.
type triggerReq struct {
	p    persistence.RunCreateParams
	done chan triggerResult
}

type triggerResult struct {
	res persistence.RunCreateResult
	err error
}

// triggerLoops is how many run-creation transactions may be in flight.
// One: a second makes the batches smaller and its inserts contend with
// the first's and with the committers' writes on the same index pages (run
// ids are time-ordered), for less throughput and slower completions.
const triggerLoops = 1

// createRun stores a run through the trigger loops, which create the runs
// of concurrent Trigger calls in one transaction and enqueue their first
// steps together. An engine that is not running creates it directly.
func (e *Engine) createRun(ctx context.Context, p persistence.RunCreateParams) (persistence.RunCreateResult, error) {
	if e.state.Load() != 1 {
		return e.createDirect(ctx, p)
	}
	req := &triggerReq{p: p, done: make(chan triggerResult, 1)}
	select {
	case e.triggers <- req:
	case <-e.stopTrigger:
		return e.createDirect(ctx, p)
	case <-ctx.Done():
		return persistence.RunCreateResult{}, ctx.Err()
	}
	select {
	case r := <-req.done:
		return r.res, r.err
	case <-ctx.Done():
		// As with any store call cut short, the run may or may not have
		// been created: retry with an idempotency key to be sure.
		return persistence.RunCreateResult{}, ctx.Err()
	}
}

func (e *Engine) createDirect(ctx context.Context, p persistence.RunCreateParams) (persistence.RunCreateResult, error) {
	res, err := e.store.RunCreate(ctx, p)
	if err == nil && res.Created {
		e.enqueueCreated(ctx, []persistence.RunCreateResult{res})
	}
	return res, err
}

// triggerLoop creates the runs of waiting Trigger calls in batches until
// stopTrigger is closed.
func (e *Engine) triggerLoop() {
	defer e.commitWG.Done()
	for {
		var first *triggerReq
		select {
		case first = <-e.triggers:
		case <-e.stopTrigger:
			return
		}
		batch := []*triggerReq{first}
	gather:
		for len(batch) < maxCommitBatch {
			select {
			case r := <-e.triggers:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		ps := make([]persistence.RunCreateParams, len(batch))
		for i, r := range batch {
			ps[i] = r.p
		}
		outs, err := e.createBatch(ps)
		if err != nil {
			for _, r := range batch {
				r.done <- triggerResult{err: err}
			}
			continue
		}
		for i, r := range batch {
			r.done <- triggerResult{res: outs[i].Result, err: outs[i].Err}
		}
	}
}

// createBatch creates runs in one transaction and dispatches them. With
// free slots, root steps of the new runs are claimed in that transaction
// and start here at once, without a trip through Redis and a claim
// transaction (claim at create). A claim that commits after Stop began is
// released and queued for another node: no handler starts once Stop has
// begun.
func (e *Engine) createBatch(ps []persistence.RunCreateParams) ([]persistence.RunCreateOutcome, error) {
	rc, slots := e.releaseClaim(2*len(ps), 0)
	e.stats.createBatches.Add(1)
	e.stats.createItems.Add(int64(len(ps)))
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	outs, err := e.store.RunCreateMany(ctx, persistence.RunCreateManyParams{Items: ps, ClaimRoots: rc})
	cancel()
	if err != nil {
		e.slots.free(slots)
		return nil, err
	}
	var created []persistence.RunCreateResult
	var claimed []persistence.StepClaimResult
	for _, o := range outs {
		if o.Err == nil && o.Result.Created {
			created = append(created, o.Result)
			claimed = append(claimed, o.Claimed...)
		}
	}
	e.stats.claimedAtCreate.Add(int64(len(claimed)))
	// Whether Stop has begun, and the handlers' start, under claimGate:
	// Stop takes it once it has ended fetchCtx, before it waits for the
	// handlers, so they are either started (and waited for) or not at all.
	e.claimGate.RLock()
	stopping := e.fetchCtx.Err() != nil
	if !stopping {
		for _, cl := range claimed {
			e.runEager(cl, rc.Fence)
		}
	}
	e.claimGate.RUnlock()
	if stopping {
		// Stop began during the transaction: run nothing new here.
		e.slots.free(slots)
		for _, cl := range claimed {
			e.handBack(cl, rc.Fence)
		}
	} else {
		e.slots.free(slots - len(claimed))
	}
	// A failed enqueue is logged; the reconciler dispatches the runs.
	e.enqueueCreated(context.Background(), created)
	return outs, nil
}

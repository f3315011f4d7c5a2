package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
	"github.com/dagflow/dagflow/steps"
)

// Engine runs workflows. Create it with New, Register workflows, then
// Start it; Stop it to finish.
type Engine struct {
	cfg   Config
	store persistence.Store
	q     *queue.Queue
	log   *slog.Logger
	clock Clock

	mu        sync.RWMutex
	workflows map[string]*dag.Workflow
	queues    map[string]bool // every queue a registered step uses, and Config.Queues

	state    atomic.Int32 // 0 new, 1 started, 2 stopped
	stopOnce sync.Once
	// fetchCtx ends when Stop begins: no new steps are taken.
	fetchCtx    context.Context
	fetchCancel context.CancelFunc
	// runCtx ends when Stop's deadline passes: running handlers are told
	// to give up and their leases are released.
	runCtx    context.Context
	runCancel context.CancelFunc
	wg        sync.WaitGroup // reconciler, scheduler
	fetchDone chan struct{}  // closed when the fetch loop has ended
	handlers  sync.WaitGroup // running steps
	slots     chan struct{}

	completions chan *completion // to the committers (batch.go)
	stopCommit  chan struct{}
	commitWG    sync.WaitGroup
	triggers    chan *triggerReq // to the trigger loops (batch.go), which run from Start to Stop
	stopTrigger chan struct{}

	inflightMu sync.Mutex
	inflight   map[string]*execution // by task id

	// claimGate is held (read) while a run creation that claimed steps for
	// this node decides whether to start their handlers (batch.go). Stop
	// takes it (write) once it has ended fetchCtx, so that every such
	// creation has either started its handlers (which Stop then waits
	// for) or sees the stop and hands its claims back. No I/O is done
	// under it.
	claimGate sync.RWMutex
	// clockOK wakes a fetch loop paused by clock skew (health.go).
	clockOK   chan struct{}
	redisWarn redisWarnings

	// Schedules (schedule.go): declarations made before Start, and the
	// cron scheduler, made on first use.
	schedMu    sync.Mutex
	schedDecls []persistence.Schedule
	schedOnce  sync.Once
	sched      *cron.Scheduler

	stats counters
}

// New returns an engine for cfg. It does not start workers; call Start.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q, err := queue.New(queue.Config{
		Client:       cfg.Redis,
		Prefix:       cfg.Prefix,
		Now:          cfg.Clock.Now,
		PollInterval: cfg.PollInterval,
		Logger:       cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Engine{
		cfg:       cfg,
		store:     cfg.Store,
		q:         q,
		log:       cfg.Logger.With("node", cfg.NodeID),
		clock:     cfg.Clock,
		workflows: map[string]*dag.Workflow{},
		queues:    map[string]bool{},
		inflight:  map[string]*execution{},
		clockOK:   make(chan struct{}, 1),
		// Unbuffered: a request is taken by a trigger loop or not at all.
		triggers:    make(chan *triggerReq),
		stopTrigger: make(chan struct{}),
	}
	for _, name := range cfg.Queues {
		e.queues[name] = true
	}
	return e, nil
}

// NodeID is this engine's identity in attempts and logs.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// Queue returns the engine's Redis queue, for inspection tools.
func (e *Engine) Queue() *queue.Queue { return e.q }

// Store returns the engine's store.
func (e *Engine) Store() persistence.Store { return e.store }

// Register makes workflows known to the engine. A name registered twice is
// an error. Register workflows on every node before triggering them.
func (e *Engine) Register(workflows ...*dag.Workflow) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range workflows {
		if w == nil {
			return errors.New("engine: Register: nil workflow")
		}
		if _, ok := e.workflows[w.Name()]; ok {
			return &WorkflowError{Workflow: w.Name(), Err: ErrDuplicateWorkflow}
		}
	}
	for _, w := range workflows {
		e.workflows[w.Name()] = w
		for _, s := range w.Steps() {
			e.queues[s.Queue] = true
		}
	}
	return nil
}

// LoadWorkflows loads every YAML workflow in fsys, resolving handler names
// in reg, and registers them.
func (e *Engine) LoadWorkflows(fsys fs.FS, reg *steps.Registry) error {
	wfs, err := dag.LoadFS(fsys, reg)
	if err != nil {
		return err
	}
	return e.Register(wfs...)
}

// Workflow returns a registered workflow, or nil.
func (e *Engine) Workflow(name string) *dag.Workflow {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.workflows[name]
}

// Workflows returns the registered workflows' names.
func (e *Engine) Workflows() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	names := make([]string, 0, len(e.workflows))
	for n := range e.workflows {
		names = append(names, n)
	}
	return names
}

// Start stores the declared schedules, then starts the workers, the
// reconciler and the scheduler. It returns at once; the engine runs until
// Stop. ctx only bounds the start itself.
func (e *Engine) Start(ctx context.Context) error {
	if !e.state.CompareAndSwap(0, 1) {
		if e.state.Load() == 2 {
			return ErrStopped
		}
		return ErrAlreadyStarted
	}
	if err := e.syncSchedules(ctx); err != nil {
		e.state.Store(0)
		return err
	}
	// Before any claim: a node whose clock is off claims nothing.
	e.checkClock(ctx)
	e.fetchCtx, e.fetchCancel = context.WithCancel(context.Background())
	e.runCtx, e.runCancel = context.WithCancel(context.Background())
	e.fetchDone = make(chan struct{})
	e.completions = make(chan *completion, maxCommitBatch)
	e.stopCommit = make(chan struct{})
	e.commitWG.Add(1)
	go e.commitLoop()
	for range triggerLoops {
		e.commitWG.Add(1)
		go e.triggerLoop()
	}
	if !e.cfg.NoWorkers && e.cfg.Concurrency > 0 {
		e.slots = make(chan struct{}, e.cfg.Concurrency)
		go e.fetchLoop()
	} else {
		close(e.fetchDone)
	}
	if e.cfg.ReconcileInterval > 0 {
		e.wg.Add(1)
		go e.reconcileLoop()
	}
	if e.cfg.MaxClockSkew >= 0 {
		e.wg.Add(1)
		go e.clockLoop()
	}
	e.startScheduler()
	e.log.Info("engine started", "concurrency", e.cfg.Concurrency, "queues", e.queueNames())
	return nil
}

// Stop stops taking new steps, waits for running steps until ctx ends,
// then cancels the ones still running and releases their leases so that
// another worker takes them at once. Once Stop has begun no handler
// starts on this node (a step claimed meanwhile, by a run creation in
// flight, is released and queued for another node), and when it returns
// no handler of this node runs. Calls made after Stop return ErrStopped.
// An engine that was never started holds nothing (New does no I/O and
// subscribes to nothing), so it needs no Stop; calling it is harmless.
func (e *Engine) Stop(ctx context.Context) error {
	started := e.state.Load() == 1
	e.state.Store(2)
	var err error
	e.stopOnce.Do(func() {
		defer e.q.Close()
		if !started {
			return
		}
		e.fetchCancel()
		// Let the claims in flight outside the fetch loop settle: after
		// this, nothing but the fetch loop can start a handler.
		e.claimGate.Lock()
		//lint:ignore SA2001 an empty critical section is the barrier
		e.claimGate.Unlock()
		// The fetch loop starts handlers; wait for it to end before
		// waiting for them.
		done := make(chan struct{})
		go func() { <-e.fetchDone; e.handlers.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			e.releaseInflight()
			e.runCancel()
			<-done
		}
		e.runCancel()
		close(e.stopCommit)
		close(e.stopTrigger)
		e.commitWG.Wait()
		e.wg.Wait()
		e.log.Info("engine stopped")
	})
	return err
}

func (e *Engine) stopped() bool { return e.state.Load() == 2 }

// TriggerOption sets a per-call option of Trigger and TriggerTx.
type TriggerOption func(*triggerOptions)

type triggerOptions struct {
	key      string
	startAt  time.Time
	delay    time.Duration
	metadata map[string]string
	schedule string
	tick     *time.Time
}

// IdempotencyKey makes Trigger return the existing run when a run of the
// same workflow was already started with key (a repeat with a different
// input is an error wrapping persistence.ErrIdempotencyConflict).
func IdempotencyKey(key string) TriggerOption { return func(o *triggerOptions) { o.key = key } }

// StartAt delays the run's first steps until t.
func StartAt(t time.Time) TriggerOption { return func(o *triggerOptions) { o.startAt = t } }

// Delay delays the run's first steps by d.
func Delay(d time.Duration) TriggerOption { return func(o *triggerOptions) { o.delay = d } }

// Metadata attaches string metadata to the run; handlers see it in
// steps.Context.Metadata.
func Metadata(md map[string]string) TriggerOption {
	return func(o *triggerOptions) { o.metadata = md }
}

// FromSchedule records that the run was started by a schedule's tick.
func FromSchedule(name string, tick time.Time) TriggerOption {
	return func(o *triggerOptions) { o.schedule = name; t := tick; o.tick = &t }
}

func (e *Engine) createParams(workflow string, input any, opts []TriggerOption) (persistence.RunCreateParams, error) {
	w := e.Workflow(workflow)
	if w == nil {
		return persistence.RunCreateParams{}, &WorkflowError{Workflow: workflow, Err: ErrUnknownWorkflow}
	}
	raw, err := encodeInput(input)
	if err != nil {
		return persistence.RunCreateParams{}, &inputError{workflow: workflow, err: err}
	}
	var o triggerOptions
	for _, opt := range opts {
		opt(&o)
	}
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
		Input:          raw,
		IdempotencyKey: o.key,
		Metadata:       o.metadata,
		Schedule:       o.schedule,
		ScheduledTick:  o.tick,
		StartAt:        startAt,
		Now:            now,
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
		if !json.Valid(v) {
			return nil, errors.New("not valid JSON")
		}
		return v, nil
	case []byte:
		if !json.Valid(v) {
			return nil, errors.New("not valid JSON")
		}
		return v, nil
	default:
		return json.Marshal(v)
	}
}

// inputError reports a run input that is not JSON:
// `engine: workflow "order": invalid input: not valid JSON`. It wraps
// ErrInvalidInput and the encoder's error.
type inputError struct {
	workflow string
	err      error
}

func (e *inputError) Error() string {
	return fmt.Sprintf("engine: workflow %q: invalid input: %v", e.workflow, e.err)
}

func (e *inputError) Unwrap() []error { return []error{ErrInvalidInput, e.err} }

// Trigger starts a run of workflow with input (any JSON-encodable value, or
// raw JSON as []byte/json.RawMessage) and returns its id. The run is
// committed to the store before Trigger returns and its first steps are
// enqueued (for a run delayed by StartAt or Delay, due at its start time),
// so a nil error means the run will execute, on time, with or without the
// reconciler; if Redis is unreachable the reconciler dispatches it later.
func (e *Engine) Trigger(ctx context.Context, workflow string, input any, opts ...TriggerOption) (string, error) {
	if e.stopped() {
		return "", ErrStopped
	}
	p, err := e.createParams(workflow, input, opts)
	if err != nil {
		return "", err
	}
	res, err := e.createRun(ctx, p)
	if err != nil {
		return "", fmt.Errorf("engine: trigger %q: %w", workflow, err)
	}
	if res.Created {
		e.stats.runsCreated.Add(1)
	}
	return res.Run.ID, nil
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
func (e *Engine) TriggerTx(ctx context.Context, tx persistence.DBTX, workflow string, input any, opts ...TriggerOption) (string, error) {
	if e.stopped() {
		return "", ErrStopped
	}
	ts, ok := e.store.(persistence.TxStore)
	if !ok {
		return "", ErrNoTx
	}
	p, err := e.createParams(workflow, input, opts)
	if err != nil {
		return "", err
	}
	res, err := ts.RunCreateTx(ctx, tx, p)
	if err != nil {
		return "", fmt.Errorf("engine: trigger %q: %w", workflow, err)
	}
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

// Cancel cancels an unfinished run: its pending steps are cancelled, and
// steps running now are told to stop (their context ends at their next
// heartbeat). A finished run gives an error wrapping
// persistence.ErrRunFinished.
func (e *Engine) Cancel(ctx context.Context, runID string) error {
	_, err := e.store.RunTransition(ctx, persistence.RunTransitionParams{
		RunID:              runID,
		From:               []persistence.RunStatus{persistence.RunPending, persistence.RunRunning, persistence.RunCompensating},
		To:                 persistence.RunCancelled,
		Error:              "cancelled",
		Now:                e.clock.Now(),
		CancelPendingSteps: true,
	})
	if err != nil {
		return fmt.Errorf("engine: cancel run %s: %w", runID, err)
	}
	e.cancelLocal(runID)
	return nil
}

// RunInfo is a run with its steps and history.
type RunInfo struct {
	Run      persistence.Run
	Steps    []persistence.StepRun
	Attempts []persistence.Attempt
}

// Output returns the run's result: a JSON object mapping each final step
// (one no other step depends on) that succeeded to its output.
func (ri RunInfo) Output() json.RawMessage {
	if ri.Run.Output != nil {
		return ri.Run.Output
	}
	hasDependents := map[string]bool{}
	for _, s := range ri.Steps {
		for _, d := range s.Deps {
			hasDependents[d] = true
		}
	}
	out := map[string]json.RawMessage{}
	for _, s := range ri.Steps {
		if !hasDependents[s.Step] && s.Status == persistence.StepSucceeded && s.Output != nil {
			out[s.Step] = s.Output
		}
	}
	b, _ := json.Marshal(out)
	return b
}

// Step returns the named step of the run, or false.
func (ri RunInfo) Step(name string) (persistence.StepRun, bool) {
	for _, s := range ri.Steps {
		if s.Step == name {
			return s, true
		}
	}
	return persistence.StepRun{}, false
}

// Get returns a run with its steps and attempts.
func (e *Engine) Get(ctx context.Context, runID string) (RunInfo, error) {
	run, err := e.store.RunGet(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	sts, err := e.store.StepList(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	atts, err := e.store.AttemptList(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	return RunInfo{Run: run, Steps: sts, Attempts: atts}, nil
}

// Wait blocks until the run is finished (succeeded, compensated, failed or
// cancelled) or ctx ends, and returns the run.
func (e *Engine) Wait(ctx context.Context, runID string) (persistence.Run, error) {
	delay := 5 * time.Millisecond
	for {
		run, err := e.store.RunGet(ctx, runID)
		if err != nil {
			return persistence.Run{}, err
		}
		if run.Status.Terminal() {
			return run, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return run, ctx.Err()
		case <-t.C:
		}
		if delay < 200*time.Millisecond {
			delay = delay * 3 / 2
		}
	}
}

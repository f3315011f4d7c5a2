package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
	"github.com/dagflow/dagflow/steps"
)

// Engine runs workflows. Create it with New, Register workflows, then
// Start it; Stop it to finish.
type Engine struct {
	timer *parkTimer // the one timer of parked steps (park.go)
	cfg   Config
	store persistence.Store
	// replica routes the API's reads to Config.ReadStore; nil without
	// one (readstore.go).
	replica *replica
	q       *queue.Queue
	log     *slog.Logger
	clock   Clock
	// tracer makes the node's spans (tracing.go); nil without
	// Config.TracerProvider.
	tracer *tracer

	mu        sync.RWMutex
	regMu     sync.Mutex // one Register at a time
	workflows map[string]*dag.Workflow
	hashes    map[string]string // registered workflow -> its plan's hash (definitions.go)
	queues    map[string]bool   // every queue a registered step uses, and Config.Queues
	plans     plans             // plans of other versions and of unregistered workflows
	subs      subscriptionIndex // events -> stored workflows subscribed (subscribers.go)
	// stepLimited holds the queues of registered steps with limits of
	// their own (dag.ConcurrencyKey, dag.RateLimit): see steplimits.go.
	stepLimited map[string]bool
	// outboxNudge makes the outbox loop poll at once (PublishTx).
	outboxNudge chan struct{}
	// pausedQueues are the queues Redis says are paused (pause.go),
	// which claims at create and at release leave alone.
	pausedQueues atomic.Pointer[map[string]bool]

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
	slots     *slotPool      // nil on a node without workers

	completions chan *completion // to the committers (batch.go)
	stopCommit  chan struct{}
	commitWG    sync.WaitGroup
	// commitGone is closed once the committers have ended: an abandoned
	// handler (shutdown.go) that offers an outcome later is refused.
	commitGone  chan struct{}
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
	unhandled unhandledLog
	kinds     atomic.Pointer[[]string] // routingKinds' cache; nil after Register

	// Schedules (scheduler.go): declarations made before Start, and the
	// cron scheduler, made on first use.
	schedMu    sync.Mutex
	schedDecls []persistence.Schedule
	schedOnce  sync.Once
	sched      *cron.Scheduler

	stats   counters
	metrics *metrics // nil without Config.Registerer
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
		Limits:       cfg.queueLimits(),
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
		tracer:    newTracer(cfg.TracerProvider, cfg.NodeID),
		workflows: map[string]*dag.Workflow{},
		hashes:    map[string]string{},
		queues:    map[string]bool{},
		inflight:  map[string]*execution{},
		clockOK:   make(chan struct{}, 1),
		// outboxNudge holds one nudge: more before the loop wakes add
		// nothing.
		outboxNudge: make(chan struct{}, 1),
		timer:       newParkTimer(),
		// Unbuffered: a request is taken by a trigger loop or not at all.
		triggers:    make(chan *triggerReq),
		stopTrigger: make(chan struct{}),
	}
	for _, name := range cfg.Queues {
		e.queues[name] = true
	}
	if cfg.ReadStore != nil {
		e.replica = &replica{store: cfg.ReadStore, maxLag: cfg.ReadStoreMaxLag, nodeID: cfg.NodeID, clock: e.clock, log: e.log.With("component", "read-replica")}
	}
	if cfg.Registerer != nil {
		if e.metrics, err = newMetrics(e, cfg.Registerer); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// NodeID is this engine's identity in attempts and logs.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// Tracing reports whether the engine makes spans (Config.TracerProvider
// is set): a front end such as the HTTP API then extracts its caller's
// trace context for Trigger.
func (e *Engine) Tracing() bool { return e.tracer != nil }

// Queue returns the engine's Redis queue, for inspection tools.
func (e *Engine) Queue() *queue.Queue { return e.q }

// Store returns the engine's store.
func (e *Engine) Store() persistence.Store { return e.store }

// APIKeys returns where the engine's store keeps API keys: what the HTTP
// API authenticates against.
func (e *Engine) APIKeys() persistence.APIKeys { return e.store }

// ChangeFeed returns the feed of step changes of the engine's store, nil
// when the store has none: what a live dashboard polls.
func (e *Engine) ChangeFeed() persistence.ChangeFeed {
	feed, _ := e.store.(persistence.ChangeFeed)
	return feed
}

// Register makes workflows known to the engine: this node runs their
// steps, and their definitions (plans, never code) are stored at Start,
// or at once on a started engine (an error then registers nothing), so
// that every node can list and trigger them. A name registered twice is
// an error. Register a workflow on the nodes that should run it; a node
// without it can still trigger it once a node has stored its definition
// (but fires no schedule of it: schedules are fired by nodes that
// registered their workflow).
func (e *Engine) Register(workflows ...*dag.Workflow) error {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	e.mu.RLock()
	for i, w := range workflows {
		if w == nil {
			e.mu.RUnlock()
			return errors.New("engine: Register: nil workflow")
		}
		_, dup := e.workflows[w.Name()]
		for _, x := range workflows[:i] {
			dup = dup || x.Name() == w.Name()
		}
		if dup {
			e.mu.RUnlock()
			return &WorkflowError{Workflow: w.Name(), Err: ErrDuplicateWorkflow}
		}
	}
	e.mu.RUnlock()
	if e.state.Load() == 1 {
		// Stored before they are used: a run of them records a version
		// every node can read.
		ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
		defer cancel()
		if err := e.storeDefinitions(ctx, workflows); err != nil {
			return err
		}
	}
	e.mu.Lock()
	for _, w := range workflows {
		e.workflows[w.Name()] = w
		e.hashes[w.Name()] = w.Definition().Hash()
		for _, s := range w.Steps() {
			e.queues[s.Queue] = true
			if s.Limits != nil {
				e.markStepLimited(s.Queue)
			}
		}
	}
	e.mu.Unlock()
	e.metrics.register(workflows)
	// After the maps changed: a plan built before holds none of the new
	// handlers, and one being built meanwhile is not kept (plans.gen).
	e.plans.reset()
	e.subs.reset()
	e.kinds.Store(nil)
	return nil
}

// registerTimeout bounds the store write of Register on a started engine.
const registerTimeout = 10 * time.Second

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

// Start checks that the node can work (preflight.go: Redis accepts its
// credentials and allows every command the queue uses, under Prefix; the
// database has this binary's migrations) and returns the reason if not,
// before anything is started. It then stores the declared schedules and
// starts the engine's components (docs/architecture.md draws them), each
// in its goroutine:
//
//   - the committers (committer.go) record the outcomes that handlers
//     send them, a batch per transaction, and claim released steps into
//     free slots;
//   - the trigger loop (trigger.go) creates the runs of Trigger calls, a
//     batch per transaction, and claims root steps into free slots;
//   - the fetcher (fetcher.go) dequeues tasks while the slot pool
//     (slots.go) has room, claims them and starts a goroutine per step
//     (step.go), whose outcome goes to the committers (outcome.go);
//   - the reconciler (reconcile.go) refills Redis from the store;
//   - the clock check (health.go) stops claims on a skewed node;
//   - the scheduler (scheduler.go) fires schedules through Trigger;
//   - the node loop (nodes.go) keeps this node in the node registry.
//
// Before them, Start binds the Redis prefix to the store (isolation.go)
// and records the node in the registry.
//
// It returns at once; the engine runs until Stop, which ends them in the
// reverse order. ctx only bounds the start itself.
func (e *Engine) Start(ctx context.Context) error {
	if !e.state.CompareAndSwap(0, 1) {
		if e.state.Load() == 2 {
			return ErrStopped
		}
		return ErrAlreadyStarted
	}
	if err := e.preflight(ctx); err != nil {
		e.state.Store(0)
		return err
	}
	// Before anything touches the queues: a prefix of another
	// database's is not this engine's to work. A Redis that does not
	// answer is not Start's error (nodes ride out Redis outages); the
	// fetch loop binds the prefix before its first claim.
	if err := e.bindNamespace(ctx); errors.Is(err, ErrNamespaceConflict) {
		e.state.Store(0)
		return err
	} else if err != nil {
		e.log.Warn("binding the Redis prefix to the store failed; the node claims nothing until it is bound", "err", err)
	}
	if err := e.storeDefinitions(ctx, e.registeredWorkflows()); err != nil {
		e.state.Store(0)
		return err
	}
	e.markStoredLimits(ctx)
	if err := e.syncSchedules(ctx); err != nil {
		e.state.Store(0)
		return err
	}
	started := e.clock.Now()
	if err := e.heartbeatNode(ctx, started); err != nil {
		e.state.Store(0)
		return fmt.Errorf("engine: node registry: %w", err)
	}
	// Before any claim: a node whose clock is off claims nothing.
	e.checkClock(ctx)
	e.fetchCtx, e.fetchCancel = context.WithCancel(context.Background())
	e.runCtx, e.runCancel = context.WithCancel(context.Background())
	e.fetchDone = make(chan struct{})
	e.completions = make(chan *completion, maxCommitBatch)
	e.stopCommit = make(chan struct{})
	e.commitGone = make(chan struct{})
	e.commitWG.Add(1)
	go e.commitLoop()
	for range triggerLoops {
		e.commitWG.Add(1)
		go e.triggerLoop()
	}
	if !e.cfg.NoWorkers && e.cfg.Concurrency > 0 {
		e.slots = newSlotPool(e.cfg.Concurrency)
		e.metrics.started(e.slots)
		e.watchPausedQueues(ctx)
		e.every(pauseWatchInterval, false, e.watchPausedQueues)
		go e.fetchLoop()
	} else {
		close(e.fetchDone)
	}
	if e.cfg.ReconcileInterval > 0 {
		e.every(e.cfg.ReconcileInterval, false, e.reconcilePass)
	}
	if e.cfg.OutboxInterval > 0 {
		e.wg.Add(1)
		go e.outboxLoop()
	}
	e.wg.Add(1)
	go e.timerLoop()
	if e.cfg.MaxClockSkew >= 0 {
		e.every(clockCheckEvery, false, e.checkClock)
	}
	e.nodeLoop(started)
	if e.cfg.Retention.Keep > 0 {
		e.every(e.cfg.Retention.Interval, false, e.retentionPass)
	}
	e.startScheduler()
	e.log.Info("engine started", "concurrency", e.cfg.Concurrency, "queues", e.queueNames())
	return nil
}

// Stop stops taking new steps, waits for running steps until ctx ends,
// then cancels the ones still running and releases their leases so that
// another worker takes them at once, and returns ctx's error. Once Stop
// has begun no handler starts on this node (a step claimed meanwhile, by
// a run creation in flight, is released and queued for another node).
// A handler that ignores its cancellation gets Config.StopGrace more to
// return; Stop then returns without it, with an *AbandonedError
// (ErrHandlersAbandoned) naming its run and step: whatever it does
// afterwards is not recorded, and its step is another node's to run.
// Otherwise no handler of this node runs when Stop returns. Calls made
// after Stop return ErrStopped.
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
			e.releaseInflight()
			e.runCancel()
			err = e.awaitGrace(ctx.Err(), done)
		}
		e.runCancel()
		close(e.stopCommit)
		close(e.stopTrigger)
		e.commitWG.Wait()
		close(e.commitGone)
		e.wg.Wait()
		e.log.Info("engine stopped")
	})
	return err
}

func (e *Engine) stopped() bool { return e.state.Load() == 2 }

// queueNames are the queues this node works: Config.Queues, or else every
// queue of the registered workflows.
func (e *Engine) queueNames() []string {
	if len(e.cfg.Queues) > 0 {
		return e.cfg.Queues
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	names := make([]string, 0, len(e.queues))
	for n := range e.queues {
		names = append(names, n)
	}
	if len(names) == 0 {
		return []string{dag.DefaultQueueName}
	}
	sort.Strings(names)
	return names
}

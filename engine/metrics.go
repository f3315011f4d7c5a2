package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
)

// Prometheus metrics (Config.Registerer). Every label is low-cardinality:
// workflow, step, queue, status, schedule, reason — names an operator
// declared, never a run id or key. Counters and histograms count what
// this node did (sum them over nodes); the gauges of the backlog (queue
// depth, oldest age, dead letters) describe the shared store and Redis,
// so every node reports the same values (aggregate them with max).
//
// The hot path resolves no label: the children of every (workflow, step)
// are made once, at Register (or on first use for a step of a workflow
// this node did not register), and looked up in a copy-on-write map.

// Metric label values of a step's end and of a compensation's.
const (
	metricSucceeded   = "succeeded"
	metricSkipped     = "skipped"
	metricDead        = "dead"
	metricCancelled   = "cancelled"
	metricCompensated = "compensated"
	metricFailed      = "failed"
)

// Reasons of dagflow_reconciler_requeued_total.
const (
	requeueQueued       = "queued"
	requeueRetryDue     = "retry_due"
	requeueLeaseExpired = "lease_expired"
)

// Histogram buckets, in seconds.
var (
	stepBuckets     = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	dispatchBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	runBuckets      = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600}
)

const (
	// metricsRefreshEvery is how old the cached gauges (queue depth and
	// oldest age, dead letters) may be before a scrape refreshes them:
	// scrapes more often than this cost no query.
	metricsRefreshEvery = 5 * time.Second
	// metricsRefreshTimeout bounds one refresh; a scrape then reports
	// the values of the last refresh that worked.
	metricsRefreshTimeout = 3 * time.Second
	// metricsOldestScan bounds the queued and retry-due steps read, oldest
	// first, to find each queue's oldest.
	metricsOldestScan = 256
	// metricsDeadPage and metricsDeadMax bound the count of a workflow's
	// dead letters: at most metricsDeadMax/metricsDeadPage pages of the
	// dead-letter queue (the store has no count query); a workflow with
	// more reports metricsDeadMax.
	metricsDeadPage = 1000
	metricsDeadMax  = 10000
)

// stepKey names a step of a workflow.
type stepKey struct{ workflow, step string }

// stepMetrics are one step's metric children.
type stepMetrics struct {
	succeeded, skipped, dead, cancelled prometheus.Counter
	retries                             prometheus.Counter
	duration                            prometheus.Observer
}

// runMetrics are one workflow's metric children, per run status where
// the metric has one.
type runMetrics struct {
	started                          prometheus.Counter
	finished                         map[persistence.RunStatus]prometheus.Counter
	duration                         map[persistence.RunStatus]prometheus.Observer
	compensated, compensationsFailed prometheus.Counter
}

// metrics are an engine's Prometheus metrics; nil when
// Config.Registerer is nil, and every method of a nil *metrics does
// nothing.
type metrics struct {
	e *Engine

	runsStarted    *prometheus.CounterVec
	runsFinished   *prometheus.CounterVec
	runDuration    *prometheus.HistogramVec
	stepsFinished  *prometheus.CounterVec
	stepDuration   *prometheus.HistogramVec
	stepRetries    *prometheus.CounterVec
	dispatch       *prometheus.HistogramVec
	compensations  *prometheus.CounterVec
	scheduleLag    *prometheus.GaugeVec
	scheduleMissed *prometheus.CounterVec
	requeued       *prometheus.CounterVec

	// Copy-on-write caches of resolved children: read without a lock,
	// replaced under mu.
	mu     sync.Mutex
	steps  atomic.Pointer[map[stepKey]*stepMetrics]
	runs   atomic.Pointer[map[string]*runMetrics]
	queues atomic.Pointer[map[string]prometheus.Observer]

	gauges gaugeCache
	slots  atomic.Pointer[slotPool] // set by Start on a node with workers
}

// newMetrics makes the engine's metrics and registers them on reg.
func newMetrics(e *Engine, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		e: e,
		runsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dagflow_runs_started_total",
			Help: "Runs this process created: its Trigger and TriggerTx calls, HTTP API, events, schedule ticks and child runs (a repeated idempotency key creates none; runs created by other processes, such as the dagflow trigger command, are not counted).",
		}, []string{"workflow"}),
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dagflow_runs_finished_total",
			Help: "Runs this node moved to a terminal status: succeeded, failed, compensated or cancelled.",
		}, []string{"workflow", "status"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dagflow_run_duration_seconds",
			Help:    "Time from a run's start to its terminal status, for the runs this node finished.",
			Buckets: runBuckets,
		}, []string{"workflow", "status"}),
		stepsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dagflow_steps_finished_total",
			Help: "Steps this node ran to an end: succeeded, skipped, dead (dead-lettered) or cancelled.",
		}, []string{"workflow", "step", "status"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dagflow_step_duration_seconds",
			Help:    "Time a step's handler (its when condition included) ran, per attempt.",
			Buckets: stepBuckets,
		}, []string{"workflow", "step"}),
		stepRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dagflow_step_retries_total",
			Help: "Failed forward attempts that this node scheduled for a retry.",
		}, []string{"workflow", "step"}),
		dispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dagflow_step_dispatch_seconds",
			Help:    "Time from a step becoming ready (queued) to its handler starting, for first attempts.",
			Buckets: dispatchBuckets,
		}, []string{"queue"}),
		compensations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dagflow_compensations_total",
			Help: "Compensations this node ran to an end: compensated, or failed (dead-lettered).",
		}, []string{"workflow", "status"}),
		scheduleLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dagflow_schedule_lag_seconds",
			Help: "Time from a schedule's tick to the creation of its run, for the last tick this node fired.",
		}, []string{"schedule"}),
		scheduleMissed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dagflow_schedule_missed_total",
			Help: "Schedule ticks that no node fired in time and that this node's pass dropped by the catch-up policy.",
		}, []string{"schedule"}),
		requeued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dagflow_reconciler_requeued_total",
			Help: "Tasks this node's reconciler put back into Redis, by reason: queued, retry_due, lease_expired.",
		}, []string{"reason"}),
	}
	s := &e.stats
	cs := []prometheus.Collector{
		m.runsStarted, m.runsFinished, m.runDuration, m.stepsFinished, m.stepDuration, m.stepRetries,
		m.dispatch, m.compensations, m.scheduleLag, m.scheduleMissed, m.requeued,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dagflow_stale_completions_total",
			Help: "Outcomes this node refused to record because the attempt had lost its lease (a late worker's result).",
		}, func() float64 { return float64(s.staleCompletions.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dagflow_store_errors_total",
			Help: "Store calls of this node's workers that failed (database unreachable, refused or timed out).",
		}, func() float64 { return float64(s.errors.Load() - s.redisErrors.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dagflow_redis_errors_total",
			Help: "Redis calls of this node that failed (Redis unreachable, refused or timed out).",
		}, func() float64 { return float64(s.redisErrors.Load()) }),
		&gaugeCollector{m: m}, nodeInfo(e.cfg.NodeID),
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			// All or nothing: the registry is left as it was.
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("engine: Config.Registerer: %w", err)
		}
	}
	for _, vec := range []*prometheus.CounterVec{m.requeued} {
		for _, r := range []string{requeueQueued, requeueRetryDue, requeueLeaseExpired} {
			vec.WithLabelValues(r) // exported at zero from the start, for rate()
		}
	}
	m.steps.Store(&map[stepKey]*stepMetrics{})
	m.runs.Store(&map[string]*runMetrics{})
	m.queues.Store(&map[string]prometheus.Observer{})
	return m, nil
}

// register resolves the children of the workflows' steps, runs and
// queues, so that steps find them made and the metrics are exported at
// zero before their first event.
func (m *metrics) register(wfs []*dag.Workflow) {
	if m == nil {
		return
	}
	for _, w := range wfs {
		m.run(w.Name())
		for _, s := range w.Steps() {
			m.step(w.Name(), s.Name)
			m.queue(s.Queue)
		}
	}
}

// step returns the children of a step, made on first use.
func (m *metrics) step(workflow, step string) *stepMetrics {
	k := stepKey{workflow, step}
	if c, ok := (*m.steps.Load())[k]; ok {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.steps.Load()
	if c, ok := old[k]; ok {
		return c
	}
	c := &stepMetrics{
		succeeded: m.stepsFinished.WithLabelValues(workflow, step, metricSucceeded),
		skipped:   m.stepsFinished.WithLabelValues(workflow, step, metricSkipped),
		dead:      m.stepsFinished.WithLabelValues(workflow, step, metricDead),
		cancelled: m.stepsFinished.WithLabelValues(workflow, step, metricCancelled),
		retries:   m.stepRetries.WithLabelValues(workflow, step),
		duration:  m.stepDuration.WithLabelValues(workflow, step),
	}
	next := make(map[stepKey]*stepMetrics, len(old)+1)
	for kk, v := range old {
		next[kk] = v
	}
	next[k] = c
	m.steps.Store(&next)
	return c
}

// runStatuses are the terminal run statuses that the run metrics have
// children for.
var runStatuses = []persistence.RunStatus{persistence.RunSucceeded, persistence.RunFailed, persistence.RunCompensated, persistence.RunCancelled}

// run returns the children of a workflow's runs, made on first use.
func (m *metrics) run(workflow string) *runMetrics {
	if c, ok := (*m.runs.Load())[workflow]; ok {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.runs.Load()
	if c, ok := old[workflow]; ok {
		return c
	}
	c := &runMetrics{
		started:             m.runsStarted.WithLabelValues(workflow),
		finished:            make(map[persistence.RunStatus]prometheus.Counter, len(runStatuses)),
		duration:            make(map[persistence.RunStatus]prometheus.Observer, len(runStatuses)),
		compensated:         m.compensations.WithLabelValues(workflow, metricCompensated),
		compensationsFailed: m.compensations.WithLabelValues(workflow, metricFailed),
	}
	for _, st := range runStatuses {
		c.finished[st] = m.runsFinished.WithLabelValues(workflow, string(st))
		c.duration[st] = m.runDuration.WithLabelValues(workflow, string(st))
	}
	next := make(map[string]*runMetrics, len(old)+1)
	for kk, v := range old {
		next[kk] = v
	}
	next[workflow] = c
	m.runs.Store(&next)
	return c
}

// queue returns the dispatch histogram's child of a queue, made on first
// use.
func (m *metrics) queue(name string) prometheus.Observer {
	if c, ok := (*m.queues.Load())[name]; ok {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.queues.Load()
	if c, ok := old[name]; ok {
		return c
	}
	c := m.dispatch.WithLabelValues(name)
	next := make(map[string]prometheus.Observer, len(old)+1)
	for kk, v := range old {
		next[kk] = v
	}
	next[name] = c
	m.queues.Store(&next)
	return c
}

// started records the slot pool of a started node with workers.
func (m *metrics) started(p *slotPool) {
	if m == nil || p == nil {
		return
	}
	m.slots.Store(p)
}

// runStarted counts a run a Trigger created.
func (m *metrics) runStarted(workflow string) {
	if m == nil {
		return
	}
	m.run(workflow).started.Inc()
}

// runFinished counts a run this node moved to a terminal status, with
// its duration from its start (its creation, if it never started) to
// end (now, if the store did not say).
func (m *metrics) runFinished(run persistence.Run, status persistence.RunStatus, now time.Time) {
	if m == nil || run.Workflow == "" {
		return // a store that did not return the run: no label to count it under
	}
	c := m.run(run.Workflow)
	fin, ok := c.finished[status]
	if !ok {
		return
	}
	fin.Inc()
	start := run.CreatedAt
	if run.StartedAt != nil {
		start = *run.StartedAt
	}
	end := now
	if run.FinishedAt != nil {
		end = *run.FinishedAt
	}
	if !start.IsZero() && !end.Before(start) {
		c.duration[status].Observe(end.Sub(start).Seconds())
	}
}

// stepStarted observes how long a step's first attempt waited from
// queued to its handler's start. A retry's wait (from the end of its
// backoff) is not in the claim, so it is not observed.
func (m *metrics) stepStarted(s persistence.StepRun, now time.Time) {
	if m == nil || s.Attempt != 1 || s.QueuedAt == nil {
		return
	}
	if d := now.Sub(*s.QueuedAt); d >= 0 {
		m.queue(s.Queue).Observe(d.Seconds())
	}
}

// stepRan observes how long a step's handler ran.
func (m *metrics) stepRan(workflow, step string, d time.Duration) {
	if m == nil {
		return
	}
	m.step(workflow, step).duration.Observe(d.Seconds())
}

// stepFinished counts a step that ended with status (one of the
// metric* step statuses).
func (m *metrics) stepFinished(workflow, step, status string) {
	if m == nil {
		return
	}
	c := m.step(workflow, step)
	switch status {
	case metricSucceeded:
		c.succeeded.Inc()
	case metricSkipped:
		c.skipped.Inc()
	case metricDead:
		c.dead.Inc()
	case metricCancelled:
		c.cancelled.Inc()
	}
}

// stepRetried counts a failed attempt scheduled for a retry.
func (m *metrics) stepRetried(workflow, step string) {
	if m == nil {
		return
	}
	m.step(workflow, step).retries.Inc()
}

// compensationEnded counts a compensation that succeeded, or
// dead-lettered (ok false).
func (m *metrics) compensationEnded(workflow string, ok bool) {
	if m == nil {
		return
	}
	c := m.run(workflow)
	if ok {
		c.compensated.Inc()
	} else {
		c.compensationsFailed.Inc()
	}
}

// scheduleFired records the lag of a tick whose run this node created.
func (m *metrics) scheduleFired(schedule string, tick, now time.Time) {
	if m == nil {
		return
	}
	m.scheduleLag.WithLabelValues(schedule).Set(max(0, now.Sub(tick).Seconds()))
}

// scheduleMissedTicks counts ticks a pass dropped; n = 0 only makes the
// series exist at 0 before its first miss.
func (m *metrics) scheduleMissedTicks(schedule string, n int) {
	if m == nil {
		return
	}
	m.scheduleMissed.WithLabelValues(schedule).Add(float64(n))
}

// reconciled counts tasks the reconciler put back, by reason.
func (m *metrics) reconciled(reason string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.requeued.WithLabelValues(reason).Add(float64(n))
}

// gaugeCache holds the gauges that need a query, from the last refresh.
type gaugeCache struct {
	mu     sync.Mutex // one refresh at a time; guards the fields
	at     time.Time  // last refresh attempt (monotonic: a real wait)
	depth  map[string]float64
	oldest map[string]float64
	dead   map[string]float64
}

var (
	descQueueDepth = prometheus.NewDesc("dagflow_queue_depth",
		"Tasks ready in a queue's Redis list, waiting for a worker (delayed retries are counted once due and promoted). The same on every node.",
		[]string{"queue"}, nil)
	descQueueOldest = prometheus.NewDesc("dagflow_queue_oldest_age_seconds",
		"Age of a queue's oldest step waiting for a worker: queued since, or retry due since. The same on every node.",
		[]string{"queue"}, nil)
	descDeadLetters = prometheus.NewDesc("dagflow_dead_letters",
		"Dead steps (the dead-letter queue) of a workflow, counted up to 10000. The same on every node.",
		[]string{"workflow"}, nil)
	descWorkerSlots = prometheus.NewDesc("dagflow_worker_slots",
		"This node's step slots (Config.Concurrency): busy running a step, or free (0 and 0 on a node without workers).",
		[]string{"state"}, nil)
	descReplicaLag = prometheus.NewDesc("dagflow_read_replica_lag_seconds",
		"How far behind the primary the read replica (Config.ReadStore) was at its last check: 0 once it has this node's last heartbeat. Only on a node with a read replica.",
		nil, nil)
	descReplicaUsed = prometheus.NewDesc("dagflow_read_replica_used",
		"1 while the API's reads go to the read replica (Config.ReadStore), 0 while they go to the primary (it lags over ReadStoreMaxLag, is behind in schema or fails). Only on a node with a read replica.",
		nil, nil)
)

// gaugeCollector exports the gauges that need a query from gaugeCache,
// refreshing it when a scrape finds it older than metricsRefreshEvery,
// and the worker slots, which need none.
type gaugeCollector struct{ m *metrics }

// Describe implements prometheus.Collector.
func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQueueDepth
	ch <- descQueueOldest
	ch <- descDeadLetters
	ch <- descWorkerSlots
	ch <- descReplicaLag
	ch <- descReplicaUsed
}

// Collect implements prometheus.Collector.
func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	// Busy counts the steps running, not the pool's taken slots: the
	// fetch loop holds one of those while it waits for tasks.
	busy, free := 0, 0
	if p := c.m.slots.Load(); p != nil {
		e := c.m.e
		e.inflightMu.Lock()
		busy = len(e.inflight)
		e.inflightMu.Unlock()
		free = max(0, cap(p.ch)-busy)
	}
	ch <- prometheus.MustNewConstMetric(descWorkerSlots, prometheus.GaugeValue, float64(busy), "busy")
	ch <- prometheus.MustNewConstMetric(descWorkerSlots, prometheus.GaugeValue, float64(free), "free")
	if r := c.m.e.replica; r != nil {
		lag, used := r.current(context.Background())
		ch <- prometheus.MustNewConstMetric(descReplicaLag, prometheus.GaugeValue, lag.Seconds())
		ch <- prometheus.MustNewConstMetric(descReplicaUsed, prometheus.GaugeValue, b2f(used))
	}

	g := &c.m.gauges
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() || time.Since(g.at) >= metricsRefreshEvery {
		g.at = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), metricsRefreshTimeout)
		c.m.refresh(ctx, g)
		cancel()
	}
	for q, v := range g.depth {
		ch <- prometheus.MustNewConstMetric(descQueueDepth, prometheus.GaugeValue, v, q)
	}
	for q, v := range g.oldest {
		ch <- prometheus.MustNewConstMetric(descQueueOldest, prometheus.GaugeValue, v, q)
	}
	for w, v := range g.dead {
		ch <- prometheus.MustNewConstMetric(descDeadLetters, prometheus.GaugeValue, v, w)
	}
}

// refresh reads the cached gauges: one Redis call per queue, two store
// reads for the oldest waiting steps, and one per workflow (more only
// past metricsDeadPage dead letters) for the dead letters. A value that
// could not be read keeps its last one; the failure is logged.
func (m *metrics) refresh(ctx context.Context, g *gaugeCache) {
	e := m.e
	now := e.clock.Now()
	queues := e.allQueues()
	workflows := e.registeredNames()
	depth := make(map[string]float64, len(queues))
	for q := range queues {
		st, err := e.q.Stats(ctx, q)
		if err != nil {
			e.log.Warn("metrics: reading the queue depth failed", "queue", q, "err", err)
			if v, ok := g.depth[q]; ok {
				depth[q] = v
			}
			continue
		}
		depth[q] = float64(st.Ready)
	}
	g.depth = depth

	if oldest, err := m.oldestWaiting(ctx, now, workflows, queues); err != nil {
		e.log.Warn("metrics: reading the oldest waiting steps failed", "err", err)
	} else {
		g.oldest = oldest
	}

	if len(workflows) == 0 {
		// A node that runs nothing (an API node) reports every stored
		// workflow's.
		defs, err := e.store.DefinitionList(ctx, persistence.DefinitionListParams{})
		if err != nil {
			e.log.Warn("metrics: listing workflows failed", "err", err)
		}
		for _, d := range defs {
			workflows = append(workflows, d.Workflow)
		}
	}
	dead := make(map[string]float64, len(workflows))
	for _, w := range workflows {
		n, err := m.countDead(ctx, w)
		if err != nil {
			e.log.Warn("metrics: counting dead letters failed", "workflow", w, "err", err)
			if v, ok := g.dead[w]; ok {
				dead[w] = v
			}
			continue
		}
		dead[w] = float64(n)
	}
	g.dead = dead
}

// oldestWaiting returns, per queue, the age of its oldest step waiting
// for a worker: queued, or retrying with its retry due. It reads the
// metricsOldestScan oldest of each kind (index-served): a queue none of
// whose waiting steps is among them reports the age of none, 0.
func (m *metrics) oldestWaiting(ctx context.Context, now time.Time, workflows []string, queues map[string]bool) (map[string]float64, error) {
	e := m.e
	out := make(map[string]float64, len(queues))
	for q := range queues {
		out[q] = 0
	}
	see := func(q string, since *time.Time) {
		if since == nil {
			return
		}
		if age := now.Sub(*since).Seconds(); age > out[q] {
			out[q] = age
		}
	}
	p := persistence.ListDueParams{Before: now, Limit: metricsOldestScan, Workflows: workflows}
	queued, err := e.store.StepListQueued(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, s := range queued {
		if s.Status == persistence.StepQueued {
			see(s.Queue, s.QueuedAt)
		}
	}
	retries, err := e.store.StepListRetryDue(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, s := range retries {
		if s.Status == persistence.StepRetrying {
			see(s.Queue, s.NextAttemptAt)
		}
	}
	return out, nil
}

// countDead counts a workflow's dead letters, up to metricsDeadMax.
func (m *metrics) countDead(ctx context.Context, workflow string) (int, error) {
	n := 0
	cursor := ""
	for n < metricsDeadMax {
		page, err := m.e.store.StepListDead(ctx, persistence.StepListDeadParams{Workflow: workflow, Cursor: cursor, Limit: metricsDeadPage})
		if err != nil {
			return 0, err
		}
		n += len(page.Steps)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	return min(n, metricsDeadMax), nil
}

// b2f is 1 for true, 0 for false: a gauge of a condition.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

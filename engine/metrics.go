package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

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
	m := newMetricVecs(e)
	if err := registerAll(reg, m.collectors()); err != nil {
		return nil, err
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

// newMetricVecs makes the engine's metric vectors, not yet registered.
func newMetricVecs(e *Engine) *metrics {
	return &metrics{
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
}

// collectors are every collector of the metrics: the vectors, the
// counters read from the engine's running totals, the gauges read by a
// collector, and dagflow_node_info.
func (m *metrics) collectors() []prometheus.Collector {
	e := m.e
	s := &e.stats
	return []prometheus.Collector{
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
}

// registerAll registers cs on reg, all or nothing: if one fails, those
// registered before it are unregistered, leaving the registry as it was.
func registerAll(reg prometheus.Registerer, cs []prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			// All or nothing: the registry is left as it was.
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("engine: Config.Registerer: %w", err)
		}
	}
	return nil
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

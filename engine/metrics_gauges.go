package engine

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dagflow/dagflow/persistence"
)

// The gauges of the backlog (queue depth, oldest age, dead letters),
// read by a collector from a cache refreshed at most every
// metricsRefreshEvery, and the worker slots and read replica, read at
// each scrape.

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

package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/persistence"
)

// Clock tells the engine the time. Every time the engine writes or
// compares — due times, leases, retries, schedules, the queue's — comes
// from it, so tests can drive time (see enginetest). Only real waits are
// timed by Go's timers and monotonic clock: how long a completion is
// tried again against a store that does not answer, and the pauses
// between tries.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the wall clock.
var SystemClock Clock = systemClock{}

// Config configures an Engine. Zero values mean the defaults documented on
// each field; Store and Redis are required. New refuses a configuration
// the node could not work with, naming the field and the value (an
// invalid queue name, a positive interval under 1ms: a missing unit).
type Config struct {
	// Store is the durable state (MySQL, or SQLite for the embedded default).
	Store persistence.Store
	// ReadStore, when set, serves the reads of the HTTP API and the
	// dashboard (Get, Runs, DeadLetters, ScheduleHistory): a store opened
	// on a read replica of Store's database, without migrations. Every
	// other read and every write (claims, the reconciler, Wait, the
	// actions) uses Store. A run Get cannot find on the replica is read
	// from Store (read-your-writes for a run just triggered), and while
	// the replica lags more than ReadStoreMaxLag, or its schema is behind
	// this binary, or it does not answer, the reads go to Store (see
	// readstore.go). The lag is measured with this node's own heartbeats
	// in the node registry, so it needs no privilege on the replica and
	// is known once the engine has started. Default none: Store serves
	// everything.
	ReadStore persistence.Store
	// ReadStoreMaxLag is how far behind the primary ReadStore may be and
	// still serve reads. It must be at least twice NodeHeartbeat, the
	// granularity of the measure. Default three heartbeats (15s with the
	// default NodeHeartbeat).
	ReadStoreMaxLag time.Duration
	// Redis is the dispatch queue's client: single, Sentinel or Cluster.
	Redis redis.UniversalClient
	// Prefix namespaces every Redis key. Default "dagflow". At most 100
	// bytes, without braces, spaces or control characters.
	Prefix string
	// Logger receives the engine's logs. Default slog.Default().
	Logger *slog.Logger
	// Clock is the engine's time source. Default the wall clock.
	Clock Clock
	// Concurrency is how many steps this node runs at once. Default 10.
	Concurrency int
	// Queues are the queues this node's workers take steps from, in
	// priority order. Default: every queue a registered workflow's steps
	// use, in name order. Each must be a valid name (a letter, then up to
	// 63 letters, digits, '_' or '-'), listed once.
	Queues []string
	// QueueLimits bound the steps of queues, by queue name, across every
	// node of the Redis prefix: how many run at once and how fast they
	// start (see QueueLimit and docs/flow-control.md). Every node should
	// be given the same limits. A step over its queue's limit waits in
	// the queue, using no attempt; a queue without a limit costs nothing.
	QueueLimits map[string]QueueLimit
	// NoWorkers makes a node that triggers runs and reconciles but runs no
	// steps.
	NoWorkers bool
	// Lease is how long a claim holds a step without a heartbeat. Default 30s.
	Lease time.Duration
	// Heartbeat is how often a running step's lease is extended. Default
	// Lease/3.
	Heartbeat time.Duration
	// ReconcileInterval is how often the reconciler compares the store with
	// Redis. Default 2s. Negative disables the reconciler.
	ReconcileInterval time.Duration
	// OutboxInterval is how often this node looks for events committed by
	// PublishTx whose runs no node has enqueued yet (one indexed query
	// that reads only such events). Right after a PublishTx on this node
	// it looks every 25ms for two seconds, so that the caller's commit
	// starts the runs at once. Default 500ms. Negative: this node runs no
	// outbox loop (its reconcile passes still dispatch such events).
	OutboxInterval time.Duration
	// EventLookback is how far back a wait step (dag.WaitFor) that starts
	// waiting looks for its event: an event published up to this long
	// before is matched at once. Default DefaultEventLookback (24h);
	// negative: only events published after the step parked match. Keep
	// events at least this long.
	EventLookback time.Duration
	// ScheduleInterval is how often this node evaluates the schedules and
	// starts the runs of due ticks. Default 1s. Negative: this node fires
	// no schedules (Start still stores the ones it declares).
	ScheduleInterval time.Duration
	// PollInterval bounds how long an idle worker blocks before it looks at
	// Redis again. It is a safety net, not a timer: an idle worker sleeps
	// until the next delayed task (a retry, a delayed run) is due, and an
	// enqueue of a task due sooner wakes it, so retries and delayed runs
	// start on time whatever this is; only a lost wake-up (a dropped
	// pub/sub connection) waits for it. Default 1s.
	PollInterval time.Duration
	// DeliveryLimit dead-letters a step (or compensation) once this many
	// of its attempts lost their worker without an outcome (the worker
	// died, or froze past its lease): it keeps killing its workers. Counted
	// in the store. Default 10.
	DeliveryLimit int
	// NodeID identifies this process in attempts, logs and the metric
	// dagflow_node_info: at most 128 bytes, no control characters, no
	// space at either end. Default host-pid-random.
	NodeID string
	// Rand returns a uniform draw in [0,1) for backoff jitter. Default
	// math/rand/v2.
	Rand func() float64
	// MaxClockSkew is how far this node's clock may be from the
	// database's. Leases and due times are written and compared with each
	// node's own clock; a node off by more than this (checked at Start and
	// every 10 seconds against the database server's clock) claims no
	// steps, reconciles nothing and fires no schedules until its clock is
	// right, and logs an error, so that it cannot take over healthy steps
	// or start work early. Default: the smaller of 1s and
	// (Lease-Heartbeat)/4, so that two nodes within it never see a
	// heartbeated lease as expired. Negative disables the check (a fake
	// clock in tests).
	MaxClockSkew time.Duration
	// Codec encodes run inputs, step outputs, error texts, event
	// payloads and schedules' inputs before they are written to the
	// store, and decodes them where the engine reads them: handlers, when
	// conditions, limit keys, and the results of Get, Wait, Runs,
	// DeadLetters and Schedules. A codec that also hashes (codec.Hasher,
	// as codec/aesgcm does) has correlation values stored as keyed
	// hashes. Package codec/aesgcm encrypts them; a codec may also
	// redact. Every node sharing a store needs a codec that decodes
	// every payload stored (with an encrypting codec: every key still in
	// use). Default none: payloads are stored as they are. Run metadata
	// (names, ids, idempotency keys) is not encoded: keep it free of
	// secrets.
	Codec codec.Codec
	// StopGrace is how long Stop waits, once its context has ended and
	// the running steps were cancelled and their leases released, for
	// handlers that ignore their cancellation. Stop then returns without
	// them, with an error wrapping ErrHandlersAbandoned: a handler stuck
	// in a call that takes no context cannot hold the process. Default
	// 5s. Negative: no grace, Stop abandons them as soon as its context
	// ends.
	StopGrace time.Duration
	// WhenBudget bounds how long each expression the engine evaluates may
	// run: a step's `when` condition, an HTTP step's body, a wait's
	// correlate, a sleep's until, a child's input, a limit key and an
	// event filter, each evaluation on its own (dag.WithExprBudget). They
	// run as part of the attempt, under the step's timeout and heartbeat;
	// one that runs over its budget fails the step at once, without
	// retries (the same data would run over again), and an event filter
	// that does counts as not matching. Default 500ms
	// (DefaultWhenBudget).
	WhenBudget time.Duration
	// MaxStepInput bounds what one step receives: the run's input and the
	// outputs of its upstream steps, in bytes. The store measures the outputs
	// before it loads them; a step over the bound fails at once, with an
	// error naming the sizes and without retries, instead of running out
	// of memory. A node holds at most Concurrency times this much step
	// data. Default 32 MiB (DefaultMaxStepInput).
	MaxStepInput int64
	// Registerer, when set, receives the engine's Prometheus metrics
	// (listed in engine/metrics.go, metrics_gauges.go and the README's
	// Observability section), which New registers on it: one engine per
	// registry. Default none: nothing is counted, at the cost of a nil
	// check per event.
	Registerer prometheus.Registerer
	// TracerProvider makes the OpenTelemetry spans of the node: one per
	// Trigger and TriggerTx, per step or compensation attempt and per
	// completion transaction; every span of a run belongs to the trace of
	// its Trigger's caller, whichever node runs it (see
	// MetadataTraceparent).
	// The handler's context carries its attempt's span. Default none: no
	// spans, at the cost of a nil check.
	TracerProvider trace.TracerProvider
	// NodeHeartbeat is how often this node records in the node registry
	// that it is alive, with its status (NodeInfo), and publishes it on
	// Redis. Default 5s (DefaultNodeHeartbeat).
	NodeHeartbeat time.Duration
	// NodeTimeout is how long a node may go without a heartbeat in the
	// node registry before the other nodes count it dead and release the
	// leases of the steps it held, so that they are taken over then
	// rather than when each lease expires (the fence still refuses
	// whatever the presumed-dead node records later). It must be longer
	// than NodeHeartbeat. Default three heartbeats (15s with the default
	// NodeHeartbeat: NodeAliveWithin).
	NodeTimeout time.Duration
	// Retention deletes finished runs older than Retention.Keep (default
	// 30 days) in small batches, one node at a time (retention.go).
	// Retention.Keep negative disables it on this node.
	Retention Retention
}

// Defaults of the Config fields left zero. Two defaults are computed
// rather than constant: Heartbeat is Lease/3 (two heartbeats may be lost
// before the lease expires), and MaxClockSkew is the smaller of 1s and
// (Lease-Heartbeat)/4 (two nodes within it never see a heartbeated lease
// as expired): 1s with the default lease.
const (
	// DefaultPrefix namespaces the Redis keys (Config.Prefix).
	DefaultPrefix = "dagflow"
	// DefaultConcurrency is how many steps a node runs at once
	// (Config.Concurrency).
	DefaultConcurrency = 10
	// DefaultLease is how long a claim holds a step without a heartbeat
	// (Config.Lease).
	DefaultLease = 30 * time.Second
	// DefaultReconcileInterval is how often the reconciler compares the
	// store with Redis (Config.ReconcileInterval).
	DefaultReconcileInterval = 2 * time.Second
	// DefaultScheduleInterval is how often a node evaluates the schedules
	// (Config.ScheduleInterval).
	DefaultScheduleInterval = time.Second
	// DefaultPollInterval bounds how long an idle worker blocks before it
	// looks at Redis again (Config.PollInterval).
	DefaultPollInterval = time.Second
	// DefaultDeliveryLimit is how many attempts of a step may lose their
	// worker before the step is dead-lettered (Config.DeliveryLimit).
	DefaultDeliveryLimit = 10
	// DefaultStopGrace is how long Stop waits past its context for
	// handlers that ignore their cancellation (Config.StopGrace): long
	// enough for a handler that checks its context between short calls,
	// short enough for a deploy's kill timeout.
	DefaultStopGrace = 5 * time.Second
	// DefaultWhenBudget bounds how long an expression, a step's `when`
	// condition say, may run (Config.WhenBudget). A condition is a test
	// on a run's data: one pass
	// over the largest payload the stores accept (1 MiB by default) takes
	// a few tens of milliseconds; 500ms leaves ten times that for a busy
	// machine, and caps what a condition that loops over its data inside
	// a loop can burn at half a CPU-second per run (it is not retried).
	DefaultWhenBudget = 500 * time.Millisecond
	// DefaultMaxStepInput bounds what one step receives, in bytes
	// (Config.MaxStepInput): 32 MiB is the default payload limit of the
	// stores (1 MiB) times 32, room for the input and a wide fan-in's
	// outputs, while a node at the default Concurrency (10) holds at most
	// 320 MiB of step data.
	DefaultMaxStepInput = 32 << 20
	// DefaultNodeHeartbeat is how often a node records that it is alive
	// in the node registry (Config.NodeHeartbeat).
	DefaultNodeHeartbeat = 5 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = SystemClock
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.Lease / 3
	}
	if c.OutboxInterval == 0 {
		c.OutboxInterval = DefaultOutboxInterval
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.EventLookback == 0 {
		c.EventLookback = DefaultEventLookback
	}
	if c.ScheduleInterval == 0 {
		c.ScheduleInterval = DefaultScheduleInterval
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.DeliveryLimit == 0 {
		c.DeliveryLimit = DefaultDeliveryLimit
	}
	if c.NodeID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "node"
		}
		c.NodeID = fmt.Sprintf("%s-%d-%06x", host, os.Getpid(), rand.IntN(1<<24))
	}
	if c.StopGrace == 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.WhenBudget == 0 {
		c.WhenBudget = DefaultWhenBudget
	}
	if c.MaxStepInput == 0 {
		c.MaxStepInput = DefaultMaxStepInput
	}
	if c.NodeHeartbeat == 0 {
		c.NodeHeartbeat = DefaultNodeHeartbeat
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = 3 * c.NodeHeartbeat
	}
	if c.ReadStoreMaxLag == 0 {
		c.ReadStoreMaxLag = 3 * c.NodeHeartbeat
	}
	c.Retention = c.Retention.withDefaults()
	if c.MaxClockSkew == 0 && c.Lease > c.Heartbeat {
		c.MaxClockSkew = min(time.Second, (c.Lease-c.Heartbeat)/4)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("engine: Config.Store is required"))
	}
	if c.Redis == nil {
		errs = append(errs, errors.New("engine: Config.Redis is required"))
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("engine: Config.Concurrency %d is negative", c.Concurrency))
	}
	if c.Lease < time.Second/10 {
		errs = append(errs, fmt.Errorf("engine: Config.Lease %v is under 100ms", c.Lease))
	}
	if c.Heartbeat <= 0 || c.Heartbeat >= c.Lease {
		errs = append(errs, fmt.Errorf("engine: Config.Heartbeat %v must be positive and shorter than Lease %v", c.Heartbeat, c.Lease))
	}
	if c.DeliveryLimit < 1 {
		errs = append(errs, fmt.Errorf("engine: Config.DeliveryLimit %d must be at least 1", c.DeliveryLimit))
	}
	if c.MaxClockSkew > 0 && 2*c.MaxClockSkew+c.Heartbeat >= c.Lease {
		errs = append(errs, fmt.Errorf("engine: Config.MaxClockSkew %v is too large for Lease %v and Heartbeat %v: two nodes %v apart could take over a step whose lease was just extended (want 2*MaxClockSkew + Heartbeat < Lease)",
			c.MaxClockSkew, c.Lease, c.Heartbeat, 2*c.MaxClockSkew))
	}
	if c.MaxStepInput < 0 {
		errs = append(errs, fmt.Errorf("engine: Config.MaxStepInput %d is negative", c.MaxStepInput))
	}
	if c.WhenBudget < 0 {
		errs = append(errs, fmt.Errorf("engine: Config.WhenBudget %v is negative", c.WhenBudget))
	}
	if len(c.NodeID) > 128 {
		errs = append(errs, fmt.Errorf("engine: Config.NodeID is %d bytes, over 128", len(c.NodeID)))
	}
	if i := strings.IndexFunc(c.NodeID, unprintable); i >= 0 {
		errs = append(errs, fmt.Errorf("engine: Config.NodeID %q has a control character at byte %d", c.NodeID, i))
	}
	if strings.TrimSpace(c.NodeID) != c.NodeID {
		// MySQL compares node ids with trailing spaces ignored: the
		// store refuses such ids, and New says so before Start.
		errs = append(errs, fmt.Errorf("engine: Config.NodeID %q begins or ends with a space", c.NodeID))
	}
	if c.NodeHeartbeat < minInterval {
		errs = append(errs, fmt.Errorf("engine: Config.NodeHeartbeat %v is under %v (a missing unit?)", c.NodeHeartbeat, minInterval))
	}
	if c.NodeTimeout <= c.NodeHeartbeat {
		errs = append(errs, fmt.Errorf("engine: Config.NodeTimeout %v must be longer than NodeHeartbeat %v (a node would be counted dead between two heartbeats)", c.NodeTimeout, c.NodeHeartbeat))
	}
	if c.ReadStore != nil && c.ReadStoreMaxLag < 2*c.NodeHeartbeat {
		errs = append(errs, fmt.Errorf("engine: Config.ReadStoreMaxLag %v must be at least twice NodeHeartbeat %v (the replica's lag is measured by the node's heartbeats)", c.ReadStoreMaxLag, c.NodeHeartbeat))
	}
	if c.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("engine: Config.PollInterval %v is negative", c.PollInterval))
	}
	// A tiny positive interval (a unit forgotten: 2 for 2s) would make
	// the node poll the database or Redis in a busy loop.
	for _, iv := range []struct {
		name string
		d    time.Duration
	}{{"PollInterval", c.PollInterval}, {"ReconcileInterval", c.ReconcileInterval}, {"ScheduleInterval", c.ScheduleInterval}} {
		if iv.d > 0 && iv.d < minInterval {
			errs = append(errs, fmt.Errorf("engine: Config.%s %v is under %v (a missing unit?)", iv.name, iv.d, minInterval))
		}
	}
	errs = append(errs, c.Retention.validate()...)
	errs = append(errs, c.validateLimits()...)
	return errors.Join(append(errs, c.validateNames()...)...)
}

// validateNames checks Prefix and Queues: a name that Redis or the stores
// would refuse later makes a node that starts and then fails (or never
// works a queue) for ever.
func (c Config) validateNames() []error {
	var errs []error
	if len(c.Prefix) > maxPrefix {
		errs = append(errs, fmt.Errorf("engine: Config.Prefix is %d bytes, over %d", len(c.Prefix), maxPrefix))
	}
	if i := strings.IndexFunc(c.Prefix, func(r rune) bool { return r == '{' || r == '}' || r == ' ' || unprintable(r) }); i >= 0 {
		errs = append(errs, fmt.Errorf("engine: Config.Prefix %q has a brace, space or control character at byte %d (a brace would break the keys' Cluster hash tag)", c.Prefix, i))
	}
	seen := make(map[string]bool, len(c.Queues))
	for i, q := range c.Queues {
		switch {
		case q == "":
			errs = append(errs, fmt.Errorf("engine: Config.Queues[%d] is empty (want %s)", i, names.Rule))
		case !names.Valid(q):
			errs = append(errs, fmt.Errorf("engine: Config.Queues[%d] %q is not a valid queue name (want %s)", i, q, names.Rule))
		case seen[q]:
			errs = append(errs, fmt.Errorf("engine: Config.Queues lists %q twice", q))
		}
		seen[q] = true
	}
	return errs
}

// minInterval is the shortest positive PollInterval, ReconcileInterval
// and ScheduleInterval.
const minInterval = time.Millisecond

// maxPrefix bounds Config.Prefix, which starts every Redis key.
const maxPrefix = 100

func unprintable(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }

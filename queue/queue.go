package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/names"
)

// Errors callers branch on. Returned errors wrap them and name the value.
var (
	// ErrInvalidID: a task id is empty, longer than 200 bytes, or has a
	// byte that is not printable ASCII, a space or a brace.
	ErrInvalidID = errors.New("queue: invalid task id")
	// ErrInvalidQueue: a queue name does not match ^[A-Za-z][A-Za-z0-9_-]{0,63}$.
	ErrInvalidQueue = errors.New("queue: invalid queue name")
	// ErrNotLeased: Retry of a task that is not leased (acked,
	// expired and handed to another consumer, or never dequeued).
	ErrNotLeased = errors.New("queue: task not leased")
	// ErrInvalidConfig: New was given an unusable Config.
	ErrInvalidConfig = errors.New("queue: invalid config")
	// ErrInvalidArgument: a parameter other than an id or queue name is
	// out of range (a lease that is not positive, an unknown State...).
	ErrInvalidArgument = errors.New("queue: invalid argument")
	// ErrClosed: the Queue was closed.
	ErrClosed = errors.New("queue: closed")
)

const (
	maxIDLen = 200
	// maxBatch bounds DequeueParams.Max.
	maxBatch = 1000
	// promoteLimit bounds how many due delayed tasks and how many expired
	// leases one Dequeue moves to ready (besides Max).
	promoteLimit = 200
)

// The range of Item.Priority. Within a queue, ready tasks of a higher
// priority are dequeued first; 0 is the default.
const (
	MinPriority = -10
	MaxPriority = 10
)

// Config configures a Queue. Zero values mean the documented defaults.
type Config struct {
	// Client is the Redis client: single node, Sentinel or Cluster.
	// Required. Close does not close it.
	Client redis.UniversalClient
	// Prefix namespaces the keys, default "dagflow"; keys look like
	// "<prefix>:{<queue>}:ready". It must not contain braces.
	Prefix string
	// Now is the clock for due times and lease deadlines, default
	// time.Now. Redis' own clock is never used, so a fake clock works.
	Now func() time.Time
	// PollInterval is the longest a blocked Dequeue waits before it looks
	// at delayed tasks and expired leases again, default 1s.
	PollInterval time.Duration
	// Logger receives the rare operational messages (lost pub/sub
	// connection...), default a logger that discards.
	Logger *slog.Logger
	// Limits are the flow control of queues, by name: how many of a
	// queue's tasks may be leased at once and how fast they are handed
	// out (see Limit). Every process using a queue should pass the same
	// limit for it. A queue without one costs nothing extra.
	Limits map[string]Limit
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = "dagflow"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	case strings.ContainsAny(c.Prefix, "{}"):
		return fmt.Errorf("%w: Prefix %q contains a brace", ErrInvalidConfig, c.Prefix)
	case c.PollInterval < 0:
		return fmt.Errorf("%w: PollInterval %v is negative", ErrInvalidConfig, c.PollInterval)
	}
	for name, l := range c.Limits {
		if err := ValidateQueue(name); err != nil {
			return fmt.Errorf("%w: Limits: %w", ErrInvalidConfig, err)
		}
		if err := l.Validate(name); err != nil {
			return err
		}
	}
	return nil
}

// Queue is a set of named Redis queues of task ids. It is safe for
// concurrent use; many processes may share the same queues.
type Queue struct {
	client redis.UniversalClient
	prefix string
	now    func() time.Time
	poll   time.Duration
	log    *slog.Logger
	// limits holds the limited queues of Config.Limits only.
	limits map[string]Limit
	// perTask holds the queues made PerTask by SetPerTask (name -> true).
	perTask sync.Map
	// routed holds, by queue name, whether the queue was last seen with
	// routed tasks (an *atomic.Bool, see route.go).
	routed sync.Map

	notifier *notifier
	// cluster is the client when it is a Redis Cluster's: wake-ups then
	// use sharded pub/sub (see notifier).
	cluster   *redis.ClusterClient
	reloaded  atomic.Int64 // unix ns of the last slot map reload asked for
	closeOnce sync.Once
}

// New returns a Queue. It does no I/O: the scripts are sent to Redis on
// first use, and the pub/sub connection that wakes blocked Dequeue calls
// is opened by the first Dequeue.
func New(cfg Config) (*Queue, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q := &Queue{
		client: cfg.Client,
		prefix: cfg.Prefix,
		now:    cfg.Now,
		poll:   cfg.PollInterval,
		log:    cfg.Logger,
		limits: map[string]Limit{},
	}
	for name, l := range cfg.Limits {
		if l.limited() {
			q.limits[name] = l.withDefaults()
		}
	}
	q.cluster, _ = cfg.Client.(*redis.ClusterClient)
	q.notifier = newNotifier(q)
	return q, nil
}

// Close stops what the Queue started (its pub/sub connection); blocked
// Dequeue calls return ErrClosed. It does not close the client.
func (q *Queue) Close() error {
	var err error
	q.closeOnce.Do(func() { err = q.notifier.close() })
	return err
}

// Item is a task to enqueue.
type Item struct {
	// ID identifies the task; see ValidateID.
	ID string
	// At is when the task becomes ready; zero or past means now. The queue
	// keeps due times in whole milliseconds, rounded up: never early.
	At time.Time
	// Priority orders the task among the queue's ready tasks: a higher
	// one is dequeued first, in the order enqueued within one priority.
	// From MinPriority to MaxPriority; 0 is the default. The task keeps
	// it until it is acked: a retry, a release or an expired lease puts
	// it back among the tasks of its priority.
	Priority int
	// Limit is the task's own limit, nil for none (see TaskLimit; a
	// queue whose tasks carry limits may say so with Limit.PerTask).
	Limit *TaskLimit
}

// Enqueue adds tasks to queue, atomically. For each item it reports true
// if it was added and false if a task with that id is already ready,
// delayed or leased (enqueue is idempotent per id).
//
// The queue has no dead state: dead letters are steps in the store
// (engine.DeadLetters). An index entry marked dead by an older version of
// this package is treated as absent and overwritten, so such a task can be
// enqueued again, with a fresh delivery count.
func (q *Queue) Enqueue(ctx context.Context, queue string, items ...Item) ([]bool, error) {
	if err := ValidateQueue(queue); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return []bool{}, nil
	}
	k := q.keys(queue)
	args := make([]any, 0, 3+3*len(items))
	args = append(args, k.channel, q.how(), q.now().UnixMilli())
	var specs []any
	for _, it := range items {
		if err := ValidateID(it.ID); err != nil {
			return nil, err
		}
		if it.Priority < MinPriority || it.Priority > MaxPriority {
			return nil, fmt.Errorf("%w: task %q: priority %d not in %d..%d", ErrInvalidArgument, it.ID, it.Priority, MinPriority, MaxPriority)
		}
		args = append(args, it.ID, dueMillis(it.At), it.Priority)
		if it.Limit != nil {
			if err := it.Limit.Validate(it.ID); err != nil {
				return nil, err
			}
			specs = append(specs, it.ID, it.Limit.spec())
		}
	}
	if len(specs) > 0 {
		// Before the tasks, so that no dequeue sees one without its limit.
		if err := q.client.HSet(ctx, k.lim, specs...).Err(); err != nil {
			return nil, fmt.Errorf("queue: enqueue to %q: task limits: %w", queue, err)
		}
	}
	res, err := q.run(ctx, scriptEnqueue,
		[]string{k.ready, k.delayed, k.index, k.waiting}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: enqueue to %q: %w", queue, err)
	}
	added := make([]bool, len(res))
	for i, v := range res {
		added[i] = v == 1
	}
	return added, nil
}

// Ack removes tasks for good, whatever their state (leased, ready or
// delayed). Unknown ids are ignored, so Ack is idempotent. Ack does not
// ask who holds the lease: after a lease ran out and another consumer took
// the task, the first consumer's Ack still removes it (dagflow's fence in
// the database decides who owns a step).
func (q *Queue) Ack(ctx context.Context, queue string, ids ...string) error {
	if err := checkIDs(queue, ids); err != nil || len(ids) == 0 {
		return err
	}
	k := q.keys(queue)
	known := ""
	if q.limits[queue].Concurrency > 0 {
		known = "c"
	}
	if q.isPerTask(queue) {
		known += "t"
	}
	if known == "" {
		known = "-"
	}
	keys := []string{k.ready, k.delayed, k.leased, k.index, k.waiting, k.lim}
	args := append([]any{k.channel, q.how(), known}, strArgs(ids)...)
	if err := q.run(ctx, scriptAck, keys, args...).Err(); err != nil {
		return fmt.Errorf("queue: ack in %q: %w", queue, err)
	}
	return nil
}

// dueMillis is a due time in the queue's resolution, whole Unix
// milliseconds, rounded up: a task is never ready before its time (a
// store that keeps due times in microseconds would refuse it, and a
// consumer that took it early would have to put it back). Zero is 0,
// "now".
func dueMillis(at time.Time) int64 {
	if at.IsZero() {
		return 0
	}
	ms := at.UnixMilli()
	if at.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// Retry moves a leased task to delayed until at (or straight to ready if
// at is not after now), keeping its delivery count. It returns an error
// wrapping ErrNotLeased if the task is not leased.
func (q *Queue) Retry(ctx context.Context, queue, id string, at time.Time) error {
	if err := checkIDs(queue, []string{id}); err != nil {
		return err
	}
	k := q.keys(queue)
	keys := []string{k.ready, k.delayed, k.leased, k.index, k.waiting, k.lim}
	n, err := q.run(ctx, scriptRetry, keys,
		k.channel, q.now().UnixMilli(), id, dueMillis(at), q.how(), q.perTaskHint(queue)).Int()
	if err != nil {
		return fmt.Errorf("queue: retry %q in %q: %w", id, queue, err)
	}
	if n == 0 {
		return notLeased(queue, id)
	}
	return nil
}

// Release hands leased tasks back unprocessed (graceful shutdown): they go
// to the front of the ready list in the order given, and the delivery is
// undone (their count goes back down by one). Ids that are not leased are
// skipped.
func (q *Queue) Release(ctx context.Context, queue string, ids ...string) error {
	if err := checkIDs(queue, ids); err != nil || len(ids) == 0 {
		return err
	}
	k := q.keys(queue)
	args := append([]any{k.channel, q.how(), q.perTaskHint(queue)}, strArgs(ids)...)
	keys := []string{k.ready, k.leased, k.index, k.waiting, k.lim}
	if err := q.run(ctx, scriptRelease, keys, args...).Err(); err != nil {
		return fmt.Errorf("queue: release in %q: %w", queue, err)
	}
	return nil
}

// Extend sets the lease deadline of a leased task to now+lease (the
// heartbeat). It reports false if the task is not leased anymore. A lease
// that ran out but was not reclaimed yet (by Dequeue or Sweep) can still
// be extended: nobody else has the task.
func (q *Queue) Extend(ctx context.Context, queue, id string, lease time.Duration) (bool, error) {
	if err := checkIDs(queue, []string{id}); err != nil {
		return false, err
	}
	if lease <= 0 {
		return false, fmt.Errorf("%w: lease %v is not positive", ErrInvalidArgument, lease)
	}
	k := q.keys(queue)
	n, err := q.run(ctx, scriptExtend, []string{k.leased}, id, q.now().Add(lease).UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("queue: extend %q in %q: %w", id, queue, err)
	}
	return n == 1, nil
}

// SweepResult counts what Sweep moved.
type SweepResult struct {
	// Promoted is the number of due delayed tasks moved to ready.
	Promoted int
	// Expired is the number of expired leases moved to ready.
	Expired int
}

// Sweep moves up to limit due delayed tasks and up to limit tasks whose
// lease expired to the back of the ready list. Dequeue does the same as it
// goes; Sweep is for queues nobody is consuming right now. It is safe to
// run from many processes at once. limit <= 0 means 1000.
func (q *Queue) Sweep(ctx context.Context, queue string, limit int) (SweepResult, error) {
	if err := ValidateQueue(queue); err != nil {
		return SweepResult{}, err
	}
	if limit <= 0 {
		limit = 1000
	}
	k := q.keys(queue)
	res, err := q.run(ctx, scriptSweep, []string{k.ready, k.delayed, k.leased, k.index, k.waiting},
		k.channel, q.now().UnixMilli(), limit, q.how()).Int64Slice()
	if err != nil {
		return SweepResult{}, fmt.Errorf("queue: sweep %q: %w", queue, err)
	}
	return SweepResult{Promoted: int(res[0]), Expired: int(res[1])}, nil
}

// State is the state of a task in a queue.
type State string

// The states of a task.
const (
	StateReady   State = "ready"
	StateDelayed State = "delayed"
	StateLeased  State = "leased"
)

// code is the state's number in the Redis index (lua/common.lua). The
// numbers are stored in users' Redis and never change; 3 was the dead
// state of older versions and stays unused.
func (s State) code() (int, bool) {
	switch s {
	case StateReady:
		return 0, true
	case StateDelayed:
		return 1, true
	case StateLeased:
		return 2, true
	}
	return 0, false
}

// Stats counts the tasks of a queue by state.
type Stats struct {
	// Ready counts the ready tasks of every priority, routed ones
	// included.
	Ready, Delayed, Leased int64
	// Routed counts the ready tasks routed to consumers of their kind
	// (see Route): they wait for a consumer that names their kind.
	Routed int64
	// Paused is true while the queue is paused (see Pause).
	Paused bool
}

// Stats counts the tasks of queue by state, atomically.
func (q *Queue) Stats(ctx context.Context, queue string) (Stats, error) {
	if err := ValidateQueue(queue); err != nil {
		return Stats{}, err
	}
	k := q.keys(queue)
	res, err := q.run(ctx, scriptStats, []string{k.ready, k.delayed, k.leased}).Int64Slice()
	if err != nil {
		return Stats{}, fmt.Errorf("queue: stats of %q: %w", queue, err)
	}
	return Stats{Ready: res[0], Delayed: res[1], Leased: res[2], Paused: res[3] == 1, Routed: res[4]}, nil
}

// Pause stops every consumer, in every process, from leasing tasks of
// queue: from the next Dequeue on, the queue offers nothing. Its tasks
// stay where they are; enqueues, retries, releases and expired leases go
// on as usual. Pausing a paused queue does nothing. The flag lives only
// in Redis: callers that must survive a Redis that lost its data (the
// engine) keep the truth elsewhere and call Pause again.
func (q *Queue) Pause(ctx context.Context, queue string) error {
	return q.setPaused(ctx, queue, true)
}

// Resume undoes Pause and wakes the consumers waiting on queue, so that
// its ready tasks are taken at once. Resuming a queue that is not paused
// does nothing.
func (q *Queue) Resume(ctx context.Context, queue string) error {
	return q.setPaused(ctx, queue, false)
}

// Paused reports whether queue is paused.
func (q *Queue) Paused(ctx context.Context, queue string) (bool, error) {
	if err := ValidateQueue(queue); err != nil {
		return false, err
	}
	n, err := q.client.Exists(ctx, q.keys(queue).paused).Result()
	if err != nil {
		return false, fmt.Errorf("queue: paused %q: %w", queue, err)
	}
	return n == 1, nil
}

func (q *Queue) setPaused(ctx context.Context, queue string, paused bool) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	k := q.keys(queue)
	flag, verb := "0", "resume"
	if paused {
		flag, verb = "1", "pause"
	}
	if err := q.run(ctx, scriptPause, []string{k.paused, k.waiting}, k.channel, q.how(), flag).Err(); err != nil {
		return fmt.Errorf("queue: %s %q: %w", verb, queue, err)
	}
	return nil
}

// Ping checks that Redis answers, with one round trip. Readiness probes
// call it; it says nothing about permissions (Probe checks those).
func (q *Queue) Ping(ctx context.Context) error {
	if err := q.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("queue: ping: %w", err)
	}
	return nil
}

// TaskInfo describes a task for operators.
type TaskInfo struct {
	ID         string
	State      State
	Deliveries int
	// Due is, for a delayed task, when it becomes ready; for a leased
	// task, its lease deadline; zero for a ready task.
	Due time.Time
	// Priority is the task's Item.Priority.
	Priority int
}

// List returns up to limit tasks of queue in state, skipping offset: ready
// tasks in the order they will be dequeued (highest priority first), the
// others by Due.
func (q *Queue) List(ctx context.Context, queue string, state State, offset, limit int) ([]TaskInfo, error) {
	if err := ValidateQueue(queue); err != nil {
		return nil, err
	}
	code, ok := state.code()
	if !ok {
		return nil, fmt.Errorf("%w: state %q", ErrInvalidArgument, state)
	}
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("%w: offset %d, limit %d", ErrInvalidArgument, offset, limit)
	}
	if limit == 0 {
		return []TaskInfo{}, nil
	}
	k := q.keys(queue)
	res, err := q.run(ctx, scriptList, []string{k.ready, k.delayed, k.leased, k.index},
		code, offset, limit).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: list %s tasks of %q: %w", state, queue, err)
	}
	infos := make([]TaskInfo, 0, len(res)/4)
	for i := 0; i+3 < len(res); i += 4 {
		info := TaskInfo{ID: asString(res[i]), State: state, Priority: int(asInt(res[i+3]))}
		info.Deliveries = int(asInt(res[i+1]))
		if s := asString(res[i+2]); s != "" {
			ms, err := strconv.ParseFloat(s, 64)
			if err == nil {
				info.Due = time.UnixMilli(int64(ms))
			}
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// ValidateID checks a task id: 1 to 200 bytes of printable ASCII without
// spaces or braces.
func ValidateID(id string) error {
	if len(id) == 0 || len(id) > maxIDLen {
		return fmt.Errorf("%w %q: length %d not in 1..%d", ErrInvalidID, truncate(id), len(id), maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '{' || c == '}' {
			return fmt.Errorf("%w %q: byte %#x at %d is not printable ASCII without space or brace", ErrInvalidID, truncate(id), c, i)
		}
	}
	return nil
}

// ValidateQueue checks a queue name against ^[A-Za-z][A-Za-z0-9_-]{0,63}$,
// the rule of every dagflow name (workflows, steps and the stores' queue
// columns use the same).
func ValidateQueue(name string) error {
	if !names.Valid(name) {
		return fmt.Errorf("%w %q: want a letter, then up to 63 letters, digits, '_' or '-'", ErrInvalidQueue, truncate(name))
	}
	return nil
}

func checkIDs(queue string, ids []string) error {
	if err := ValidateQueue(queue); err != nil {
		return err
	}
	for _, id := range ids {
		if err := ValidateID(id); err != nil {
			return err
		}
	}
	return nil
}

func notLeased(queue, id string) error {
	return fmt.Errorf("%w: task %q in queue %q", ErrNotLeased, id, queue)
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func strArgs(ss []string) []any {
	args := make([]any, len(ss))
	for i, s := range ss {
		args[i] = s
	}
	return args
}

func asString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

func asInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// how says how this process listens for wake-ups and so how its scripts
// publish them: "s", sharded pub/sub, on a Redis Cluster (where every
// process uses a cluster client), else "1", classic pub/sub. See wake in
// lua/common.lua.
func (q *Queue) how() string {
	if q.cluster != nil {
		return "s"
	}
	return "1"
}

// run runs a script, and on a Redis Cluster has the client read the slot
// map again after a connection error (see reloadAfter).
func (q *Queue) run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := s.Run(ctx, q.client, keys, args...)
	q.reloadAfter(cmd.Err())
	return cmd
}

// reloadAfter asks a Cluster client to read the slot map again when err
// is not a reply from Redis (a refused or broken connection, a timeout),
// at most once a second. go-redis reads it again on a MOVED reply, and
// otherwise only every ClusterStateReloadInterval (60 s by default): when
// a master is killed, its slots would stay unreachable, for the scripts
// and for the wake-ups' shard subscriptions, that long after a replica
// took over.
func (q *Queue) reloadAfter(err error) {
	if q.cluster == nil || err == nil || errors.Is(err, context.Canceled) {
		return
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		return
	}
	now := time.Now().UnixNano()
	last := q.reloaded.Load()
	if now-last < int64(time.Second) || !q.reloaded.CompareAndSwap(last, now) {
		return
	}
	q.cluster.ReloadState(context.Background())
}

package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Reads from a replica (Config.ReadStore). The HTTP API and the dashboard
// read far more than they write; a replica takes those reads off the
// primary. Only reads that may be a little old go there: Get, Runs,
// DeadLetters and ScheduleHistory. Claims, the reconciler, Wait and the
// operator actions read the primary.
//
// How old a replica is: each node writes its own heartbeat to the node
// registry on the primary every Config.NodeHeartbeat, and remembers the
// last one the primary took. Reading its own row on the replica (at most
// once a second, by the first read that needs it) tells how far behind
// the replica is: caught up if it has that heartbeat; otherwise at most
// as old as the heartbeat it has. The measure is coarse (one heartbeat)
// but needs no privilege on the replica (SHOW REPLICA STATUS needs one)
// and works through any replication (binlog, Galera, a managed service's
// read endpoint), frozen or slow.

// replicaCheckEvery is how often the replica's lag is read again.
const replicaCheckEvery = time.Second

// replicaCheckTimeout bounds one lag check: a replica that does not
// answer sends the reads to the primary rather than holding them.
const replicaCheckTimeout = time.Second

// replica routes the read-only reads to Config.ReadStore.
type replica struct {
	store  persistence.Store
	maxLag time.Duration
	nodeID string
	clock  Clock
	log    *slog.Logger

	// beat is the time (UnixNano) of the last heartbeat of this node the
	// primary took; 0 before the first.
	beat atomic.Int64

	mu       sync.Mutex
	checking bool // a check is under way; the others use the last one
	checked  time.Time
	lag      time.Duration
	usable   bool
	why      string // why the replica is not used, for the log
}

// ReadSource says where the engine's reads on a context were served from:
// see WithReadSource. Safe for concurrent use.
type ReadSource struct {
	replica atomic.Bool
	lag     atomic.Int64
}

// Replica reports whether a read on the context was served by
// Config.ReadStore, and that replica's lag then (0 when it had caught up
// with the node's last heartbeat).
func (s *ReadSource) Replica() (lag time.Duration, ok bool) {
	return time.Duration(s.lag.Load()), s.replica.Load()
}

func (s *ReadSource) set(lag time.Duration) {
	s.lag.Store(int64(lag))
	s.replica.Store(true)
}

type readSourceKey struct{}

type readPrimaryKey struct{}

// WithReadSource returns a context on which the engine records whether
// its reads came from Config.ReadStore, and how far behind it was. The
// HTTP API uses it to answer X-Dagflow-Replica-Lag.
func WithReadSource(ctx context.Context) (context.Context, *ReadSource) {
	src := &ReadSource{}
	return context.WithValue(ctx, readSourceKey{}, src), src
}

// ReadPrimary returns a context on which the engine reads only the
// primary (Config.Store), never Config.ReadStore: for a read that must
// see a write just made, such as the answer to an operator action.
func ReadPrimary(ctx context.Context) context.Context {
	return context.WithValue(ctx, readPrimaryKey{}, true)
}

// reader returns the store a read-only read on ctx goes to.
func (e *Engine) reader(ctx context.Context) persistence.Store {
	if e.replica == nil || ctx.Value(readPrimaryKey{}) != nil {
		return e.store
	}
	lag, ok := e.replica.current(ctx)
	if !ok {
		return e.store
	}
	if src, _ := ctx.Value(readSourceKey{}).(*ReadSource); src != nil {
		src.set(lag)
	}
	return e.replica.store
}

// read runs f on the store a read-only read on ctx goes to. When that is
// the replica and f fails there, f runs again on the primary: a run the
// replica does not have yet is asked of the primary (read-your-writes),
// and a replica that fails otherwise is not used until the next check.
// A refused argument (persistence.ErrInvalid) or an ended ctx is the
// caller's error, from either store.
func (e *Engine) read(ctx context.Context, f func(persistence.Store) error) error {
	st := e.reader(ctx)
	err := f(st)
	if err == nil || e.replica == nil || st != e.replica.store || st == e.store ||
		ctx.Err() != nil || errors.Is(err, persistence.ErrInvalid) {
		return err
	}
	if !notFound(err) {
		e.replica.failed(err)
	}
	if src, _ := ctx.Value(readSourceKey{}).(*ReadSource); src != nil {
		src.replica.Store(false)
	}
	return f(e.store)
}

// failed stops using the replica until the next check, after a read on
// it failed.
func (r *replica) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.usable {
		r.log.Warn("reads go to the primary: a read on the read replica failed", "err", err)
	}
	r.checked, r.usable, r.why = r.clock.Now(), false, "a read failed: "+err.Error()
}

// ReplicaLag reports how far behind the primary Config.ReadStore is, as
// last measured, and whether reads go to it (false without a ReadStore,
// before the first heartbeat, and while it lags more than
// Config.ReadStoreMaxLag, is behind in schema or does not answer).
func (e *Engine) ReplicaLag(ctx context.Context) (time.Duration, bool) {
	if e.replica == nil {
		return 0, false
	}
	return e.replica.current(ctx)
}

// heartbeatTaken records that the primary took this node's heartbeat of t.
func (r *replica) heartbeatTaken(t time.Time) {
	if r != nil {
		r.beat.Store(t.UnixNano())
	}
}

// current returns the replica's lag and whether it serves reads, reading
// it again when the last check is older than replicaCheckEvery.
func (r *replica) current(ctx context.Context) (time.Duration, bool) {
	r.mu.Lock()
	now := r.clock.Now()
	fresh := !r.checked.IsZero() && now.Sub(r.checked) < replicaCheckEvery && now.After(r.checked.Add(-replicaCheckEvery))
	if fresh || r.checking {
		// The reads during a check go where the last one said: a slow
		// replica delays one read a second, not all of them.
		defer r.mu.Unlock()
		return r.lag, r.usable
	}
	r.checking = true
	r.mu.Unlock()
	lag, why := r.check(ctx, now)
	usable := why == ""
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checking = false
	switch {
	case usable && !r.usable && !r.checked.IsZero():
		r.log.Info("reads go to the read replica again", "lag", lag)
	case !usable && (r.usable || reason(r.why) != reason(why)):
		r.log.Warn("reads go to the primary: the read replica is not used", "why", why)
	}
	r.checked, r.lag, r.usable, r.why = r.clock.Now(), lag, usable, why
	return lag, usable
}

// check measures the replica's lag; why is empty when it may serve reads.
func (r *replica) check(ctx context.Context, now time.Time) (lag time.Duration, why string) {
	beat := r.beat.Load()
	if beat == 0 {
		return 0, "no heartbeat of this node taken by the primary yet (the engine has not started)"
	}
	// A read whose context is already ending must not be counted as a
	// replica that does not answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replicaCheckTimeout)
	defer cancel()
	v, err := r.store.SchemaVersion(ctx)
	if err != nil {
		return 0, "reading its schema version: " + err.Error()
	}
	if err := v.Check(); err != nil {
		return 0, err.Error()
	}
	nodes, err := r.store.NodeList(ctx, persistence.NodeListParams{})
	if err != nil {
		return 0, "reading the node registry: " + err.Error()
	}
	var seen time.Time
	for _, n := range nodes {
		if n.ID == r.nodeID {
			seen = n.HeartbeatAt
		}
	}
	if seen.IsZero() {
		return 0, "this node's heartbeat has not reached it yet"
	}
	// The store keeps microseconds: a heartbeat within a millisecond of
	// the last one taken is that one.
	if !seen.Before(time.Unix(0, beat).Add(-time.Millisecond)) {
		return 0, ""
	}
	lag = max(now.Sub(seen), 0)
	if lag > r.maxLag {
		return lag, lagging + lag.Round(time.Millisecond).String() + ", more than Config.ReadStoreMaxLag " + r.maxLag.String()
	}
	return lag, ""
}

// lagging starts the reason of a replica too far behind.
const lagging = "it lags "

// reason is why without the lag's figure, which changes at every check:
// the log says once that the replica lags, not every second.
func reason(why string) string {
	if strings.HasPrefix(why, lagging) {
		return lagging
	}
	return why
}

// notFound reports whether err is a store's "no such run".
func notFound(err error) bool { return errors.Is(err, persistence.ErrRunNotFound) }

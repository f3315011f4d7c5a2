package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
)

// Isolation between workloads and deploys. A node runs, reconciles and
// advances only what it has registered: a step of a workflow (or a step
// of a workflow version) it does not know is left for a node that knows
// it — refused by the claim before anything changes, put back in the
// queue, no attempt used — never failed. And a Redis prefix serves one
// database: Start binds the prefix to the store's id and refuses a prefix
// that another database's engines use.

// ErrNamespaceConflict is returned by Start when the Redis prefix is
// already used by the engines of another database: their tasks would be
// taken by this engine's workers and dropped as unknown. Give each
// database its own prefix (Config.Prefix).
var ErrNamespaceConflict = errors.New("engine: the Redis prefix belongs to another database")

// NamespaceError says which prefix and which databases conflict. It wraps
// ErrNamespaceConflict.
type NamespaceError struct {
	Prefix  string
	StoreID string // this engine's database
	OwnerID string // the database the prefix is bound to
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("engine: Redis prefix %q is bound to another database (store id %s; this database's is %s): its tasks are that database's; give this deployment its own prefix (Config.Prefix, --prefix)",
		e.Prefix, e.OwnerID, e.StoreID)
}

// Unwrap makes errors.Is(err, ErrNamespaceConflict) true.
func (e *NamespaceError) Unwrap() error { return ErrNamespaceConflict }

// unhandledRetry is how long a task this node cannot run waits in the
// queue before a node (perhaps one that can run it) takes it again, when
// it could not be routed to the nodes that can.
const unhandledRetry = time.Second

// Routing. Nodes that share a queue need not run the same workflows (two
// applications on one database and prefix, or a deploy rolling out a new
// step): a node that dequeued a step it cannot run routes the task to the
// step's kind (queue.Route), and only nodes that list that kind in their
// dequeue take it again, at once and ahead of the queue's other tasks.
// The kind of a step is "<workflow>/<step>", of its compensation
// "<workflow>/<step>/undo" (names hold no '/').

// stepKind is the routing kind of a step's task, or of its compensation's.
func stepKind(workflow, step string, compensation bool) string {
	if compensation {
		return workflow + "/" + step + "/undo"
	}
	return workflow + "/" + step
}

// routingKinds are the kinds of the tasks this node can run: every step
// of its registered workflows, and the compensation of every step that
// handlesCompensation accepts. Register clears the cache.
func (e *Engine) routingKinds() []string {
	if k := e.kinds.Load(); k != nil {
		return *k
	}
	e.mu.RLock()
	var kinds []string
	for name, w := range e.workflows {
		for _, s := range w.Steps() {
			kinds = append(kinds, stepKind(name, s.Name, false))
			if compensable(s) {
				kinds = append(kinds, stepKind(name, s.Name, true))
			}
		}
	}
	sort.Strings(kinds)
	// Stored under the read lock: Register changes the maps under the
	// write lock and clears the cache after, so a list built from the old
	// maps is never kept past a Register.
	e.kinds.Store(&kinds)
	e.mu.RUnlock()
	return kinds
}

// handles reports whether this node can run a step: the step's workflow
// is registered here, with that step. The store's claim asks it before it
// changes anything.
func (e *Engine) handles(workflow, step string) bool {
	w := e.Workflow(workflow)
	return w != nil && w.Step(step) != nil
}

// handlesCompensation reports whether this node can undo a step: its
// workflow is registered here with that step and its compensation. A
// node whose version lacks the compensation leaves it, unclaimed and with
// no attempt used, to a node whose version has it.
func (e *Engine) handlesCompensation(workflow, step string) bool {
	w := e.Workflow(workflow)
	if w == nil {
		return false
	}
	s := w.Step(step)
	return compensable(s)
}

// bindNamespace binds the Redis prefix to the store (Start, and every
// reconcile pass, which rewrites the binding after Redis lost it). A
// prefix bound to another store gives a *NamespaceError and stops this
// node's claims and reconcile passes until the binding is right.
func (e *Engine) bindNamespace(ctx context.Context) error {
	id, err := e.store.StoreID(ctx)
	if err != nil {
		return fmt.Errorf("engine: read the store's id: %w", err)
	}
	owner, err := e.q.Bind(ctx, id)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if owner != id {
		if !e.stats.foreignPrefix.Swap(true) {
			e.log.Error("the Redis prefix is bound to another database: this node claims and reconciles nothing",
				"prefix", e.cfg.Prefix, "store_id", id, "bound_to", owner)
		}
		return &NamespaceError{Prefix: e.cfg.Prefix, StoreID: id, OwnerID: owner}
	}
	e.stats.bound.Store(true)
	if e.stats.foreignPrefix.Swap(false) {
		e.log.Info("the Redis prefix is bound to this database again; claiming steps")
		e.wakeFetch()
	}
	return nil
}

// paused reports whether this node must not claim, reconcile or fire
// schedules: its clock is off (health.go), its Redis prefix belongs to
// another database or was never bound (Redis did not answer), or its
// registry heartbeats have failed long enough that the other nodes are
// about to presume it dead (nodes.go).
func (e *Engine) paused() bool {
	return e.clockSkewed() || e.stats.foreignPrefix.Load() || !e.stats.bound.Load() || e.registryFenced()
}

// unhandledLog rate-limits the warning about steps this node cannot run:
// once per workflow and step every unhandledWarnEvery.
type unhandledLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const unhandledWarnEvery = time.Minute

// refusedUnhandled routes a task whose step this node cannot run to the
// nodes that can, and says so now and then. If Redis refuses the route,
// the task is put back for unhandledRetry instead.
func (e *Engine) refusedUnhandled(ctx context.Context, t queue.Task, ce *persistence.ClaimRefusedError) bool {
	now := e.clock.Now()
	key := ce.Workflow + "/" + ce.Step
	l := &e.unhandled
	l.mu.Lock()
	warn := now.Sub(l.last[key]) >= unhandledWarnEvery
	if warn {
		if l.last == nil {
			l.last = map[string]time.Time{}
		}
		l.last[key] = now
	}
	l.mu.Unlock()
	if warn {
		e.log.Warn("this node cannot run a step (its workflow or step is not registered here): routed to the nodes that can",
			"workflow", ce.Workflow, "step", ce.Step, "run_id", ce.RunID, "queue", t.Queue)
	}
	ref, _ := parseTaskID(t.ID)
	err := e.q.Route(context.WithoutCancel(ctx), t.Queue, t.ID, stepKind(ce.Workflow, ce.Step, ref.Compensation))
	switch {
	case err == nil:
		return true
	case errors.Is(err, queue.ErrNotLeased):
		return false
	}
	e.redisError("routing a task to the nodes that can run it failed; putting it back", err, "task", t.ID)
	return e.putBack(ctx, t, now.Add(unhandledRetry))
}

// registeredNames are the registered workflows' names, sorted.
func (e *Engine) registeredNames() []string {
	names := e.Workflows()
	sort.Strings(names)
	return names
}

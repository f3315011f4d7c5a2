package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/backendtest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
)

// backend is one pair of stores the engine tests run on.
type backend struct {
	name string
	// opts returns enginetest options for a fresh, private store and
	// Redis namespace.
	opts func(t *testing.T) enginetest.Options
}

// backends are the embedded default (SQLite + miniredis) and the real
// services (MariaDB + Redis on loopback): backendtest's.
func backends() []backend {
	var out []backend
	for _, b := range backendtest.All() {
		out = append(out, backend{name: b.Name, opts: func(t *testing.T) enginetest.Options { return b.Options(t) }})
	}
	return out
}

// mysqlBackend returns options for a private MariaDB database and Redis
// key prefix on the shared loopback services.
func mysqlBackend(t *testing.T) enginetest.Options { return backendtest.MySQL(t) }

// eachBackend runs f as a subtest on every backend.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// event is one handler call seen by a recorder.
type event struct {
	Step         string
	Compensation bool
	Attempt      int
	Start, End   time.Time
	Key          string
}

// recorder notes every handler call, in real time.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

func (r *recorder) find(step string, comp bool) []event {
	var out []event
	for _, e := range r.all() {
		if e.Step == step && e.Compensation == comp {
			out = append(out, e)
		}
	}
	return out
}

// handler returns a step handler that records its calls, waits d, and then
// returns fail(sc) as its error (nil for success) with a JSON output naming
// the step and the outputs it saw.
func (r *recorder) handler(d time.Duration, fail func(sc steps.Context) error) steps.Handler {
	return steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		ev := event{Step: sc.Step, Compensation: sc.Compensation, Attempt: sc.Attempt, Start: time.Now(), Key: sc.IdempotencyKey}
		if d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				ev.End = time.Now()
				r.add(ev)
				return nil, ctx.Err()
			}
		}
		ev.End = time.Now()
		r.add(ev)
		if fail != nil {
			if err := fail(sc); err != nil {
				return nil, err
			}
		}
		seen := make([]string, 0, len(sc.Outputs))
		for k := range sc.Outputs {
			seen = append(seen, k)
		}
		return json.Marshal(map[string]any{"step": sc.Step, "seen": seen})
	})
}

// orderWorkflow is reserve -> (notify, points) -> ship with recording
// handlers; opts adjust single steps.
func orderWorkflow(t *testing.T, r *recorder, name string, d time.Duration, fail func(sc steps.Context) error, withComp bool, extra map[string][]dag.StepOption) *dag.Workflow {
	t.Helper()
	h := r.handler(d, fail)
	opt := func(step string, base ...dag.StepOption) []dag.StepOption {
		if withComp && (step == "reserve" || step == "points" || step == "notify") {
			base = append(base, dag.Compensate(r.handler(0, nil)))
		}
		return append(base, extra[step]...)
	}
	wf, err := dag.New(name, dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, Multiplier: 2, Jitter: 1})).
		Step("reserve", h, opt("reserve")...).
		Step("notify", h, opt("notify", dag.After("reserve"))...).
		Step("points", h, opt("points", dag.After("reserve"))...).
		Step("ship", h, opt("ship", dag.After("notify", "points"))...).
		Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return wf
}

func mustGet(t *testing.T, e *engine.Engine, id string) engine.RunInfo {
	t.Helper()
	info, err := e.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return info
}

func successes(info engine.RunInfo, step string) int {
	n := 0
	for _, a := range info.Attempts {
		if a.Step == step && a.Kind == persistence.AttemptForward && a.Outcome == persistence.OutcomeSucceeded {
			n++
		}
	}
	return n
}

// sqliteStore opens a migrated SQLite store in t's temporary directory and
// closes it when t ends.
func sqliteStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db"), AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

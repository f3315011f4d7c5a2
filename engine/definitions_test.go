package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// sharedBackend is one store and one Redis namespace for several nodes.
type sharedBackend struct {
	name string
	open func(t *testing.T) (persistence.Store, redis.UniversalClient, string)
}

// sharedBackends are the embedded default (a SQLite file and a miniredis
// that several engines share) and the real services.
func sharedBackends() []sharedBackend {
	return []sharedBackend{
		{name: "sqlite+miniredis", open: func(t *testing.T) (persistence.Store, redis.UniversalClient, string) {
			mr := miniredis.RunT(t)
			c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { c.Close() })
			return sqliteStore(t), c, "dagflow"
		}},
		{name: "mysql+redis", open: func(t *testing.T) (persistence.Store, redis.UniversalClient, string) {
			rdb, prefix := sharedRedis(t)
			return mysqlStore(t), rdb, prefix()
		}},
	}
}

// orderV returns the order workflow at a version: v2 adds an audit step
// before ship and raises the points threshold, so a run on v1's plan runs
// points for a total of 500 and a run on v2's skips it. Every handler
// call is counted by step.
func orderV(t *testing.T, v int, calls *sync.Map, block <-chan struct{}) *dag.Workflow {
	t.Helper()
	h := func(step string) steps.Handler {
		return steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			if step == "reserve" && block != nil {
				select {
				case <-block:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			n, _ := calls.LoadOrStore(step, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return json.RawMessage(`{"step":"` + step + `"}`), nil
		})
	}
	threshold := "input.total >= 100"
	if v == 2 {
		threshold = "input.total >= 1000000"
	}
	b := dag.New("order", dag.Version(v), dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond})).
		Step("reserve", h("reserve")).
		Step("notify", h("notify"), dag.After("reserve")).
		Step("points", h("points"), dag.After("reserve"), dag.When(threshold))
	if v == 2 {
		b = b.Step("audit", h("audit"), dag.After("reserve")).
			Step("ship", h("ship"), dag.Needs("reserve"), dag.After("notify", "points", "audit"))
	} else {
		b = b.Step("ship", h("ship"), dag.Needs("reserve"), dag.After("notify", "points"))
	}
	w, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func callsOf(calls *sync.Map, step string) int64 {
	n, ok := calls.Load(step)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// A node with no handlers (an API node) triggers a workflow from its
// stored definition; a worker on another node runs the run.
func TestTriggerFromStoredDefinition(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			st, rdb, prefix := b.open(t)
			var calls sync.Map
			v1 := orderV(t, 1, &calls, nil)

			api := isoNode{store: st, redis: rdb, prefix: prefix, id: "api", noWorkers: true}.start(t)
			_, err := api.Trigger(context.Background(), "order", map[string]int{"total": 500})
			if !errors.Is(err, engine.ErrUnknownWorkflow) {
				t.Fatalf("trigger before any node stored the definition: %v; want ErrUnknownWorkflow", err)
			}
			worker := isoNode{store: st, redis: rdb, prefix: prefix, id: "worker", workflows: []*dag.Workflow{v1}}.start(t)

			// Known on the API node within a moment of the worker's start.
			var ids []string
			testenv.Eventually(t, 5*time.Second, func() bool {
				id, err := api.Trigger(context.Background(), "order", map[string]int{"total": 500})
				if err == nil {
					ids = append(ids, id)
				} else if !errors.Is(err, engine.ErrUnknownWorkflow) {
					t.Fatalf("trigger on the API node: %v", err)
				}
				return len(ids) == 5
			}, "the API node did not start runs of order")
			waitFinished(t, worker, ids, 30*time.Second)
			for _, id := range ids {
				info := mustGet(t, api, id)
				if info.Run.Definition != v1.Definition().Hash() {
					t.Errorf("run %s recorded version %q; want %s", id, info.Run.Definition, v1.Definition().Hash())
				}
			}
			if n := callsOf(&calls, "ship"); n != 5 {
				t.Errorf("ship ran %d times; want 5", n)
			}

			defs, err := api.Definitions(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(defs) != 1 || defs[0].Name != "order" || defs[0].Version != v1.Definition().Hash() || defs[0].Handlers {
				t.Fatalf("API node's definitions: %+v; want order at v1 without handlers", defs)
			}
			if len(defs[0].Definition.Steps) != 4 || defs[0].Definition.Steps[2].When != "input.total >= 100" {
				t.Errorf("stored definition lost the plan: %+v", defs[0].Definition)
			}
			wdefs, err := worker.Definitions(context.Background())
			if err != nil || len(wdefs) != 1 || !wdefs[0].Handlers {
				t.Fatalf("worker's definitions: %+v, %v; want order with handlers", wdefs, err)
			}
			if _, err := api.DefinitionVersions(context.Background(), "nope"); !errors.Is(err, engine.ErrUnknownWorkflow) {
				t.Errorf("versions of an unknown workflow: %v; want ErrUnknownWorkflow", err)
			}
			// The API node's workers are off: it ran nothing.
			for _, id := range ids {
				for _, a := range mustGet(t, api, id).Attempts {
					if a.Worker == "api" {
						t.Errorf("run %s step %s ran on the API node", id, a.Step)
					}
				}
			}
		})
	}
}

// A run started on v1 finishes on v1's plan while v2 (a step added, a
// condition changed) is deployed mid-run and the v1 node leaves; a run
// started afterwards follows v2. Both versions are listed.
func TestRunFollowsItsVersion(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			st, rdb, prefix := b.open(t)
			var calls1, calls2 sync.Map
			block := make(chan struct{})
			v1, v2 := orderV(t, 1, &calls1, block), orderV(t, 2, &calls2, nil)

			n1, err := isoNode{store: st, redis: rdb, prefix: prefix, id: "v1", workflows: []*dag.Workflow{v1}}.open(t)
			if err != nil {
				t.Fatal(err)
			}
			old, err := n1.Trigger(context.Background(), "order", map[string]int{"total": 500})
			if err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 10*time.Second, func() bool {
				s, err := st.StepGet(context.Background(), old, "reserve")
				return err == nil && s.Status == persistence.StepRunning
			}, "reserve did not start on v1")

			n2 := isoNode{store: st, redis: rdb, prefix: prefix, id: "v2", workflows: []*dag.Workflow{v2}}.start(t)
			// The v1 node leaves mid-step: its reserve is handed over.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			n1.Stop(ctx)
			cancel()
			close(block)
			waitFinished(t, n2, []string{old}, 30*time.Second)

			info := mustGet(t, n2, old)
			if info.Run.Definition != v1.Definition().Hash() {
				t.Errorf("old run's version %q; want v1's %s", info.Run.Definition, v1.Definition().Hash())
			}
			names := map[string]persistence.StepStatus{}
			for _, s := range info.Steps {
				names[s.Step] = s.Status
			}
			if _, ok := names["audit"]; ok || len(names) != 4 {
				t.Errorf("old run's steps %v; want v1's four", names)
			}
			if names["points"] != persistence.StepSucceeded {
				t.Errorf("old run's points is %s; v1's condition (total >= 100) runs it for 500", names["points"])
			}
			if callsOf(&calls2, "audit") != 0 {
				t.Errorf("audit ran for a v1 run")
			}

			fresh, err := n2.Trigger(context.Background(), "order", map[string]int{"total": 500})
			if err != nil {
				t.Fatal(err)
			}
			wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer wcancel()
			if r, err := n2.Wait(wctx, fresh); err != nil || r.Status != persistence.RunSucceeded {
				t.Fatalf("new run: %+v, %v; want succeeded", r, err)
			}
			info = mustGet(t, n2, fresh)
			if info.Run.Definition != v2.Definition().Hash() {
				t.Errorf("new run's version %q; want v2's", info.Run.Definition)
			}
			for _, s := range info.Steps {
				if s.Step == "points" && s.Status != persistence.StepSkipped {
					t.Errorf("new run's points is %s; v2's condition skips it for 500", s.Status)
				}
			}
			if callsOf(&calls2, "audit") != 1 {
				t.Errorf("audit ran %d times; want once, for the v2 run", callsOf(&calls2, "audit"))
			}

			vs, err := n2.DefinitionVersions(context.Background(), "order")
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != 2 || vs[0].Version != v2.Definition().Hash() || vs[1].Version != v1.Definition().Hash() {
				t.Fatalf("versions %+v; want v2 then v1", vs)
			}
			if !vs[0].Handlers || vs[1].Handlers || vs[1].Declared != 1 || vs[0].Declared != 2 {
				t.Errorf("versions' details: %+v", vs)
			}
			noDeadLetters(t, st)
		})
	}
}

// sagaV is reserve -> ship where ship always fails: v1's reserve has a
// compensation, v2's has none. Calls are counted by step, compensations
// as "undo".
func sagaV(t *testing.T, v int, calls *sync.Map) *dag.Workflow {
	t.Helper()
	count := func(name string) {
		n, _ := calls.LoadOrStore(name, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	reserve := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		count("reserve")
		return json.RawMessage(`{}`), nil
	})
	ship := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		count("ship")
		return nil, steps.Permanent(errors.New("carrier refused"))
	})
	undo := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		count("undo")
		return nil, nil
	})
	var opts []dag.StepOption
	if v == 1 {
		opts = append(opts, dag.Compensate(undo))
	}
	w, err := dag.New("saga", dag.Version(v), dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 2, InitialBackoff: 10 * time.Millisecond})).
		Step("reserve", reserve, opts...).
		Step("ship", ship, dag.After("reserve")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A run of v1 compensates on v1's plan: a v2 node (whose reserve has no
// compensation) neither skips the undo nor spends its attempts on it; a
// v1 node undoes it.
func TestCompensationWaitsForANodeWithIt(t *testing.T) {
	for _, b := range sharedBackends() {
		t.Run(b.name, func(t *testing.T) {
			st, rdb, prefix := b.open(t)
			var calls1, calls2 sync.Map
			v1, v2 := sagaV(t, 1, &calls1), sagaV(t, 2, &calls2)
			starter := isoNode{store: st, redis: rdb, prefix: prefix, id: "v1-api", noWorkers: true, workflows: []*dag.Workflow{v1}}.start(t)
			isoNode{store: st, redis: rdb, prefix: prefix, id: "v2", workflows: []*dag.Workflow{v2}}.start(t)
			id, err := starter.Trigger(context.Background(), "saga", nil)
			if err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 10*time.Second, func() bool {
				r, err := st.RunGet(context.Background(), id)
				return err == nil && r.Status == persistence.RunCompensating
			}, "the run did not start compensating on v2")
			time.Sleep(1500 * time.Millisecond) // the v2 node sees the undo task more than once
			s, err := st.StepGet(context.Background(), id, "reserve")
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != persistence.StepCompensating || s.CompAttempt != 0 {
				t.Fatalf("reserve on v2 alone: %s after %d compensation attempts; want compensating, none spent", s.Status, s.CompAttempt)
			}

			isoNode{store: st, redis: rdb, prefix: prefix, id: "v1", workflows: []*dag.Workflow{v1}}.start(t)
			testenv.Eventually(t, 10*time.Second, func() bool {
				r, err := st.RunGet(context.Background(), id)
				return err == nil && r.Status == persistence.RunCompensated
			}, "the v1 node did not undo reserve")
			if callsOf(&calls1, "undo") != 1 || callsOf(&calls2, "undo") != 0 {
				t.Errorf("undo ran %d times on v1, %d on v2; want once on v1", callsOf(&calls1, "undo"), callsOf(&calls2, "undo"))
			}
		})
	}
}

// storeWithFailingDefinitions fails DefinitionUpsert while fail is set.
type storeWithFailingDefinitions struct {
	persistence.Store
	fail atomic.Bool
}

func (s *storeWithFailingDefinitions) DefinitionUpsert(ctx context.Context, d persistence.Definition) (persistence.Definition, error) {
	if s.fail.Load() {
		return persistence.Definition{}, errors.New("database on fire")
	}
	return s.Store.DefinitionUpsert(ctx, d)
}

// Register on a started engine stores the definition first: on failure
// nothing is registered and Register can be called again.
func TestRegisterAfterStartStoresTheDefinition(t *testing.T) {
	st := &storeWithFailingDefinitions{Store: sqliteStore(t)}
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	e := isoNode{store: st, redis: rdb, prefix: "dagflow", id: "late"}.start(t)
	var calls sync.Map
	v1 := orderV(t, 1, &calls, nil)

	st.fail.Store(true)
	if err := e.Register(v1); err == nil || !strings.Contains(err.Error(), "database on fire") {
		t.Fatalf("Register with the store failing: %v; want its error", err)
	}
	if e.Workflow("order") != nil {
		t.Fatal("a workflow whose definition was not stored is registered")
	}
	st.fail.Store(false)
	if err := e.Register(v1); err != nil {
		t.Fatalf("Register again: %v", err)
	}
	vs, err := e.DefinitionVersions(context.Background(), "order")
	if err != nil || len(vs) != 1 || vs[0].Version != v1.Definition().Hash() || vs[0].RegisteredAt.IsZero() {
		t.Fatalf("versions after Register: %+v, %v; want v1, stored", vs, err)
	}
	id, err := e.Trigger(context.Background(), "order", map[string]int{"total": 5})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := e.Wait(context.Background(), id); err != nil || r.Status != persistence.RunSucceeded {
		t.Fatalf("run of a workflow registered after Start: %+v, %v", r, err)
	}
}

// A node without a workflow's handlers starts runs on the version
// deployed last, within a few seconds of its deploy.
func TestTriggerFollowsTheCurrentVersion(t *testing.T) {
	st := sqliteStore(t)
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	var calls sync.Map
	v1, v2 := orderV(t, 1, &calls, nil), orderV(t, 2, &calls, nil)
	api := isoNode{store: st, redis: rdb, prefix: "dagflow", id: "api", noWorkers: true}.start(t)
	isoNode{store: st, redis: rdb, prefix: "dagflow", id: "w1", workflows: []*dag.Workflow{v1}}.start(t)
	version := func() string {
		id, err := api.Trigger(context.Background(), "order", map[string]int{"total": 5})
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.RunGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Definition
	}
	if v := version(); v != v1.Definition().Hash() {
		t.Fatalf("first run on %s; want v1", v)
	}
	isoNode{store: st, redis: rdb, prefix: "dagflow", id: "w2", workflows: []*dag.Workflow{v2}}.start(t)
	testenv.Eventually(t, 10*time.Second, func() bool { return version() == v2.Definition().Hash() },
		"the API node did not move to v2")
}

// storeWithFailingVersions fails the next failures DefinitionGet calls.
type storeWithFailingVersions struct {
	persistence.Store
	failures atomic.Int64
	calls    atomic.Int64
}

func (s *storeWithFailingVersions) DefinitionGet(ctx context.Context, wf, v string) (persistence.Definition, error) {
	s.calls.Add(1)
	if s.failures.Add(-1) >= 0 {
		return persistence.Definition{}, errors.New("connection reset")
	}
	return s.Store.DefinitionGet(ctx, wf, v)
}

// A blip of the store while a node reads a run's version costs the
// step nothing: the node reads it again, runs the step once, on the
// run's plan, and spends no extra attempt.
func TestStepRidesOutAFailedVersionRead(t *testing.T) {
	base := sqliteStore(t)
	st := &storeWithFailingVersions{Store: base}
	st.failures.Store(2)
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	var calls1, calls2 sync.Map
	v1, v2 := orderV(t, 1, &calls1, nil), orderV(t, 2, &calls2, nil)
	starter := isoNode{store: base, redis: rdb, prefix: "dagflow", id: "v1-api", noWorkers: true, workflows: []*dag.Workflow{v1}}.start(t)
	isoNode{store: st, redis: rdb, prefix: "dagflow", id: "v2", workflows: []*dag.Workflow{v2}}.start(t)
	id, err := starter.Trigger(context.Background(), "order", map[string]int{"total": 500})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		r, err := base.RunGet(context.Background(), id)
		return err == nil && r.Status.Terminal()
	}, "the run did not finish")
	info := mustGet(t, starter, id)
	if info.Run.Status != persistence.RunSucceeded {
		t.Fatalf("run %s: %s", id, dumpRun(t, base, id))
	}
	if got := stepStatus(info, "points"); got != persistence.StepSucceeded {
		t.Errorf("points is %s; v1's plan runs it for 500", got)
	}
	for _, s := range info.Steps {
		if s.Attempt > 1 {
			t.Errorf("step %s used %d attempts; a failed read of the version must cost none", s.Step, s.Attempt)
		}
	}
	if st.calls.Load() < 3 {
		t.Errorf("DefinitionGet called %d times; want the two failures and a success", st.calls.Load())
	}
	noDeadLetters(t, base)
}

func dumpRun(t *testing.T, st persistence.Store, id string) string {
	r, _ := st.RunGet(context.Background(), id)
	sts, _ := st.StepList(context.Background(), id)
	out := string(r.Status)
	for _, s := range sts {
		out += fmt.Sprintf(" %s=%s/a%d/lease%v", s.Step, s.Status, s.Attempt, s.LeaseExpiresAt)
	}
	return out
}

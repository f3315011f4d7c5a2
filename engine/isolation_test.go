package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/steps"
)

// isoNode is one engine of an isolation test, on a shared store.
type isoNode struct {
	store     persistence.Store
	redis     redis.UniversalClient
	prefix    string
	workflows []*dag.Workflow
	noWorkers bool
	schedules map[string]string // name -> workflow, "@every 1s"
	id        string
}

func (n isoNode) start(t *testing.T) *engine.Engine {
	t.Helper()
	e, err := n.open(t)
	if err != nil {
		t.Fatalf("node %s: %v", n.id, err)
	}
	return e
}

// open builds and starts the node, returning Start's error.
func (n isoNode) open(t *testing.T) (*engine.Engine, error) {
	t.Helper()
	e, err := engine.New(engine.Config{
		Store: n.store, Redis: n.redis, Prefix: n.prefix, NodeID: n.id,
		Logger:      slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Concurrency: 8, NoWorkers: n.noWorkers,
		PollInterval: 20 * time.Millisecond, ReconcileInterval: 100 * time.Millisecond,
		ScheduleInterval: 100 * time.Millisecond, Lease: 3 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	if err := e.Register(n.workflows...); err != nil {
		return nil, err
	}
	for name, wf := range n.schedules {
		if err := e.Schedule(name, "@every 1s", wf, map[string]any{"from": name}); err != nil {
			return nil, err
		}
	}
	if err := e.Start(context.Background()); err != nil {
		return nil, err
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e, nil
}

// okWorkflow is a -> b with handlers that count their calls in n, and no
// retries: a node that fails a step it cannot run dead-letters it at once.
func okWorkflow(t *testing.T, name string, calls *atomic.Int64, extra ...string) *dag.Workflow {
	t.Helper()
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		calls.Add(1)
		return []byte(`{}`), nil
	})
	b := dag.New(name, dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 1})).
		Step("a", h).Step("b", h, dag.After("a"))
	prev := "b"
	for _, s := range extra {
		b = b.Step(s, h, dag.After(prev))
		prev = s
	}
	wf, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func mysqlStore(t *testing.T) persistence.Store {
	t.Helper()
	st, err := mysql.Open(context.Background(), mysql.Config{DSN: testenv.MySQLDatabase(t), AutoMigrate: true})
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func sharedRedis(t *testing.T) (redis.UniversalClient, func() string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.RequireRedis(t), PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	return c, func() string {
		p := testenv.KeyPrefix(t)
		testenv.DeleteKeys(t, c, p)
		return p
	}
}

func trigger(t *testing.T, e *engine.Engine, wf string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id, err := e.Trigger(context.Background(), wf, map[string]int{"i": i})
		if err != nil {
			t.Fatalf("trigger %s: %v", wf, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// waitFinished waits until every run succeeded and checks that each of
// its steps succeeded exactly once.
func waitFinished(t *testing.T, e *engine.Engine, ids []string, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, func() bool {
		for _, id := range ids {
			if r, err := e.Store().RunGet(context.Background(), id); err != nil || r.Status != persistence.RunSucceeded {
				return false
			}
		}
		return true
	}, "runs did not all succeed")
	for _, id := range ids {
		info := mustGet(t, e, id)
		for _, s := range info.Steps {
			if got := successes(info, s.Step); got != 1 {
				t.Errorf("run %s step %s succeeded %d times; want once", id, s.Step, got)
			}
		}
	}
}

func noDeadLetters(t *testing.T, st persistence.Store) {
	t.Helper()
	page, err := st.StepListDead(context.Background(), persistence.StepListDeadParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Steps {
		t.Errorf("dead letter: run %s step %s: %s", s.RunID, s.Step, s.Error)
	}
}

// Two applications share a database with their own Redis prefixes: the
// second neither runs, fails nor reconciles the first's runs, and does
// not disable its schedule. (On the old engine, B dead-lettered all of
// A's runs within seconds: "workflow … not registered on node".)
func TestNodeLeavesOtherWorkloadsAlone(t *testing.T) {
	st := mysqlStore(t)
	rdb, prefix := sharedRedis(t)
	var aCalls, bCalls atomic.Int64
	alpha, beta := okWorkflow(t, "alpha", &aCalls), okWorkflow(t, "beta", &bCalls)
	pa, pb := prefix(), prefix()

	// A's runs wait: A runs no workers yet.
	a := isoNode{store: st, redis: rdb, prefix: pa, id: "a-trigger", noWorkers: true,
		workflows: []*dag.Workflow{alpha}, schedules: map[string]string{"alpha-every": "alpha"}}.start(t)
	aRuns := trigger(t, a, "alpha", 20)
	b := isoNode{store: st, redis: rdb, prefix: pb, id: "b-worker",
		workflows: []*dag.Workflow{beta}, schedules: map[string]string{"beta-every": "beta"}}.start(t)
	bRuns := trigger(t, b, "beta", 20)
	waitFinished(t, b, bRuns, 30*time.Second)
	time.Sleep(2 * time.Second) // twenty reconcile passes of B's

	for _, id := range aRuns {
		info := mustGet(t, b, id)
		if info.Run.Status != persistence.RunRunning {
			t.Errorf("A's run %s is %s; want running", id, info.Run.Status)
		}
		for _, s := range info.Steps {
			if s.Attempt != 0 {
				t.Errorf("A's run %s step %s used %d attempts on B", id, s.Step, s.Attempt)
			}
		}
	}
	noDeadLetters(t, st)
	sc, err := b.GetSchedule(context.Background(), "alpha-every")
	if err != nil || sc.Disabled {
		t.Errorf("A's schedule after B started: %+v, %v; want enabled", sc.Schedule, err)
	}
	if aCalls.Load() != 0 {
		t.Errorf("A's handlers ran %d times before any A worker started", aCalls.Load())
	}

	// A's workers finish A's runs, each step once.
	isoNode{store: st, redis: rdb, prefix: pa, id: "a-worker", workflows: []*dag.Workflow{alpha}}.start(t)
	waitFinished(t, a, aRuns, 30*time.Second)
	noDeadLetters(t, st)
}

// A Redis prefix serves one database: an engine of another database
// refuses to start on it instead of taking and dropping its tasks.
func TestPrefixBelongsToOneDatabase(t *testing.T) {
	st1, st2 := mysqlStore(t), sqliteStore(t)
	rdb, prefix := sharedRedis(t)
	p := prefix()
	var calls atomic.Int64
	wf := okWorkflow(t, "alpha", &calls)
	a := isoNode{store: st1, redis: rdb, prefix: p, id: "db1", noWorkers: true, workflows: []*dag.Workflow{wf}}.start(t)
	ids := trigger(t, a, "alpha", 10)

	_, err := isoNode{store: st2, redis: rdb, prefix: p, id: "db2", workflows: []*dag.Workflow{wf}}.open(t)
	var ne *engine.NamespaceError
	if !errors.Is(err, engine.ErrNamespaceConflict) || !errors.As(err, &ne) {
		t.Fatalf("Start on another database's prefix: %v; want ErrNamespaceConflict", err)
	}
	id1, _ := st1.StoreID(context.Background())
	id2, _ := st2.StoreID(context.Background())
	if ne.Prefix != p || ne.OwnerID != id1 || ne.StoreID != id2 {
		t.Errorf("NamespaceError %+v; want prefix %s owner %s store %s", ne, p, id1, id2)
	}
	if calls.Load() != 0 {
		t.Errorf("handlers ran %d times on the refused node", calls.Load())
	}
	// The other database's engine on its own prefix starts.
	isoNode{store: st2, redis: rdb, prefix: prefix(), id: "db2-own", workflows: []*dag.Workflow{wf}}.start(t)
	// The first database's tasks are all still there for its workers.
	isoNode{store: st1, redis: rdb, prefix: p, id: "db1-worker", workflows: []*dag.Workflow{wf}}.start(t)
	waitFinished(t, a, ids, 30*time.Second)
}

// A step that no live node can run (a newer deploy added it) waits,
// visibly and without using attempts, and runs once a node that has it
// starts. (On the old engine the old nodes dead-lettered it.)
func TestStepNoNodeCanRunWaits(t *testing.T) {
	st := mysqlStore(t)
	rdb, prefix := sharedRedis(t)
	p := prefix()
	var calls atomic.Int64
	v1, v2 := okWorkflow(t, "order", &calls), okWorkflow(t, "order", &calls, "audit")

	old := isoNode{store: st, redis: rdb, prefix: p, id: "v1", workflows: []*dag.Workflow{v1}}.start(t)
	trig := isoNode{store: st, redis: rdb, prefix: p, id: "v2-api", noWorkers: true, workflows: []*dag.Workflow{v2}}.start(t)
	ids := trigger(t, trig, "order", 5)
	ctx := context.Background()
	testenv.Eventually(t, 20*time.Second, func() bool {
		for _, id := range ids {
			s, err := st.StepGet(ctx, id, "b")
			if err != nil || s.Status != persistence.StepSucceeded {
				return false
			}
		}
		return true
	}, "v1 did not run the steps it has")
	testenv.Eventually(t, 10*time.Second, func() bool {
		return old.Stats().ClaimsRefused[persistence.RefusedUnhandled] > 0
	}, "v1 never saw the audit step")
	time.Sleep(time.Second)

	for _, id := range ids {
		s, err := st.StepGet(ctx, id, "audit")
		if err != nil || s.Status != persistence.StepQueued || s.Attempt != 0 {
			t.Errorf("audit of %s: %+v, %v; want queued with no attempt used", id, s, err)
		}
		w, err := trig.WhyWaiting(ctx, id, "audit")
		if err != nil || w.Reason != engine.WaitNoNode || len(w.Nodes) != 0 {
			t.Errorf("why is audit of %s waiting: %+v, %v; want no_node", id, w, err)
		}
		if w, err := trig.WhyWaiting(ctx, id, "b"); err != nil || w.Reason != engine.WaitNone {
			t.Errorf("why is b of %s waiting: %+v, %v; want none", id, w, err)
		}
	}
	noDeadLetters(t, st)

	isoNode{store: st, redis: rdb, prefix: p, id: "v2", workflows: []*dag.Workflow{v2}}.start(t)
	waitFinished(t, trig, ids, 30*time.Second)
}

// TestWhyWaiting covers the other answers: dependencies, the queue with
// a node that can run the step, a delayed run.
func TestWhyWaiting(t *testing.T) {
	st := sqliteStore(t)
	rdb, prefix := sharedRedis(t)
	p := prefix()
	gate := make(chan struct{})
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []byte(`{}`), nil
	})
	wf, err := dag.New("slow").Step("a", h).Step("b", h, dag.After("a")).Step("c", h, dag.Queue("elsewhere")).Build()
	if err != nil {
		t.Fatal(err)
	}
	e := isoNode{store: st, redis: rdb, prefix: p, id: "n1", workflows: []*dag.Workflow{wf}}
	// This node works only the default queue.
	eng, err := engine.New(engine.Config{Store: e.store, Redis: e.redis, Prefix: e.prefix, NodeID: "n1", Queues: []string{"default"},
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(wf); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { close(gate); eng.Stop(context.Background()) }()
	ctx := context.Background()
	id, err := eng.Trigger(ctx, "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		w, err := eng.WhyWaiting(ctx, id, "a")
		return err == nil && w.Reason == engine.WaitRunning
	}, "a never ran")
	w, err := eng.WhyWaiting(ctx, id, "b")
	if err != nil || w.Reason != engine.WaitDependencies || fmt.Sprint(w.Pending) != "[a]" {
		t.Errorf("b: %+v, %v; want waiting for a", w, err)
	}
	w, err = eng.WhyWaiting(ctx, id, "c")
	if err != nil || w.Reason != engine.WaitNoNode || w.Queue != "elsewhere" {
		t.Errorf("c: %+v, %v; want no node (its queue is not worked)", w, err)
	}
	later, err := eng.Trigger(ctx, "slow", nil, engine.StartAt(time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if w, err := eng.WhyWaiting(ctx, later, "a"); err != nil || w.Reason != engine.WaitRunPending {
		t.Errorf("delayed run: %+v, %v; want run_pending", w, err)
	}
	if _, err := eng.WhyWaiting(ctx, id, "nope"); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("unknown step: %v", err)
	}
	nodes, err := eng.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].ID != "n1" || !nodes[0].Runs("slow", "a", "default") {
		t.Errorf("nodes: %+v, %v", nodes, err)
	}
}

// rollingDeployFor is how long the rolling-deploy test runs both
// versions side by side (DAGFLOW_ROLLING_DEPLOY overrides; -short: 5s).
func rollingDeployFor() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("DAGFLOW_ROLLING_DEPLOY")); err == nil {
		return d
	}
	if testing.Short() {
		return 5 * time.Second
	}
	return 30 * time.Second
}

// Nodes of version 1 and 2 run side by side: version 2 adds a step to
// "order", a workflow "refund" and a schedule. Nothing is dead-lettered,
// disabled or lost, and both versions' runs finish, each step once.
func TestRollingDeploy(t *testing.T) {
	st := mysqlStore(t)
	rdb, prefix := sharedRedis(t)
	p := prefix()
	var calls atomic.Int64
	v1 := []*dag.Workflow{okWorkflow(t, "order", &calls)}
	v2 := []*dag.Workflow{okWorkflow(t, "order", &calls, "audit"), okWorkflow(t, "refund", &calls)}
	node := func(id string, wfs []*dag.Workflow, sched map[string]string) isoNode {
		return isoNode{store: st, redis: rdb, prefix: p, id: id, workflows: wfs, schedules: sched}
	}
	v1Sched := map[string]string{"order-every": "order"}
	v2Sched := map[string]string{"order-every": "order", "refund-every": "refund"}
	nodes := map[string]*engine.Engine{
		"v1-a": node("v1-a", v1, v1Sched).start(t),
		"v1-b": node("v1-b", v1, v1Sched).start(t),
	}
	var mu sync.Mutex
	var ids []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	triggerFrom := func(id, wf string) {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			mu.Lock()
			e := nodes[id]
			mu.Unlock()
			run, err := e.Trigger(context.Background(), wf, map[string]int{"i": i})
			if errors.Is(err, engine.ErrStopped) {
				return
			}
			if err != nil {
				t.Errorf("trigger %s on %s: %v", wf, id, err)
				return
			}
			mu.Lock()
			ids = append(ids, run)
			mu.Unlock()
		}
	}
	wg.Add(1)
	go triggerFrom("v1-a", "order")
	d := rollingDeployFor()
	time.Sleep(d / 6)
	// The deploy: version 2 joins, a version 1 node restarts (its Start
	// must not disable version 2's schedule), both run side by side.
	mu.Lock()
	nodes["v2-a"] = node("v2-a", v2, v2Sched).start(t)
	nodes["v2-b"] = node("v2-b", v2, v2Sched).start(t)
	mu.Unlock()
	wg.Add(2)
	go triggerFrom("v2-a", "order")
	go triggerFrom("v2-b", "refund")
	time.Sleep(d / 3)
	mu.Lock()
	nodes["v1-b"].Stop(context.Background())
	nodes["v1-b"] = node("v1-b2", v1, v1Sched).start(t)
	mu.Unlock()
	time.Sleep(d - d/6 - d/3)
	close(stop)
	wg.Wait()

	ctx := context.Background()
	for _, name := range []string{"order-every", "refund-every"} {
		sc, err := nodes["v2-a"].GetSchedule(ctx, name)
		if err != nil || sc.Disabled || sc.LastTick == nil {
			t.Errorf("schedule %s: %+v, %v; want enabled and fired", name, sc.Schedule, err)
		}
	}
	// Every run, the schedules' included, finishes.
	var all []string
	for cursor := ""; ; {
		page, err := st.RunList(ctx, persistence.RunListParams{Limit: 500, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			all = append(all, r.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) < len(ids) {
		t.Fatalf("listed %d runs; triggered %d", len(all), len(ids))
	}
	waitFinished(t, nodes["v2-a"], all, 60*time.Second)
	noDeadLetters(t, st)
	var audits, refunds int
	for _, id := range all {
		info := mustGet(t, nodes["v2-a"], id)
		refunds += b2i(info.Run.Workflow == "refund")
		audits += successes(info, "audit")
	}
	if audits == 0 || refunds == 0 {
		t.Errorf("version 2's work did not run: %d audits, %d refunds", audits, refunds)
	}
	t.Logf("%d runs in %v (%d audit steps, %d refunds); v1 nodes refused %d unhandled claims",
		len(all), d, audits, refunds, nodes["v1-a"].Stats().ClaimsRefused[persistence.RefusedUnhandled])
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

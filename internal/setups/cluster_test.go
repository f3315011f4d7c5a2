package setups

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// The engine on a Redis Cluster of 3 masters and 3 replicas, beside
// TestRedisCluster's orders: the saga, cron on two nodes, and queues
// spread over the masters. The fault scenarios on a Cluster (every master
// flushed, a master killed and its replica promoted) are in faults/.

// startCluster starts a 3-master, 3-replica Cluster and returns a cluster
// client of it, closed when the test ends.
func startCluster(t *testing.T) (*testenv.RedisCluster, *redis.ClusterClient) {
	t.Helper()
	skipShort(t)
	cl := testenv.StartCluster(t, 3, 1)
	return cl, cl.Client(t)
}

// TestRedisClusterSaga: orders whose ship step fails permanently are
// compensated on a Cluster: reserve's stock released and points taken
// back once each, in reverse order, and every forward step that ran
// succeeded once.
func TestRedisClusterSaga(t *testing.T) {
	_, c := startCluster(t)
	st := sharedStore(t)
	reg := steps.NewRegistry()
	svc := orderflow.NewServices()
	if err := svc.Register(reg); err != nil {
		t.Fatal(err)
	}
	e := startNode(t, setup{store: st, redis: c, prefix: testenv.KeyPrefix(t)}, reg, nil)
	ctx := context.Background()
	const runs = 10
	var ids []string
	points := 0
	for i := range runs {
		o := orderflow.Order{OrderID: fmt.Sprintf("s-%d", i), Customer: "c@example.com", SKU: "sku-1", Quantity: 1, Total: float64(60 + 10*i), FailStep: "ship"}
		if o.Total >= 100 {
			points++
		}
		id, err := e.Trigger(ctx, "order", o)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, id := range ids {
		run, err := e.Wait(wctx, id)
		if err != nil {
			t.Fatalf("run %s did not finish: %v", id, err)
		}
		if run.Status != persistence.RunCompensated {
			t.Errorf("run %s: %s (%s), want compensated", id, run.Status, run.Error)
		}
		checkSaga(t, st, id)
	}
	for kind, want := range map[string]int{"reserve": runs, "notify": runs, "points": points, "ship": 0, "release": runs, "revoke_points": points} {
		if got := svc.Count(kind); got != want {
			t.Errorf("%d %s effects, want %d", got, kind, want)
		}
	}
}

// checkSaga checks one compensated order run by the store's attempts:
// reserve, notify and points (unless skipped) succeeded once, ship failed
// once and is dead, and reserve and points (if it ran) were compensated
// once each, points first.
func checkSaga(t *testing.T, st persistence.Store, runID string) {
	t.Helper()
	atts, err := st.AttemptList(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	forward, comp := map[string]int{}, map[string]int{}
	var reserveStart, pointsEnd time.Time
	shipFailed := 0
	for _, a := range atts {
		switch {
		case a.Kind == persistence.AttemptForward && (a.Outcome == persistence.OutcomeSucceeded || a.Outcome == persistence.OutcomeSkipped):
			forward[a.Step]++
		case a.Kind == persistence.AttemptForward && a.Step == "ship" && a.Outcome == persistence.OutcomeFailed:
			shipFailed++
		case a.Kind == persistence.AttemptCompensation && a.Outcome == persistence.OutcomeSucceeded:
			comp[a.Step]++
			switch {
			case a.Step == "reserve":
				reserveStart = a.StartedAt
			case a.Step == "points" && a.FinishedAt != nil:
				pointsEnd = *a.FinishedAt
			}
		default:
			t.Errorf("run %s: unexpected attempt %s %s #%d %s %s", runID, a.Kind, a.Step, a.Attempt, a.Outcome, a.Error)
		}
	}
	for _, s := range []string{"reserve", "notify", "points"} {
		if forward[s] != 1 {
			t.Errorf("run %s: step %s has %d succeeded attempts, want 1", runID, s, forward[s])
		}
	}
	if shipFailed != 1 || forward["ship"] != 0 {
		t.Errorf("run %s: ship failed %d times and succeeded %d, want one permanent failure", runID, shipFailed, forward["ship"])
	}
	if comp["reserve"] != 1 || comp["points"] > 1 {
		t.Errorf("run %s: compensations %v, want reserve once and points at most once", runID, comp)
	}
	// reserve's compensation starts after points' ended (it depends on it).
	if comp["points"] == 1 && reserveStart.Before(pointsEnd) {
		t.Errorf("run %s: reserve compensated from %v, before points' compensation ended at %v", runID, reserveStart, pointsEnd)
	}
}

// TestRedisClusterCron: two engine nodes on a Cluster declare the same
// @every 1s schedule of the order workflow; for 5 seconds each tick
// starts one run, and every run succeeds with each step once.
func TestRedisClusterCron(t *testing.T) {
	_, c := startCluster(t)
	st := sharedStore(t)
	s := setup{store: st, redis: c, prefix: testenv.KeyPrefix(t)}
	svc := orderflow.NewServices()
	const name = "every-1s"
	order := orderflow.Order{OrderID: "cron", Customer: "c@example.com", SKU: "sku-1", Quantity: 1, Total: 150}
	var nodes []*engine.Engine
	for range 2 {
		reg := steps.NewRegistry()
		if err := svc.Register(reg); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, startNode(t, s, reg, func(e *engine.Engine) error {
			return e.Schedule(name, "@every 1s", "order", order)
		}))
	}
	time.Sleep(5 * time.Second) // the test is about real time passing
	if err := nodes[0].DisableSchedule(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	// A tick in flight when the schedule was disabled may still start a
	// run: wait until every run listed has finished and the effects
	// match them, listing again each time.
	var runs []persistence.Run
	testenv.Eventually(t, 60*time.Second, func() bool {
		page, err := st.RunList(context.Background(), persistence.RunListParams{Schedule: name, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		runs = page.Runs
		for _, r := range runs {
			if !r.Status.Terminal() {
				return false
			}
		}
		return svc.Count("ship") == len(runs)
	}, "the schedule's runs finished")
	if len(runs) < 4 || len(runs) > 7 {
		t.Errorf("%d runs in 5s, want 4 to 7", len(runs))
	}
	seen := map[int64]bool{}
	for _, r := range runs {
		if r.ScheduledTick == nil {
			t.Fatalf("run %s has no tick", r.ID)
		}
		if tk := r.ScheduledTick.Unix(); seen[tk] {
			t.Errorf("two runs for tick %v", r.ScheduledTick)
		} else {
			seen[tk] = true
		}
		if r.Status != persistence.RunSucceeded {
			t.Errorf("run %s: %s (%s), want succeeded", r.ID, r.Status, r.Error)
		}
		checkSteps(t, st, r.ID)
	}
	// The handlers dedupe by idempotency key: one effect per run and step.
	for _, kind := range []string{"reserve", "notify", "points", "ship"} {
		if got := svc.Count(kind); got != len(runs) {
			t.Errorf("%d %s effects for %d runs", got, kind, len(runs))
		}
	}
}

// TestRedisClusterQueuesSpread: a workflow split into partition queues
// (one workflow per queue) spreads over the masters. With runs triggered
// and no worker yet, every key of each queue is in the slot of its hash
// tag (CLUSTER KEYSLOT agrees with go-redis's slot map), the queues are on
// three different masters, and then a worker node runs every run.
func TestRedisClusterQueuesSpread(t *testing.T) {
	cl, c := startCluster(t)
	ctx := context.Background()
	prefix := testenv.KeyPrefix(t)
	// Three queue names whose hash tags land on three different masters.
	var queues []string
	masterOf := map[string]string{}
	used := map[string]bool{}
	for i := 0; len(queues) < 3 && i < 100; i++ {
		q := fmt.Sprintf("orders-%d", i)
		m, err := c.MasterForKey(ctx, prefix+":{"+q+"}:ready")
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; !used[addr] {
			used[addr] = true
			masterOf[q] = addr
			queues = append(queues, q)
		}
	}
	if len(queues) != 3 {
		t.Fatalf("found queues on %d masters only: %v", len(queues), masterOf)
	}
	st := sharedStore(t)
	var wfs []*dag.Workflow
	step := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})
	for _, q := range queues {
		wf, err := dag.New("part-"+q, dag.DefaultQueue(q)).Step("a", step).Step("b", step, dag.After("a")).Build()
		if err != nil {
			t.Fatal(err)
		}
		wfs = append(wfs, wf)
	}
	newNode := func(noWorkers bool) *engine.Engine {
		e, err := engine.New(engine.Config{Store: st, Redis: c, Prefix: prefix, Logger: testLogger(t), NoWorkers: noWorkers, ReconcileInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register(wfs...); err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.Stop(sctx)
		})
		return e
	}
	trig := newNode(true)
	var ids []string
	for _, wf := range wfs {
		for range 5 {
			id, err := trig.Trigger(ctx, wf.Name(), nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	// Where each queue's keys are, by asking every master.
	keysOf := map[string][]string{} // queue -> keys
	for _, m := range cl.MasterNodes(t) {
		nc := redis.NewClient(m.ClientOptions())
		keys, err := nc.Keys(ctx, prefix+":*").Result()
		if err != nil {
			nc.Close()
			t.Fatal(err)
		}
		for _, k := range keys {
			q := ""
			for _, name := range queues {
				if strings.HasPrefix(k, prefix+":{"+name+"}:") {
					q = name
				}
			}
			if q == "" {
				continue // the namespace binding and node keys
			}
			slot, err := nc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				nc.Close()
				t.Fatal(err)
			}
			want, err := nc.ClusterKeySlot(ctx, "{"+q+"}").Result()
			if err != nil {
				nc.Close()
				t.Fatal(err)
			}
			if slot != want {
				t.Errorf("key %s is in slot %d, want %d (its queue's hash tag)", k, slot, want)
			}
			if m.Addr != masterOf[q] {
				t.Errorf("key %s is on %s, want %s", k, m.Addr, masterOf[q])
			}
			keysOf[q] = append(keysOf[q], k)
		}
		nc.Close()
	}
	for _, q := range queues {
		if !slices.Contains(keysOf[q], prefix+":{"+q+"}:ready") {
			t.Errorf("queue %s: no ready list among its keys %v", q, keysOf[q])
		}
		t.Logf("queue %s on %s: %v", q, masterOf[q], keysOf[q])
	}
	worker := newNode(false)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, id := range ids {
		run, err := worker.Wait(wctx, id)
		if err != nil {
			t.Fatalf("run %s did not finish: %v", id, err)
		}
		if run.Status != persistence.RunSucceeded {
			t.Errorf("run %s: %s (%s), want succeeded", id, run.Status, run.Error)
		}
		checkSteps(t, st, id)
	}
}

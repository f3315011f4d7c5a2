package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
)

// TestParkedSurviveRedisFlushAndNodeLoss: runs sleeping and waiting on
// one node outlive a FLUSHALL of their Redis and that node's end: a node
// started afterwards wakes the sleeps at their time and the events
// complete the waits; every step after them runs once.
func TestParkedSurviveRedisFlushAndNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("recovery test")
	}
	run := func(t *testing.T, o enginetest.Options, flush func(env *enginetest.Env)) {
		var after sync.Map
		count := func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			n, _ := after.LoadOrStore(sc.RunID, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return nil, nil
		}
		w, err := dag.New("hold").
			Step("nap", nil, dag.Sleep(3*time.Second)).
			Step("paid", nil, dag.WaitFor("payment.captured", dag.Correlate("input.order_id"))).
			Step("after", steps.HandlerFunc(count), dag.After("nap", "paid")).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		o.Workflows = []*dag.Workflow{w}
		o.Clock = engine.SystemClock
		a := enginetest.New(t, o)
		const n = 50
		ids := make([]string, n)
		started := time.Now()
		for i := range ids {
			ids[i] = a.Trigger(t, "hold", map[string]any{"order_id": fmt.Sprintf("h-%d", i)})
		}
		for _, id := range ids {
			waitParked(t, a.Engine, id, "paid")
		}
		flush(a)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Engine.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		b := enginetest.New(t, enginetest.Options{Store: a.Store, Redis: a.Redis, Prefix: a.Prefix, Clock: engine.SystemClock,
			Workflows: []*dag.Workflow{w}})
		for i := range ids {
			if _, err := b.Engine.Publish(context.Background(), "payment.captured", nil, engine.Correlation(fmt.Sprintf("h-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids {
			info := b.WaitTimeout(t, id, time.Minute)
			b.AssertRun(t, info, persistence.RunSucceeded)
			nap := stepOf(t, info, "nap")
			if nap.FinishedAt == nil || nap.FinishedAt.Before(started.Add(3*time.Second)) {
				t.Errorf("run %s: the sleep ended at %v, before its time", id, nap.FinishedAt)
			}
			if c, _ := after.Load(id); c == nil || c.(*atomic.Int64).Load() != 1 {
				t.Errorf("run %s: after ran %v times, want once", id, c)
			}
		}
	}
	t.Run("sqlite+miniredis", func(t *testing.T) {
		run(t, enginetest.Options{}, func(env *enginetest.Env) { env.Miniredis.FlushAll() })
	})
	t.Run("mysql+redis", func(t *testing.T) {
		srv := testenv.StartRedis(t) // a private Redis: the shared one is never flushed
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
		t.Cleanup(func() { c.Close() })
		st, err := mysql.Open(context.Background(), mysql.Config{DSN: testenv.MySQLDatabase(t), AutoMigrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		run(t, enginetest.Options{Store: st, Redis: c}, func(env *enginetest.Env) {
			if err := c.FlushAll(context.Background()).Err(); err != nil {
				t.Errorf("flushall on the private redis: %v", err)
			}
		})
	})
}

// staleDueStore hands its engine one stale list of due parked steps: the
// first list that names step is returned only once the step was timed
// out by another pass and parked again (attempt 2, with a fresh
// deadline), as the list of a slow node's timer pass would be.
type staleDueStore struct {
	persistence.Store
	step  string
	once  sync.Once
	fired chan struct{} // closed when the stale list is returned
}

func (s *staleDueStore) StepListParkedDue(ctx context.Context, p persistence.ListDueParams) ([]persistence.StepWait, time.Time, error) {
	due, next, err := s.Store.StepListParkedDue(ctx, p)
	i := slices.IndexFunc(due, func(w persistence.StepWait) bool { return w.Step == s.step })
	if err != nil || i < 0 {
		return due, next, err
	}
	stale := false
	s.once.Do(func() { stale = true })
	if !stale {
		return due, next, err
	}
	defer close(s.fired)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, err := s.Store.StepGet(ctx, due[i].RunID, s.step); err == nil && st.Status == persistence.StepParked && st.Attempt == 2 {
			break
		}
	}
	return due, next, nil
}

// TestStaleTimeoutLeavesReparkedWait: a timer pass that read a wait as
// due, and acts only after another pass timed it out and its retry parked
// it again with a fresh deadline, changes nothing: the retry keeps
// waiting until its own deadline (it is not dead-lettered at once), and
// its event completes it.
func TestStaleTimeoutLeavesReparkedWait(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var shipped, released sync.Map
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{paymentWorkflow(t, &shipped, &released,
			dag.WaitFor("payment.captured", dag.Correlate("input.order_id"), dag.WaitTimeout(time.Minute)),
			dag.Retry(dag.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond}))}
		if o.Store == nil {
			st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db"), AutoMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			o.Store = st
		}
		stale := &staleDueStore{Store: o.Store, step: "paid", fired: make(chan struct{})}
		o.Store = stale
		env := enginetest.New(t, o)
		run := env.Trigger(t, "payment", map[string]any{"order_id": "S"})
		waitParked(t, env.Engine, run, "paid")
		// Past the first deadline: one pass takes the stale list and
		// waits; the other times the wait out, and the retry parks.
		env.Clock.Advance(time.Minute + time.Second)
		deadline := time.After(30 * time.Second)
		for fired := false; !fired; {
			select {
			case <-stale.fired:
				fired = true
			case <-deadline:
				t.Fatal("no second park of the timed out wait")
			case <-time.After(50 * time.Millisecond):
				env.Clock.Advance(100 * time.Millisecond) // the retry's backoff
			}
		}
		// Give the stale pass time to act on its list.
		time.Sleep(500 * time.Millisecond)
		info := mustGet(t, env.Engine, run)
		if paid := stepOf(t, info, "paid"); paid.Status != persistence.StepParked || paid.Attempt != 2 {
			t.Fatalf("after a stale timeout pass, paid is %s at attempt %d (%s), want parked at attempt 2 until its own deadline",
				paid.Status, paid.Attempt, paid.Error)
		}
		if _, err := env.Engine.Publish(context.Background(), "payment.captured", map[string]any{"amount": 5}, engine.Correlation("S")); err != nil {
			t.Fatal(err)
		}
		info = env.Wait(t, run)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if _, ok := released.Load(run); ok {
			t.Error("reserve was compensated")
		}
	})
}

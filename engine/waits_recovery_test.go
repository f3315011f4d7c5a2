package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
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

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

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/queue"
	"github.com/dagflow/dagflow/steps"
)

// TestRedisFlushMidRunAllRunsFinish wipes Redis while 200 runs are in
// flight: the reconciler rebuilds the queues from the store.
func TestRedisFlushMidRunAllRunsFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	run := func(t *testing.T, o enginetest.Options, flush func(env *enginetest.Env)) {
		r := &recorder{}
		o.Workflows = []*dag.Workflow{orderWorkflow(t, r, "order", 20*time.Millisecond, nil, false, nil)}
		o.Clock = engine.SystemClock
		o.Configure = func(c *engine.Config) {
			c.Concurrency = 8
			c.ReconcileInterval = 200 * time.Millisecond
		}
		env := enginetest.New(t, o)
		const n = 200
		// Flush once some steps are done and many are queued or running.
		flushed := make(chan string, 1)
		go func() {
			for env.Engine.Stats().StepsSucceeded < n/2 {
				time.Sleep(time.Millisecond)
			}
			before, _ := env.Engine.Queue().Stats(context.Background(), "default")
			flush(env)
			flushed <- fmt.Sprintf("flushed with %+v in Redis; engine stats %+v", before, env.Engine.Stats())
		}()
		ids := make([]string, n)
		for i := range ids {
			ids[i] = env.Trigger(t, "order", map[string]int{"i": i})
		}
		select {
		case msg := <-flushed:
			t.Log(msg)
		case <-time.After(time.Minute):
			t.Fatal("no flush within a minute")
		}
		for _, id := range ids {
			info := env.WaitTimeout(t, id, 2*time.Minute)
			env.AssertRun(t, info, persistence.RunSucceeded)
			for _, s := range []string{"reserve", "notify", "points", "ship"} {
				if got := successes(info, s); got != 1 {
					t.Fatalf("run %s step %s: %d successes recorded, want 1", id, s, got)
				}
			}
		}
		if env.Engine.Stats().Reconciled == 0 {
			t.Errorf("the reconciler re-enqueued nothing; the flush did not hit in-flight work")
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

func TestTriggerTxCommitsWithCallersTransaction(t *testing.T) {
	cases := []struct {
		name  string
		store func(t *testing.T) (persistence.Store, func(ctx context.Context) (txLike, error))
	}{
		{"sqlite", func(t *testing.T) (persistence.Store, func(ctx context.Context) (txLike, error)) {
			st, err := sqlite.Open(context.Background(), sqlite.Config{Path: t.TempDir() + "/tx.db", AutoMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st, func(ctx context.Context) (txLike, error) { return st.DB().BeginTx(ctx, nil) }
		}},
		{"mysql", func(t *testing.T) (persistence.Store, func(ctx context.Context) (txLike, error)) {
			st, err := mysql.Open(context.Background(), mysql.Config{DSN: testenv.MySQLDatabase(t), AutoMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st, func(ctx context.Context) (txLike, error) { return st.DB().BeginTx(ctx, nil) }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, begin := tc.store(t)
			r := &recorder{}
			env := enginetest.New(t, enginetest.Options{
				Store: st, Clock: engine.SystemClock,
				Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)},
			})
			ctx := context.Background()

			tx, err := begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rolledBack, err := env.Engine.TriggerTx(ctx, tx, "order", map[string]int{"order": 1})
			if err != nil {
				t.Fatalf("TriggerTx: %v", err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.RunGet(ctx, rolledBack); !errors.Is(err, persistence.ErrRunNotFound) {
				t.Fatalf("run of a rolled-back TriggerTx: err = %v, want ErrRunNotFound", err)
			}

			tx, err = begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			committed, err := env.Engine.TriggerTx(ctx, tx, "order", map[string]int{"order": 2})
			if err != nil {
				t.Fatalf("TriggerTx: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			// No Dispatch call: the reconciler must find the committed run.
			info := env.Wait(t, committed)
			env.AssertRun(t, info, persistence.RunSucceeded)
			if got := len(r.find("reserve", false)); got != 1 {
				t.Errorf("reserve ran %d times, want 1 (only the committed run)", got)
			}
		})
	}
}

// txLike is *sql.Tx as the test uses it.
type txLike interface {
	persistence.DBTX
	Commit() error
	Rollback() error
}

func TestCancelStopsRun(t *testing.T) {
	r := &recorder{}
	wf := orderWorkflow(t, r, "order", 2*time.Second, nil, false, nil)
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{wf}, Clock: engine.SystemClock,
		Configure: func(c *engine.Config) { c.Lease = time.Second; c.Heartbeat = 100 * time.Millisecond }})
	id := env.Trigger(t, "order", nil)
	testenv.Eventually(t, 5*time.Second, func() bool {
		info := mustGet(t, env.Engine, id)
		s, _ := info.Step("reserve")
		return s.Status == persistence.StepRunning
	}, "reserve running")
	if err := env.Engine.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	info := env.Wait(t, id)
	env.AssertRun(t, info, persistence.RunCancelled)
	testenv.Eventually(t, 5*time.Second, func() bool {
		s, _ := mustGet(t, env.Engine, id).Step("reserve")
		return s.Status == persistence.StepCancelled
	}, "running step cancelled")
	for _, s := range []string{"notify", "points", "ship"} {
		env.AssertStep(t, mustGet(t, env.Engine, id), s, persistence.StepCancelled)
	}
	if err := env.Engine.Cancel(context.Background(), id); !errors.Is(err, persistence.ErrRunFinished) {
		t.Errorf("second cancel: err = %v, want ErrRunFinished", err)
	}
}

// TestStopReleasesLeases stops a node while its step runs past the
// shutdown deadline: another node takes the step at once, not after the
// lease expires.
func TestStopReleasesLeases(t *testing.T) {
	// "queued": the root step of a run triggered by a node without workers
	// goes through Redis. "create": a run triggered on the working node has
	// its root claimed by the transaction that created it, and "after" is
	// claimed by the completion that released it: neither was ever in
	// Redis, so Stop must hand them to the queue itself.
	for _, mode := range []string{"queued", "create", "after"} {
		t.Run(mode, func(t *testing.T) { testStopReleases(t, mode) })
	}
}

func testStopReleases(t *testing.T, mode string) {
	var mu sync.Mutex
	calls := 0
	block := make(chan struct{})
	slow := stepsFunc(func(ctx context.Context) error {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			select {
			case <-block:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	eager := mode == "after"
	b := dag.New("slow")
	if eager {
		b = b.Step("first", stepsFunc(func(context.Context) error { return nil })).Step("work", slow, dag.After("first"))
	} else {
		b = b.Step("work", slow)
	}
	wf2, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	st := sqliteStore(t)
	lease := time.Minute // a takeover after the lease would time the test out
	cfg := func(c *engine.Config) { c.Lease = lease; c.Heartbeat = time.Second; c.ReconcileInterval = time.Hour }
	a := enginetest.New(t, enginetest.Options{Store: st, Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf2}, Configure: cfg})
	var id string
	if mode == "queued" {
		producer := enginetest.New(t, enginetest.Options{Store: st, Redis: a.Redis, Prefix: a.Prefix, Clock: engine.SystemClock,
			Workflows: []*dag.Workflow{wf2}, Configure: func(c *engine.Config) { cfg(c); c.NoWorkers = true }})
		id = producer.Trigger(t, "slow", nil)
	} else {
		id = a.Trigger(t, "slow", nil)
	}
	testenv.Eventually(t, 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls == 1
	}, "first attempt running")
	st1 := a.Engine.Stats()
	var wantCreate, wantRelease int64
	switch mode {
	case "create":
		wantCreate = 1
	case "after":
		wantCreate, wantRelease = 1, 1
	}
	if st1.ClaimedAtCreate != wantCreate || st1.ClaimedAtRelease != wantRelease {
		t.Fatalf("claimed at create %d, at release %d; want %d and %d (stats %+v)",
			st1.ClaimedAtCreate, st1.ClaimedAtRelease, wantCreate, wantRelease, st1)
	}
	if mode == "queued" && st1.ClaimItems != 1 {
		t.Fatalf("ClaimItems = %d, want 1: the root did not come through Redis (stats %+v)", st1.ClaimItems, st1)
	}
	if mode == "create" {
		// The claimed root is not in Redis, and the store has it running
		// with the node's lease and a running attempt.
		info, err := a.Engine.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		w := info.Steps[0]
		if w.Status != persistence.StepRunning || w.Attempt != 1 || w.LeaseExpiresAt == nil {
			t.Errorf("root = %+v, want running, attempt 1, leased", w)
		}
		if len(info.Attempts) != 1 || info.Attempts[0].Outcome != persistence.OutcomeRunning {
			t.Errorf("attempts = %+v, want one running", info.Attempts)
		}
		qs, err := a.Engine.Queue().Stats(context.Background(), w.Queue)
		if err != nil {
			t.Fatal(err)
		}
		if qs != (queue.Stats{}) {
			t.Errorf("queue %s holds %+v, want nothing: the root claimed at create was also enqueued", w.Queue, qs)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.Engine.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop past its deadline: err = %v, want DeadlineExceeded", err)
	}
	if _, err := a.Engine.Trigger(context.Background(), "slow", nil); !errors.Is(err, engine.ErrStopped) {
		t.Errorf("Trigger after Stop: err = %v, want ErrStopped", err)
	}
	start := time.Now()
	// The other node reconciles only hourly: it must find the step in
	// Redis, where Stop put it.
	enginetest.New(t, enginetest.Options{Store: st, Redis: a.Redis, Prefix: a.Prefix, Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf2}, Configure: cfg})
	close(block)
	info := a.WaitTimeout(t, id, 20*time.Second)
	if info.Run.Status != persistence.RunSucceeded {
		t.Fatalf("run %s after handover: %s", id, info.Run.Status)
	}
	if took := time.Since(start); took > lease/2 {
		t.Errorf("handover took %v: the lease was not released", took)
	}
}

// stepsFunc adapts a function of the context alone to a step handler.
func stepsFunc(f func(ctx context.Context) error) steps.Handler {
	return steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		return nil, f(ctx)
	})
}

// TestHeartbeatKeepsLongStep runs a step for several leases: the heartbeat
// (which starts only when its first beat is due) extends the lease in the
// store, so the reconciler never takes the step over and its one attempt
// succeeds.
func TestHeartbeatKeepsLongStep(t *testing.T) {
	const lease = 600 * time.Millisecond
	var calls atomic.Int32
	wf, err := dag.New("long").Step("work", steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		calls.Add(1)
		select {
		case <-time.After(4 * lease):
			return json.RawMessage(`{"done":true}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf},
		Configure: func(c *engine.Config) {
			c.Lease = lease
			c.Heartbeat = lease / 4
			c.ReconcileInterval = 50 * time.Millisecond
		}})
	id := env.Trigger(t, "long", nil)
	var first time.Time
	testenv.Eventually(t, 5*time.Second, func() bool {
		s, _ := mustGet(t, env.Engine, id).Step("work")
		if s.LeaseExpiresAt != nil {
			first = *s.LeaseExpiresAt
		}
		return s.Status == persistence.StepRunning && s.LeaseExpiresAt != nil
	}, "step running")
	testenv.Eventually(t, 5*time.Second, func() bool {
		s, _ := mustGet(t, env.Engine, id).Step("work")
		return s.Status != persistence.StepRunning || (s.LeaseExpiresAt != nil && s.LeaseExpiresAt.After(first.Add(lease)))
	}, "lease extended by more than a lease")
	info := env.Wait(t, id)
	env.AssertRun(t, info, persistence.RunSucceeded)
	s, _ := info.Step("work")
	if n := calls.Load(); n != 1 || s.Attempt != 1 {
		t.Fatalf("handler called %d times, step at attempt %d; want one attempt kept alive by its heartbeat", n, s.Attempt)
	}
	if len(info.Attempts) != 1 || info.Attempts[0].Outcome != persistence.OutcomeSucceeded {
		t.Fatalf("attempts = %+v, want one succeeded", info.Attempts)
	}
}

// TestStepTimeout: a handler that returns when its context ends, and one
// that ignores it and returns late, both fail their attempt with the
// step's timeout as the reason, and the step is retried.
func TestStepTimeout(t *testing.T) {
	for _, mode := range []string{"honours", "ignores"} {
		t.Run(mode, func(t *testing.T) {
			var calls atomic.Int32
			h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
				if calls.Add(1) > 1 {
					return json.RawMessage(`{}`), nil // the retry is quick
				}
				if mode == "ignores" {
					time.Sleep(300 * time.Millisecond)
					return json.RawMessage(`{}`), nil
				}
				<-ctx.Done()
				return nil, ctx.Err()
			})
			wf, err := dag.New("slow", dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 2, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})).
				Step("work", h, dag.Timeout(100*time.Millisecond)).Build()
			if err != nil {
				t.Fatal(err)
			}
			env := enginetest.New(t, enginetest.Options{Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf}})
			info := env.Wait(t, env.Trigger(t, "slow", nil))
			env.AssertRun(t, info, persistence.RunSucceeded)
			if len(info.Attempts) != 2 || info.Attempts[0].Outcome != persistence.OutcomeFailed || info.Attempts[1].Outcome != persistence.OutcomeSucceeded {
				t.Fatalf("attempts = %+v, want a failed one then a succeeded one", info.Attempts)
			}
			if want := `step "work" timed out after 100ms`; !strings.Contains(info.Attempts[0].Error, want) {
				t.Fatalf("first attempt's error = %q, want it to contain %q", info.Attempts[0].Error, want)
			}
		})
	}
}

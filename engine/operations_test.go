package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/queue"
	"github.com/dagflow/dagflow/steps"
)

// logLines keeps the messages logged at or above a level.
type logLines struct {
	mu    sync.Mutex
	level slog.Level
	lines []string
}

func (l *logLines) Enabled(_ context.Context, lv slog.Level) bool { return lv >= l.level }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			out = append(out, s)
		}
	}
	return out
}

// TestClaimRefusalsCounted: every refused claim is counted by reason; a
// task taken before its retry is due is put back for its due time (not
// dropped), and an unexpected refusal is logged at Debug with the run,
// step and reason.
func TestClaimRefusalsCounted(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			if sc.Attempt == 1 {
				return nil, steps.RetryAfter(time.Minute, errors.New("later"))
			}
			return nil, nil
		})
		wf, err := dag.New("refusals").Step("a", h).Build()
		if err != nil {
			t.Fatal(err)
		}
		logs := &logLines{level: slog.LevelDebug}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		o.Configure = func(cfg *engine.Config) { cfg.Logger = slog.New(logs); cfg.ReconcileInterval = -1 }
		env := enginetest.New(t, o)
		ctx := context.Background()
		id := env.Trigger(t, "refusals", nil)
		testenv.Eventually(t, 10*time.Second, func() bool {
			s, err := env.Store.StepGet(ctx, id, "a")
			return err == nil && s.Status == persistence.StepRetrying
		}, "step a retrying")
		refused := func(r persistence.ClaimRefusal) int64 { return env.Engine.Stats().ClaimsRefused[r] }

		// A task for the step, a minute before its retry is due (as a
		// node with a clock ahead would take it): refused as not due, and
		// put back for the retry's time.
		if _, err := env.Engine.Queue().Enqueue(ctx, "default", queue.Item{ID: id + "/a/9"}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, func() bool { return refused(persistence.RefusedNotDue) >= 1 }, "a not-due refusal counted")
		testenv.Eventually(t, 10*time.Second, func() bool {
			st, err := env.Engine.Queue().Stats(ctx, "default")
			return err == nil && st.Delayed == 2 && st.Leased == 0 && st.Ready == 0
		}, "the early task put back, delayed beside the retry's own")
		env.Clock.Advance(time.Minute)
		env.AssertRun(t, env.Wait(t, id), persistence.RunSucceeded)

		// A task of a finished step, and one of no run at all: dropped.
		other := uuid.NewString()
		if _, err := env.Engine.Queue().Enqueue(ctx, "default", queue.Item{ID: id + "/a/3"}, queue.Item{ID: other + "/a/1"}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, func() bool {
			return refused(persistence.RefusedFinished) >= 1 && refused(persistence.RefusedNotFound) >= 1
		}, "finished and not-found refusals counted: %v", func() any {
			st, err := env.Engine.Queue().Stats(ctx, "default")
			return fmt.Sprint(env.Engine.Stats().ClaimsRefused, st, err)
		}())
		testenv.Eventually(t, 10*time.Second, func() bool {
			st, err := env.Engine.Queue().Stats(ctx, "default")
			return err == nil && st == (queue.Stats{})
		}, "stale tasks dropped")
		if got := logs.matching("claim refused"); len(got) != 1 || !strings.Contains(got[0], "run_id="+other) ||
			!strings.Contains(got[0], "reason=not_found") || !strings.Contains(got[0], "step=a") {
			t.Errorf("debug lines about refusals = %q, want one naming run %s, step a, reason not_found", got, other)
		}
	})
}

// TestRedisUnreachableCounted: an engine whose Redis does not answer
// counts every failed call in Stats and says so in a rate-limited
// warning, while its runs are still committed to the store.
func TestRedisUnreachableCounted(t *testing.T) {
	port := testenv.FreePort(t) // nothing listens there
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	wf, err := dag.New("cut").Step("a", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })).Build()
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{level: slog.LevelWarn}
	env := enginetest.New(t, enginetest.Options{Redis: rdb, Workflows: []*dag.Workflow{wf}, Configure: func(cfg *engine.Config) {
		cfg.Logger = slog.New(logs)
	}})
	id := env.Trigger(t, "cut", nil)
	if _, err := env.Store.RunGet(context.Background(), id); err != nil {
		t.Fatalf("the run was not committed: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return env.Engine.Stats().RedisErrors >= 5 }, "Redis errors counted")
	st := env.Engine.Stats()
	if st.Errors < st.RedisErrors {
		t.Errorf("Errors %d < RedisErrors %d: Redis errors must count as errors", st.Errors, st.RedisErrors)
	}
	// Several failures, one warning: the next comes 10 s later at most.
	if got := logs.matching("redis:"); len(got) != 1 {
		t.Errorf("warnings about Redis = %q, want exactly one (rate-limited)", got)
	}
}

// TestTriggerTxThroughEngine: the documented TriggerTx path works with
// nothing but the engine: DB, a transaction, TriggerTx, commit, Dispatch.
// A rolled-back run never exists; a committed one without Dispatch is
// found by the reconciler within two intervals.
func TestTriggerTxThroughEngine(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		wf, err := dag.New("tx").Step("a", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })).
			Step("b", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil }), dag.After("a")).Build()
		if err != nil {
			t.Fatal(err)
		}
		const interval = 200 * time.Millisecond
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		o.Clock = engine.SystemClock
		o.Configure = func(cfg *engine.Config) { cfg.ReconcileInterval = interval; cfg.PollInterval = 0 }
		env := enginetest.New(t, o)
		ctx := context.Background()
		db, err := env.Engine.DB()
		if err != nil {
			t.Fatalf("DB: %v", err)
		}
		trigger := func(commit bool, opts ...engine.TriggerOption) (string, time.Time) {
			t.Helper()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := env.Engine.TriggerTx(ctx, tx, "tx", map[string]int{"n": 1}, opts...)
			if err != nil {
				t.Fatalf("TriggerTx: %v", err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			return id, time.Now()
		}

		gone, _ := trigger(false)
		if _, err := env.Engine.Get(ctx, gone); !errors.Is(err, persistence.ErrRunNotFound) {
			t.Errorf("rolled-back run: Get = %v, want ErrRunNotFound", err)
		}

		id, committed := trigger(true)
		if err := env.Engine.Dispatch(ctx, id); err != nil {
			t.Fatalf("Dispatch: %v", err)
		}
		info := env.WaitTimeout(t, id, 5*time.Second)
		env.AssertRun(t, info, persistence.RunSucceeded)
		// The bounds hold as stated in the timing pass (DAGFLOW_TEST_TIMING=1,
		// alone after the suite); beside the other packages' tests under
		// -race they get the slack the CPU queue needs (timingSlack).
		slack := timingSlack()
		if d := info.Run.FinishedAt.Sub(committed); d > interval*slack {
			t.Errorf("a dispatched TriggerTx run took %v, want well under a reconcile interval (%v, times %d here)", d, interval, slack)
		}

		// Delayed and dispatched: starts at its time, not at a pass.
		start := time.Now().Add(300 * time.Millisecond)
		id, _ = trigger(true, engine.StartAt(start))
		if err := env.Engine.Dispatch(ctx, id); err != nil {
			t.Fatal(err)
		}
		info = env.WaitTimeout(t, id, 5*time.Second)
		env.AssertRun(t, info, persistence.RunSucceeded)
		if first := info.Attempts[0].StartedAt; first.Before(start.Truncate(time.Microsecond)) || first.Sub(start) > 100*time.Millisecond*slack {
			t.Errorf("a dispatched delayed run started at %v, want at %v", first, start)
		}

		// Not dispatched: the reconciler finds it within two passes.
		id, committed = trigger(true)
		info = env.WaitTimeout(t, id, 10*time.Second)
		env.AssertRun(t, info, persistence.RunSucceeded)
		waited := info.Attempts[0].StartedAt.Sub(committed)
		t.Logf("an undispatched TriggerTx run started %v after its commit (interval %v)", waited, interval)
		if waited > (2*interval+interval/2)*slack {
			t.Errorf("an undispatched TriggerTx run started %v after its commit, want within two reconcile intervals (%v, times %d here)", waited, 2*interval, slack)
		}
	})
}

// TestNeverStartedNeedsNoStop: New, Register and even Trigger start no
// goroutine and open no subscription, so an engine that is never started
// leaks nothing without Stop.
func TestNeverStartedNeedsNoStop(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	st := sqliteStore(t)
	wf, err := dag.New("idle").Step("a", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })).Build()
	if err != nil {
		t.Fatal(err)
	}
	// Warm the pools the engine will use, so that only what it starts is new.
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Now(context.Background()); err != nil {
		t.Fatal(err)
	}
	snapshot := goleak.IgnoreCurrent()
	e, err := engine.New(engine.Config{Store: st, Redis: rdb, Prefix: testenv.KeyPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(wf); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Trigger(context.Background(), "idle", nil); err != nil {
		t.Fatalf("trigger before Start: %v", err)
	}
	if n := m.PubSubNumPat(); n != 0 {
		t.Errorf("%d pattern subscriptions before Start", n)
	}
	if chans := m.PubSubChannels(""); len(chans) != 0 {
		t.Errorf("subscribed to %v before Start", chans)
	}
	goleak.VerifyNone(t, snapshot,
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"))
}

// plainStore is a store that takes no caller transactions (it hides
// DB and RunCreateTx) and whose clock may fail.
type plainStore struct {
	persistence.Store
	nowErr error
}

func (s plainStore) Now(ctx context.Context) (time.Time, error) {
	if s.nowErr != nil {
		return time.Time{}, s.nowErr
	}
	return s.Store.Now(ctx)
}

// TestNoTxStoreAndFailingClock: a store without caller transactions gives
// ErrNoTx from DB and TriggerTx and stores nothing; a database clock that
// cannot be read leaves the node working (the check is skipped, not
// failed closed), so the run still finishes.
func TestNoTxStoreAndFailingClock(t *testing.T) {
	st := plainStore{Store: sqliteStore(t), nowErr: errors.New("clock unreadable")}
	wf, err := dag.New("plain").Step("a", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })).Build()
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{level: slog.LevelWarn}
	env := enginetest.New(t, enginetest.Options{Store: st, Clock: engine.SystemClock, Workflows: []*dag.Workflow{wf},
		Configure: func(cfg *engine.Config) { cfg.Logger = slog.New(logs) }})
	if _, err := env.Engine.DB(); !errors.Is(err, engine.ErrNoTx) {
		t.Errorf("DB() = %v, want ErrNoTx", err)
	}
	if _, err := env.Engine.TriggerTx(context.Background(), nil, "plain", nil); !errors.Is(err, engine.ErrNoTx) {
		t.Errorf("TriggerTx = %v, want ErrNoTx", err)
	}
	page, err := env.Engine.Runs(context.Background(), engine.RunFilter{})
	if err != nil || len(page.Runs) != 0 {
		t.Errorf("runs after refused TriggerTx = %v, %v; want none", page.Runs, err)
	}
	id := env.Trigger(t, "plain", nil)
	env.AssertRun(t, env.WaitTimeout(t, id, 10*time.Second), persistence.RunSucceeded)
	if st := env.Engine.Stats(); st.ClockSkewed {
		t.Errorf("a node whose database clock cannot be read took itself for skewed")
	}
	if got := logs.matching("clock check"); len(got) == 0 || !strings.Contains(got[0], "clock unreadable") {
		t.Errorf("warnings = %q, want one naming the clock check's error", got)
	}
}

// TestMaxClockSkewValidated: a skew bound that would let two nodes take
// over a step whose lease was just extended is refused with a clear error.
func TestMaxClockSkewValidated(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	_, err := engine.New(engine.Config{Store: sqliteStore(t), Redis: rdb, Lease: 2 * time.Second, Heartbeat: time.Second,
		MaxClockSkew: 600 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "engine: Config.MaxClockSkew 600ms is too large") {
		t.Fatalf("New = %v, want an error naming MaxClockSkew", err)
	}
	if _, err := engine.New(engine.Config{Store: sqliteStore(t), Redis: rdb, Lease: 2 * time.Second, Heartbeat: time.Second}); err != nil {
		t.Fatalf("New with the default skew bound: %v", err)
	}
}

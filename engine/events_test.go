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

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
)

// eventWorkflows are subscribed to order.placed: ship when the total is
// at least 100, bill always, vip at 1000; audit is subscribed to nothing.
// calls counts each workflow's handler calls.
func eventWorkflows(t *testing.T, calls *sync.Map) []*dag.Workflow {
	t.Helper()
	h := func(wf string) steps.Handler {
		return steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			n, _ := calls.LoadOrStore(wf, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return sc.Input, nil
		})
	}
	var out []*dag.Workflow
	for _, d := range []struct {
		name string
		opts []dag.WorkflowOption
	}{
		{"ship", []dag.WorkflowOption{dag.OnEvent("order.placed", dag.Filter("event.total >= 100"))}},
		{"bill", []dag.WorkflowOption{dag.OnEvent("order.placed"), dag.OnEvent("order.retried")}},
		{"vip", []dag.WorkflowOption{dag.OnEvent("order.placed", dag.Filter("event.total >= 1000"))}},
		{"audit", nil},
	} {
		w, err := dag.New(d.name, d.opts...).Step("a", h(d.name)).Build()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	return out
}

func runsOf(t *testing.T, e *engine.Engine, workflow string) []persistence.Run {
	t.Helper()
	page, err := e.Runs(context.Background(), engine.RunFilter{Workflow: workflow})
	if err != nil {
		t.Fatal(err)
	}
	return page.Runs
}

func calledTimes(calls *sync.Map, wf string) int64 {
	n, ok := calls.Load(wf)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// TestPublishOncePerEvent: one order.placed event published 50 times
// concurrently from 3 nodes (one without the workflows' handlers, which
// knows the subscriptions from the stored definitions) starts exactly one
// run of each subscribed workflow whose filter matches, and none of the
// others; every call returns the same runs, one of them as created.
func TestPublishOncePerEvent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var calls sync.Map
		o := b.opts(t)
		o.Workflows = eventWorkflows(t, &calls)
		o.Clock = engine.SystemClock
		a := enginetest.New(t, o)
		o2 := enginetest.Options{Store: a.Store, Redis: a.Redis, Prefix: a.Prefix, Clock: engine.SystemClock, Workflows: eventWorkflows(t, &calls)}
		bNode := enginetest.New(t, o2)
		// A node without handlers, which runs no steps.
		cNode := enginetest.New(t, enginetest.Options{Store: a.Store, Redis: a.Redis, Prefix: a.Prefix, Clock: engine.SystemClock,
			Configure: func(cfg *engine.Config) { cfg.NoWorkers = true }})
		nodes := []*engine.Engine{a.Engine, bNode.Engine, cNode.Engine}

		const n = 50
		results := make([]engine.Published, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = nodes[i%3].Publish(context.Background(), "order.placed", map[string]any{"total": 150, "id": "A"},
					engine.EventID("order-A"))
			}()
		}
		close(start)
		wg.Wait()
		created := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Publish %d (node %d): %v", i, i%3, errs[i])
			}
			if results[i].Created {
				created++
			}
			if diff := cmp.Diff(results[0].Runs, results[i].Runs); diff != "" {
				t.Errorf("Publish %d returned other runs (-first +got):\n%s", i, diff)
			}
		}
		if created != 1 {
			t.Errorf("%d publications created the event, want 1", created)
		}
		var wfs []string
		for _, r := range results[0].Runs {
			wfs = append(wfs, r.Workflow)
			a.Wait(t, r.RunID)
		}
		if diff := cmp.Diff([]string{"bill", "ship"}, wfs); diff != "" {
			t.Errorf("workflows started (-want +got):\n%s", diff)
		}
		for wf, want := range map[string]int{"ship": 1, "bill": 1, "vip": 0, "audit": 0} {
			runs := runsOf(t, a.Engine, wf)
			if len(runs) != want {
				t.Errorf("workflow %s has %d runs, want %d", wf, len(runs), want)
			}
			if want == 1 {
				if runs[0].IdempotencyKey != engine.EventRunKey("order-A", wf) || string(runs[0].Input) != `{"id":"A","total":150}` {
					t.Errorf("run of %s: key %q input %s", wf, runs[0].IdempotencyKey, runs[0].Input)
				}
			}
			if got := calledTimes(&calls, wf); got != int64(want) {
				t.Errorf("workflow %s's handler ran %d times, want %d", wf, got, want)
			}
		}

		// A payload the filters do not pass starts only the unfiltered
		// workflow; one they fail on (a string total) starts it too, and
		// the filters' error is no match.
		for i, payload := range []string{`{"total": 5}`, `{"total": "lots"}`} {
			p, err := cNode.Engine.Publish(context.Background(), "order.placed", json.RawMessage(payload), engine.EventID(fmt.Sprintf("small-%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Runs) != 1 || p.Runs[0].Workflow != "bill" {
				t.Errorf("payload %s started %+v, want only bill", payload, p.Runs)
			}
		}
		// An event nobody subscribes to is stored, with no runs.
		p, err := a.Engine.Publish(context.Background(), "order.unknown", nil)
		if err != nil || len(p.Runs) != 0 || p.EventID == "" || !p.Created {
			t.Errorf("unsubscribed event: %+v, %v", p, err)
		}
		ev, err := a.Engine.Event(context.Background(), p.EventID)
		if err != nil || ev.Name != "order.unknown" || len(ev.Runs) != 0 {
			t.Errorf("Event(%s) = %+v, %v", p.EventID, ev, err)
		}
		// Without an id, each publication is a new event.
		p1, err1 := a.Engine.Publish(context.Background(), "order.retried", map[string]int{"total": 1})
		p2, err2 := a.Engine.Publish(context.Background(), "order.retried", map[string]int{"total": 1})
		if err1 != nil || err2 != nil || p1.EventID == p2.EventID || len(p1.Runs) != 1 || len(p2.Runs) != 1 || p1.Runs[0].RunID == p2.Runs[0].RunID {
			t.Errorf("two publications without an id: %+v %v, %+v %v; want two events, two runs", p1, err1, p2, err2)
		}
	})
}

// TestPublishRefusals: bad names, ids and payloads are refused with
// errors that name them; a repeated id with another payload or name is a
// conflict that leaves the stored event as it was.
func TestPublishRefusals(t *testing.T) {
	var calls sync.Map
	env := enginetest.New(t, enginetest.Options{Workflows: eventWorkflows(t, &calls)})
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		payload any
		opts    []engine.PublishOption
		want    error
		msg     string
	}{
		{"order placed", nil, nil, engine.ErrInvalidEvent, `event name "order placed"`},
		{"", nil, nil, engine.ErrInvalidEvent, `event name ""`},
		{"order.placed", nil, []engine.PublishOption{engine.EventID("has space")}, engine.ErrInvalidEvent, `id "has space"`},
		{"order.placed", []byte(`{"total":`), nil, engine.ErrInvalidInput, `event "order.placed": invalid payload`},
		{"order.placed", func() {}, nil, engine.ErrInvalidInput, `invalid payload`},
	} {
		_, err := env.Engine.Publish(ctx, c.name, c.payload, c.opts...)
		if !errors.Is(err, c.want) || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Publish(%q, %v) = %v; want %v mentioning %q", c.name, c.payload, err, c.want, c.msg)
		}
	}
	first, err := env.Engine.Publish(ctx, "order.placed", map[string]int{"total": 150}, engine.EventID("e1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := env.Engine.Publish(ctx, "order.placed", map[string]int{"total": 150}, engine.EventID("e1"))
	if err != nil || again.Created || !cmp.Equal(first.Runs, again.Runs) {
		t.Errorf("repeat = %+v, %v; want the first's runs", again, err)
	}
	spelled, err := env.Engine.Publish(ctx, "order.placed", json.RawMessage(` { "total" : 150 } `), engine.EventID("e1"))
	if err != nil || spelled.Created || !cmp.Equal(first.Runs, spelled.Runs) {
		t.Errorf("repeat spelled differently = %+v, %v; want the first's runs", spelled, err)
	}
	if _, err := env.Engine.Publish(ctx, "order.placed", map[string]int{"total": 999}, engine.EventID("e1")); !errors.Is(err, engine.ErrEventConflict) {
		t.Errorf("repeat with another payload: %v, want ErrEventConflict", err)
	}
	if _, err := env.Engine.Publish(ctx, "order.retried", map[string]int{"total": 150}, engine.EventID("e1")); !errors.Is(err, engine.ErrEventConflict) {
		t.Errorf("repeat with another name: %v, want ErrEventConflict", err)
	}
	if n := len(runsOf(t, env.Engine, "bill")); n != 1 {
		t.Errorf("bill has %d runs after the conflicts, want 1", n)
	}
	if _, err := env.Engine.Event(ctx, "nope"); !errors.Is(err, persistence.ErrEventNotFound) {
		t.Errorf("Event(unknown) = %v, want ErrEventNotFound", err)
	}
}

// TestPublishTx: an event published in a transaction that rolls back
// leaves no event and no run; a committed one starts its runs promptly,
// with no Dispatch call and the reconciler off (the outbox loop).
func TestPublishTx(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var calls sync.Map
		o := b.opts(t)
		o.Workflows = eventWorkflows(t, &calls)
		o.Clock = engine.SystemClock
		o.Configure = func(cfg *engine.Config) { cfg.ReconcileInterval = -1 }
		env := enginetest.New(t, o)
		ctx := context.Background()
		db, err := env.Engine.DB()
		if err != nil {
			t.Fatal(err)
		}
		publish := func(id string, commit bool) (engine.Published, time.Time) {
			t.Helper()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := env.Engine.PublishTx(ctx, tx, "order.placed", map[string]int{"total": 150}, engine.EventID(id))
			if err != nil {
				t.Fatalf("PublishTx: %v", err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			return p, time.Now()
		}
		gone, _ := publish("rolled-back", false)
		if len(gone.Runs) != 2 {
			t.Fatalf("PublishTx returned %+v, want two runs", gone)
		}
		if _, err := env.Engine.Event(ctx, "rolled-back"); !errors.Is(err, persistence.ErrEventNotFound) {
			t.Errorf("rolled-back event: %v, want ErrEventNotFound", err)
		}
		for _, r := range gone.Runs {
			if _, err := env.Engine.Get(ctx, r.RunID); !errors.Is(err, persistence.ErrRunNotFound) {
				t.Errorf("rolled-back event's run %s: %v, want ErrRunNotFound", r.Workflow, err)
			}
		}

		p, committed := publish("committed", true)
		for _, r := range p.Runs {
			info := env.WaitTimeout(t, r.RunID, 5*time.Second)
			env.AssertRun(t, info, persistence.RunSucceeded)
			waited := info.Attempts[0].StartedAt.Sub(committed)
			t.Logf("run of %s started %v after the commit", r.Workflow, waited)
			if waited > time.Second {
				t.Errorf("run of %s started %v after the commit, want promptly", r.Workflow, waited)
			}
		}
		waitDispatched(t, env.Engine, "committed")
		for _, wf := range []string{"ship", "bill"} {
			if got := calledTimes(&calls, wf); got != 1 {
				t.Errorf("%s ran %d times, want 1", wf, got)
			}
		}
	})
}

func waitDispatched(t *testing.T, e *engine.Engine, id string) engine.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev, err := e.Event(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.DispatchedAt != nil {
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s not marked dispatched", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPublishTxCrashBeforeDispatch: a node commits a PublishTx and dies
// before anything dispatched it (no outbox loop, no reconciler, no
// workers); another node's reconciler, with its own outbox loop off,
// starts the runs and marks the event dispatched.
func TestPublishTxCrashBeforeDispatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var calls sync.Map
		o := b.opts(t)
		o.Workflows = eventWorkflows(t, &calls)
		o.Clock = engine.SystemClock
		o.Configure = func(cfg *engine.Config) {
			cfg.ReconcileInterval, cfg.OutboxInterval, cfg.NoWorkers = -1, -1, true
		}
		dying := enginetest.New(t, o)
		ctx := context.Background()
		db, err := dying.Engine.DB()
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := dying.Engine.PublishTx(ctx, tx, "order.placed", map[string]int{"total": 150}, engine.EventID("crash"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := dying.Engine.Stop(stopCtx); err != nil {
			t.Fatal(err)
		}
		if ev, err := dying.Store.EventGet(ctx, "crash"); err != nil || ev.DispatchedAt != nil {
			t.Fatalf("before the second node: %+v, %v; want a pending event", ev, err)
		}

		other := enginetest.New(t, enginetest.Options{Store: dying.Store, Redis: dying.Redis, Prefix: dying.Prefix + "-2",
			Clock: engine.SystemClock, Workflows: eventWorkflows(t, &calls),
			Configure: func(cfg *engine.Config) { cfg.OutboxInterval = -1; cfg.ReconcileInterval = 100 * time.Millisecond }})
		for _, r := range p.Runs {
			other.AssertRun(t, other.WaitTimeout(t, r.RunID, 10*time.Second), persistence.RunSucceeded)
		}
		waitDispatched(t, other.Engine, "crash")
		for _, wf := range []string{"ship", "bill"} {
			if got := calledTimes(&calls, wf); got != 1 {
				t.Errorf("%s ran %d times, want 1", wf, got)
			}
		}
	})
}

// TestPublishTxWaitersAfterRollback: a transaction holds an event id
// (PublishTx, uncommitted), three others publish the same id in their own
// transactions and wait on it; the holder rolls back. All three must
// succeed (no deadlock, which would roll back the application's whole
// transaction) and exactly one of them creates the event, whose runs the
// other two get.
func TestPublishTxWaitersAfterRollback(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var calls sync.Map
		o := b.opts(t)
		o.Workflows = eventWorkflows(t, &calls)
		o.Clock = engine.SystemClock
		o.Configure = func(cfg *engine.Config) { cfg.ReconcileInterval, cfg.OutboxInterval = -1, -1 }
		env := enginetest.New(t, o)
		ctx := context.Background()
		db, err := env.Engine.DB()
		if err != nil {
			t.Fatal(err)
		}
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Engine.PublishTx(ctx, holder, "order.placed", map[string]int{"total": 150}, engine.EventID("X")); err != nil {
			t.Fatal(err)
		}
		got := make([]engine.Published, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					errs[i] = err
					return
				}
				got[i], err = env.Engine.PublishTx(ctx, tx, "order.placed", map[string]int{"total": 150}, engine.EventID("X"))
				if err != nil {
					errs[i] = fmt.Errorf("PublishTx: %w", err)
					_ = tx.Rollback()
					return
				}
				errs[i] = tx.Commit()
			}()
		}
		time.Sleep(300 * time.Millisecond) // the waiters block on the holder's key
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		created := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("waiter %d: %v", i, err)
			}
			if got[i].Created {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("%d waiters created the event, want exactly 1: %+v", created, got)
		}
		for i := range got {
			if diff := cmp.Diff(got[0].RunIDs(), got[i].RunIDs()); diff != "" || len(got[i].Runs) == 0 {
				t.Errorf("waiter %d's runs differ from waiter 0's (-0 +%d):\n%s", i, i, diff)
			}
		}
		ev, err := env.Engine.Event(ctx, "X")
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Runs) != len(got[0].Runs) {
			t.Errorf("stored event has %d runs, want %d", len(ev.Runs), len(got[0].Runs))
		}
	})
}

// TestOutboxLeavesOtherApplicationsEvents: two applications share one
// database, each with its own Redis prefix and workflows. App A's outbox
// pass must neither dispatch app B's committed event into A's queues nor
// mark it dispatched; B's own pass then dispatches it and its runs finish.
func TestOutboxLeavesOtherApplicationsEvents(t *testing.T) {
	var calls sync.Map
	all := eventWorkflows(t, &calls)
	quiet := func(cfg *engine.Config) { cfg.OutboxInterval, cfg.ReconcileInterval = -1, -1 }
	b := enginetest.New(t, enginetest.Options{Workflows: all[:2], Clock: engine.SystemClock, Configure: quiet})               // ship, bill
	a := enginetest.New(t, enginetest.Options{Store: b.Store, Redis: b.Redis, Prefix: b.Prefix + "-appA", Workflows: all[3:], // audit
		Clock: engine.SystemClock, Configure: quiet})
	ctx := context.Background()
	db, err := b.Engine.DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Engine.PublishTx(ctx, tx, "order.placed", map[string]int{"total": 150}, engine.EventID("B1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != 2 {
		t.Fatalf("B's event started %d runs, want 2 (ship, bill): %+v", len(p.Runs), p.Runs)
	}
	if _, err := a.Engine.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	ev, err := b.Engine.Event(ctx, "B1")
	if err != nil {
		t.Fatal(err)
	}
	if ev.DispatchedAt != nil {
		t.Fatalf("app A's pass marked app B's event dispatched at %v", ev.DispatchedAt)
	}
	keys, err := b.Redis.Keys(ctx, a.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		for _, r := range p.Runs {
			if strings.Contains(k, r.RunID) {
				t.Errorf("app A's keys name B's run %s: %s", r.RunID, k)
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := calledTimes(&calls, "ship") + calledTimes(&calls, "bill"); n != 0 {
		t.Fatalf("B's handlers ran %d times before B dispatched", n)
	}
	if _, err := b.Engine.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Runs {
		if info := b.Wait(t, r.RunID); info.Run.Status != persistence.RunSucceeded {
			t.Errorf("run %s of %s: %s, want succeeded", r.RunID, r.Workflow, info.Run.Status)
		}
	}
	if ev, err = b.Engine.Event(ctx, "B1"); err != nil || ev.DispatchedAt == nil {
		t.Fatalf("after B's pass: dispatched at %v, %v; want set", ev.DispatchedAt, err)
	}
}

// TestTriggerRefusesEventKeys: a user's idempotency key can never be an
// event run's (EventRunKey), by Trigger or TriggerTx; nothing is created.
func TestTriggerRefusesEventKeys(t *testing.T) {
	var calls sync.Map
	env := enginetest.New(t, enginetest.Options{Workflows: eventWorkflows(t, &calls)})
	ctx := context.Background()
	key := engine.EventRunKey("E", "bill")
	if _, err := env.Engine.Trigger(ctx, "bill", map[string]int{"total": 5}, engine.IdempotencyKey(key)); !errors.Is(err, engine.ErrReservedKey) {
		t.Fatalf("Trigger with key %q: %v, want ErrReservedKey", key, err)
	}
	db, err := env.Engine.DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.TriggerTx(ctx, tx, "bill", nil, engine.IdempotencyKey("event:x")); !errors.Is(err, engine.ErrReservedKey) {
		t.Fatalf("TriggerTx with key event:x: %v, want ErrReservedKey", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if runs := runsOf(t, env.Engine, "bill"); len(runs) != 0 {
		t.Fatalf("refused triggers created %d runs", len(runs))
	}
	p, err := env.Engine.Publish(ctx, "order.placed", map[string]int{"total": 5}, engine.EventID("E"))
	if err != nil || len(p.Runs) != 1 || p.Runs[0].Workflow != "bill" {
		t.Fatalf("Publish after the refused triggers: %+v, %v; want one bill run", p, err)
	}
	if _, err := env.Engine.Trigger(ctx, "bill", map[string]int{"total": 5}, engine.IdempotencyKey("order-event:1")); err != nil {
		t.Fatalf("a key merely containing event: is the user's: %v", err)
	}
}

// TestPublishTxOnMemorySQLite: on an in-memory SQLite store (one
// connection, which the caller's transaction holds) PublishTx finds its
// subscribers without reading the store, so it returns instead of
// waiting for the connection, and the committed event's runs finish.
func TestPublishTxOnMemorySQLite(t *testing.T) {
	var calls sync.Map
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: ":memory:", AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	env := enginetest.New(t, enginetest.Options{Store: st, Workflows: eventWorkflows(t, &calls), Clock: engine.SystemClock})
	ctx := context.Background()
	db, err := env.Engine.DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := env.Engine.PublishTx(tctx, tx, "order.placed", map[string]int{"total": 150}, engine.EventID("M1"))
	if err != nil {
		_ = tx.Rollback()
		t.Fatalf("PublishTx on :memory:: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var wfs []string
	for _, r := range p.Runs {
		wfs = append(wfs, r.Workflow)
		if info := env.Wait(t, r.RunID); info.Run.Status != persistence.RunSucceeded {
			t.Errorf("run of %s: %s, want succeeded", r.Workflow, info.Run.Status)
		}
	}
	if diff := cmp.Diff([]string{"bill", "ship"}, wfs); diff != "" {
		t.Fatalf("runs (-want +got):\n%s", diff)
	}
}

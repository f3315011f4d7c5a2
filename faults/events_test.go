package faults

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// TestEventsExactlyOnce: events published many times at once from two
// nodes, and events whose publishing node dies right after its
// application's transaction committed (PublishTx, before anything
// dispatched them), while a worker is SIGKILLed: every event starts
// exactly one run of its workflow, every run finishes, no step succeeds
// twice and no effect is made twice (checkInvariants), and every event
// ends up marked dispatched.
func TestEventsExactlyOnce(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	ws := c.start(2, nil)
	c.setRespawn(true)
	ctx := context.Background()
	wfs, err := workflows(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The publisher that dies: it neither polls its outbox nor
	// reconciles, so only the workers' reconcilers can start what it
	// committed.
	dying, err := engine.New(engine.Config{Store: c.store, Redis: c.rdb, Prefix: c.prefix, NoWorkers: true,
		ReconcileInterval: -1, OutboxInterval: -1, ScheduleInterval: -1,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := dying.Register(wfs...); err != nil {
		t.Fatal(err)
	}
	if err := dying.Start(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := []*engine.Engine{c.eng, dying}

	const events, repeats = 20, 6
	var mu sync.Mutex
	runsOf := map[string]map[string]bool{} // event -> run ids seen
	var wg sync.WaitGroup
	for i := range events {
		for r := range repeats {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("ev-%d", i)
				p, err := nodes[r%2].Publish(ctx, evOrder, plan{N: i, SleepMS: map[string]int{"e1": 30}}, engine.EventID(id))
				if err != nil {
					t.Errorf("publish %s: %v", id, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if runsOf[id] == nil {
					runsOf[id] = map[string]bool{}
				}
				for _, run := range p.Runs {
					runsOf[id][run.RunID] = true
				}
			}()
		}
	}
	wg.Wait()
	// Committed in the application's transaction, then the node dies.
	db, err := dying.DB()
	if err != nil {
		t.Fatal(err)
	}
	for i := range events {
		id := fmt.Sprintf("tx-%d", i)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := dying.PublishTx(ctx, tx, evOrder, plan{N: events + i}, engine.EventID(id))
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		runsOf[id] = map[string]bool{}
		for _, run := range p.Runs {
			runsOf[id][run.RunID] = true
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	dying.Stop(sctx)
	cancel()
	ws[0].kill(t)
	killed := time.Now()

	var ids []string
	for ev, runs := range runsOf {
		if len(runs) != 1 {
			t.Errorf("event %s answered %d different runs, want 1", ev, len(runs))
		}
		for id := range runs {
			ids = append(ids, id)
		}
	}
	runs := checkInvariants(t, c, ids, 60*time.Second)
	logRecovery(t, fmt.Sprintf("%d events (%d published %d times from 2 nodes, %d committed by a node that died), a worker killed -> all runs finished",
		2*events, events, repeats, events), time.Since(killed))
	assertAllSucceeded(t, runs)
	page, err := c.store.RunList(ctx, persistence.RunListParams{Workflow: wfEvented, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 2*events {
		t.Errorf("%d runs of %s, want one per event (%d)", len(page.Runs), wfEvented, 2*events)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pending, err := c.store.EventListPending(ctx, persistence.EventListPendingParams{Before: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events still not marked dispatched, e.g. %s", len(pending), pending[0].ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

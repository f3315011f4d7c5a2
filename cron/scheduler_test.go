package cron_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/internal/clocktest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

// storeStarter creates runs directly in the store, as the engine's Trigger
// does; crash makes it fail right after the run is created, like a node
// that dies between starting a tick's run and moving the cursor.
type storeStarter struct {
	st    persistence.Store
	clock *clocktest.Clock
	crash bool
}

func (s *storeStarter) CanStart(string) bool { return true }

func (s *storeStarter) Start(ctx context.Context, r cron.StartRequest) (string, error) {
	tick := r.Tick
	res, err := s.st.RunCreate(ctx, persistence.RunCreateParams{
		ID: uuid.Must(uuid.NewV7()).String(), Workflow: r.Workflow, Input: r.Input, IdempotencyKey: r.IdempotencyKey,
		Schedule: r.Schedule, ScheduledTick: &tick, Now: s.clock.Now(),
		Steps: []persistence.StepSpec{{Name: "only", Queue: "default", MaxAttempts: 1}},
	})
	if err != nil {
		return "", err
	}
	if s.crash {
		return "", errors.New("node died")
	}
	return res.Run.ID, nil
}

func newStore(t *testing.T) persistence.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "cron.db"), AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newScheduler(t *testing.T, st persistence.Store, starter cron.Starter, clock cron.Clock) *cron.Scheduler {
	t.Helper()
	s, err := cron.New(cron.Config{Store: st, Starter: starter, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runsOf(t *testing.T, st persistence.Store, name string) []persistence.Run {
	t.Helper()
	page, err := st.RunList(context.Background(), persistence.RunListParams{Schedule: name, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return page.Runs
}

var base = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// A node that dies after starting a tick's run and before moving the
// cursor loses no tick, and the retry by another node starts nothing new.
func TestCrashBetweenStartAndAdvance(t *testing.T) {
	st := newStore(t)
	clock := clocktest.New(base)
	ctx := context.Background()
	dying := newScheduler(t, st, &storeStarter{st: st, clock: clock, crash: true}, clock)
	healthy := newScheduler(t, st, &storeStarter{st: st, clock: clock}, clock)
	if err := healthy.Sync(ctx, []persistence.Schedule{{Name: "s", Spec: "@every 1s", Workflow: "w"}}); err != nil {
		t.Fatal(err)
	}
	clock.Set(base.Add(time.Second))
	if _, err := dying.Pass(ctx); err == nil {
		t.Fatal("dying node's pass: no error")
	}
	if sc, _ := st.ScheduleGet(ctx, "s"); sc.LastTick != nil {
		t.Fatalf("cursor moved to %v by a node that died before advancing", sc.LastTick)
	}
	res, err := healthy.Pass(ctx)
	if err != nil || res.Fired != 1 {
		t.Fatalf("healthy pass: %+v, %v", res, err)
	}
	runs := runsOf(t, st, "s")
	if len(runs) != 1 || !runs[0].ScheduledTick.Equal(base.Add(time.Second)) {
		t.Fatalf("runs %v, want one for tick 1", runs)
	}
	if sc, _ := st.ScheduleGet(ctx, "s"); sc.LastTick == nil || !sc.LastTick.Equal(base.Add(time.Second)) {
		t.Fatalf("cursor %v, want tick 1", sc.LastTick)
	}
}

// Many schedulers passing at once over the same ticks start one run each.
func TestConcurrentPasses(t *testing.T) {
	st := newStore(t)
	clock := clocktest.New(base)
	ctx := context.Background()
	var nodes []*cron.Scheduler
	for range 5 {
		nodes = append(nodes, newScheduler(t, st, &storeStarter{st: st, clock: clock}, clock))
	}
	if err := nodes[0].Sync(ctx, []persistence.Schedule{{Name: "s", Spec: "* * * * * *", Workflow: "w", Input: []byte(`{"a":1}`)}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 30; i++ {
		clock.Set(base.Add(time.Duration(i) * time.Second))
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				if _, err := n.Pass(ctx); err != nil {
					t.Errorf("pass: %v", err)
				}
			})
		}
		wg.Wait()
	}
	runs := runsOf(t, st, "s")
	seen := map[string]bool{}
	for _, r := range runs {
		k := fmt.Sprint(r.ScheduledTick.Unix())
		if seen[k] {
			t.Errorf("two runs for tick %s", k)
		}
		seen[k] = true
	}
	if len(runs) != 30 {
		t.Errorf("got %d runs, want 30", len(runs))
	}
}

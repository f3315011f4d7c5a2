package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// timedCreate stands in for run creation: each call takes a millisecond,
// like a durable commit, and creates nothing.
type timedCreate struct{ persistence.Store }

func (timedCreate) RunCreateMany(ctx context.Context, p persistence.RunCreateManyParams) ([]persistence.RunCreateOutcome, error) {
	time.Sleep(time.Millisecond)
	outs := make([]persistence.RunCreateOutcome, len(p.Items))
	for i, it := range p.Items {
		outs[i].Result = persistence.RunCreateResult{Run: persistence.Run{ID: it.ID}, Created: true}
	}
	return outs, nil
}

// TestSteadyTriggersShareTransactions: Trigger calls arriving one per
// 0.7 ms (faster than two per createLinger) share run-creation
// transactions: each waits for the calls arriving until 2 ms after the
// previous transaction ended. Without the wait a transaction of 1 ms
// carries about two (2.0 to 2.1 in three runs under -race; 5.4 to 5.7
// with it).
func TestSteadyTriggersShareTransactions(t *testing.T) {
	// No workers, and creations that store nothing: only the trigger loop
	// and its transactions' timing are under test.
	env := enginetest.New(t, enginetest.Options{Store: timedCreate{sqliteStore(t)}, Clock: engine.SystemClock,
		Workflows: []*dag.Workflow{orderWorkflow(t, &recorder{}, "order", 0, nil, false, nil)},
		Configure: func(c *engine.Config) { c.NoWorkers = true }})
	const n = 300
	ids := make([]string, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range ids {
		if d := time.Until(start.Add(time.Duration(i) * 700 * time.Microsecond)); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = env.Trigger(t, "order", map[string]int{"i": i})
		}()
	}
	wg.Wait()
	st := env.Engine.Stats()
	if st.CreateItems != n {
		t.Fatalf("CreateItems = %d, want %d", st.CreateItems, n)
	}
	per := float64(st.CreateItems) / float64(st.CreateBatches)
	t.Logf("%d runs in %d creation transactions (%.1f each) over %v", st.CreateItems, st.CreateBatches, per, time.Since(start))
	if per < 3 {
		t.Errorf("%.1f runs per creation transaction, want at least 3 for calls one per 0.7 ms", per)
	}
}

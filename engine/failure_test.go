package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/queue"
)

// A task id the engine cannot parse (someone else's, or corrupt) is
// dropped from Redis, and the workers go on.
func TestMalformedTaskIsDropped(t *testing.T) {
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}})
	ctx := context.Background()
	if _, err := env.Engine.Queue().Enqueue(ctx, "default", queue.Item{ID: "not-a-task"}, queue.Item{ID: "x/y/zero"}); err != nil {
		t.Fatal(err)
	}
	env.AssertRun(t, env.Wait(t, env.Trigger(t, "order", nil)), persistence.RunSucceeded)
	testenv.Eventually(t, 5*time.Second, func() bool {
		st, err := env.Engine.Queue().Stats(ctx, "default")
		return err == nil && st == (queue.Stats{})
	}, "malformed tasks left in Redis")
}

// hangingStore makes RunCreateMany wait until release is closed: a
// database that stopped answering.
type hangingStore struct {
	persistence.Store
	release chan struct{}
}

func (h *hangingStore) RunCreateMany(ctx context.Context, ps persistence.RunCreateManyParams) ([]persistence.RunCreateOutcome, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Store.RunCreateMany(ctx, ps)
}

// Trigger returns when its context ends even if the store does not
// answer; once the store answers again, triggers work.
func TestTriggerHonoursContextWhenStoreHangs(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: t.TempDir() + "/hang.db", AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hs := &hangingStore{Store: st, release: make(chan struct{})}
	r := &recorder{}
	env := enginetest.New(t, enginetest.Options{Store: hs, Workflows: []*dag.Workflow{orderWorkflow(t, r, "order", 0, nil, false, nil)}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := env.Engine.Trigger(ctx, "order", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Trigger on a hung store: err = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Trigger took %v to give up", took)
	}
	close(hs.release)
	id, err := env.Engine.Trigger(context.Background(), "order", nil, engine.IdempotencyKey("after"))
	if err != nil {
		t.Fatalf("Trigger after the store recovered: %v", err)
	}
	env.AssertRun(t, env.Wait(t, id), persistence.RunSucceeded)
}

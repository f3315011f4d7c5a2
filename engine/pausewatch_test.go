package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// TestPauseQueueHoldsTheNextTrigger: once PauseQueue returns, a run
// triggered on the same node does not start, even while the node's
// paused-queue watch (which reads Redis) runs at that moment: a watch
// pass that read Redis before the pause reached it must not undo the
// node's own record of the pause, or the claim at create runs the step.
func TestPauseQueueHoldsTheNextTrigger(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		wf := oneStep(t, "held", "work", steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			return nil, nil
		}))
		o := b.opts(t)
		o.Clock = engine.SystemClock
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a watch pass at every moment
			defer wg.Done()
			for ctx.Err() == nil {
				env.Engine.WatchPausedQueues(ctx)
			}
		}()
		defer func() { cancel(); wg.Wait() }()
		for i := 0; i < 30; i++ {
			if err := env.Engine.PauseQueue(ctx, dag.DefaultQueueName); err != nil {
				t.Fatal(err)
			}
			id := env.Trigger(t, "held", map[string]any{})
			if s := mustGet(t, env.Engine, id).Steps[0]; s.Status != persistence.StepQueued {
				t.Fatalf("round %d: the step of a run triggered after its queue was paused is %s, want queued", i, s.Status)
			}
			if err := env.Engine.ResumeQueue(ctx, dag.DefaultQueueName); err != nil {
				t.Fatal(err)
			}
			env.Wait(t, id)
		}
	})
}

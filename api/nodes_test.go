package api_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine/enginetest"
)

// TestTriggerOnANodeWithoutHandlers: the API of a node with no workers
// and no handlers lists order from the stored definition and starts runs
// of it; a worker on another node runs them.
func TestTriggerOnANodeWithoutHandlers(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{orderWorkflow(t, new(atomic.Bool))}
		worker := enginetest.New(t, o)
		front := newAPIEnv(t, b, envOptions{peer: worker})
		if front.Engine.Workflow("order") != nil {
			t.Fatal("the front node has the order workflow's handlers")
		}
		ctx := context.Background()
		wfs, err := front.anon.ListWorkflows(ctx)
		if err != nil || len(wfs) != 1 || wfs[0].Name != "order" || wfs[0].Handlers {
			t.Fatalf("workflows on the front node = %+v, %v; want order, without handlers", wfs, err)
		}
		d, err := front.anon.GetWorkflow(ctx, "order")
		if err != nil || len(d.Graph.Nodes) != 3 {
			t.Fatalf("order on the front node = %+v, %v", d, err)
		}
		run, created, err := front.anon.Trigger(ctx, "order", client.TriggerRequest{Input: json.RawMessage(`{"order_id":"o-9"}`), IdempotencyKey: "o-9"})
		if err != nil || !created {
			t.Fatalf("trigger on the front node: %v", err)
		}
		if run.Definition != wfs[0].Version {
			t.Fatalf("run's definition %q, want %q", run.Definition, wfs[0].Version)
		}
		info := worker.Wait(t, run.ID)
		worker.AssertRun(t, info, "succeeded")
		got := front.waitStatus(t, run.ID, "succeeded")
		if string(got.Run.Input) != `{"order_id":"o-9"}` {
			t.Fatalf("run %+v", got.Run)
		}
	})
}

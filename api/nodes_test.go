package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/steps"
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

// TestTwoVersions: a node registering order with a step added stores a
// second version; the API shows both, the newest first, and a run keeps
// the version it started on.
func TestTwoVersions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		o := b.opts(t)
		v1 := orderWorkflow(t, new(atomic.Bool))
		o.Workflows = []*dag.Workflow{v1}
		worker := enginetest.New(t, o)
		ctx := context.Background()
		id := worker.Trigger(t, "order", map[string]string{"order_id": "o-1"})
		worker.AssertRun(t, worker.Wait(t, id), "succeeded")

		h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
		v2, err := dag.New("order").
			Step("reserve", h).
			Step("charge", h, dag.After("reserve")).
			Step("ship", h, dag.After("charge"), dag.Queue("shipping")).
			Step("notify", h, dag.After("ship")).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		worker.Clock.Advance(time.Second)
		front := newAPIEnv(t, b, envOptions{peer: worker, workflows: []*dag.Workflow{v2}})
		d, err := front.anon.GetWorkflow(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		h1, h2 := v1.Definition().Hash(), v2.Definition().Hash()
		if d.Version != h2 || !d.Handlers || len(d.Graph.Nodes) != 4 || len(d.Versions) != 2 ||
			d.Versions[0].Version != h2 || d.Versions[1].Version != h1 || d.Versions[1].Handlers {
			t.Fatalf("order = version %s handlers %v, %d nodes, versions %+v; want %s (here) then %s", d.Version, d.Handlers, len(d.Graph.Nodes), d.Versions, h2, h1)
		}
		run, err := front.anon.GetRun(ctx, id)
		if err != nil || run.Run.Definition != h1 || len(run.Steps) != 3 {
			t.Fatalf("the v1 run = %+v (%d steps), %v; want definition %s and 3 steps", run.Run, len(run.Steps), err, h1)
		}
	})
}

// TestQueuesOfEveryVersion: /v1/queues lists the queues of every stored
// version of a workflow (runs of an old version may still wait in them)
// and those a live node's workers take steps from, not only the current
// definitions' queues.
func TestQueuesOfEveryVersion(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{orderWorkflow(t, new(atomic.Bool))}
		o.Configure = func(c *engine.Config) { c.Queues = []string{"default", "shipping", "bulk"} }
		worker := enginetest.New(t, o)
		ctx := context.Background()

		h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
		v2, err := dag.New("order").
			Step("reserve", h).
			Step("charge", h, dag.After("reserve")).
			Step("ship", h, dag.After("charge"), dag.Queue("express")).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		worker.Clock.Advance(time.Second)
		front := newAPIEnv(t, b, envOptions{peer: worker, workflows: []*dag.Workflow{v2}})
		var names []string
		testenv.Eventually(t, 10*time.Second, func() bool {
			qs, err := front.anon.ListQueues(ctx)
			if err != nil {
				t.Fatal(err)
			}
			names = names[:0]
			for _, q := range qs {
				names = append(names, q.Name)
			}
			return strings.Join(names, ",") == "bulk,default,express,shipping"
		}, "queues %v, want bulk (a node's), default, express (v2's) and shipping (v1's)", &names)
	})
}

package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// partitionedStore is a node's store that, once cut, refuses the node's
// heartbeats (the registry's and its leases'): a node paused or cut off
// while its handler still runs. Everything else goes through, so that
// its late outcome reaches the store and must be refused there.
type partitionedStore struct {
	persistence.Store
	cut atomic.Bool
}

var errPartitioned = errors.New("test: node cut off from the store")

// partitioned returns options for a node of b, on the real clock, running
// wf on a partitionedStore over b's store (base), for the other nodes.
func partitioned(t *testing.T, b backend, wf *dag.Workflow) (o enginetest.Options, base persistence.Store, ps *partitionedStore) {
	t.Helper()
	o = b.opts(t)
	base = o.Store
	if base == nil {
		base = sqliteStore(t)
	}
	ps = &partitionedStore{Store: base}
	o.Store, o.Clock, o.Workflows = ps, engine.SystemClock, []*dag.Workflow{wf}
	return o, base, ps
}

func (s *partitionedStore) NodeHeartbeat(ctx context.Context, n persistence.Node) error {
	if s.cut.Load() {
		return errPartitioned
	}
	return s.Store.NodeHeartbeat(ctx, n)
}

func (s *partitionedStore) StepHeartbeat(ctx context.Context, p persistence.StepHeartbeatParams) error {
	if s.cut.Load() {
		return errPartitioned
	}
	return s.Store.StepHeartbeat(ctx, p)
}

// The node registry's acceptance: three nodes heartbeat; the one running
// a step under a 60s lease stops heartbeating (its handler still blocked)
// and, with a node timeout of 5s, another node takes the step over within
// about that (not when the lease expires), and the first node's late
// completion is refused by the fence.
func TestDeadNodeStepsTakenOverAtNodeTimeout(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const nodeTimeout = 5 * time.Second
		started := make(chan int, 8)
		gate := make(chan struct{})
		wf := oneStep(t, "takeover", "slow", steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			started <- sc.Attempt
			if sc.Attempt == 1 {
				<-gate // the presumed-dead node's handler, which ignores its context
			}
			return json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, sc.Attempt)), nil
		}))
		o, base, ps := partitioned(t, b, wf)
		timing := func(c *engine.Config, id string) {
			c.NodeID, c.Lease, c.Heartbeat = id, time.Minute, 20*time.Second
			c.NodeHeartbeat, c.NodeTimeout = 500*time.Millisecond, nodeTimeout
			c.StopGrace = -1
		}
		o.Configure = func(c *engine.Config) { timing(c, "victim") }
		victim := enginetest.New(t, o)
		defer close(gate)
		id := victim.Trigger(t, "takeover", nil)
		select {
		case a := <-started:
			if a != 1 {
				t.Fatalf("first attempt is %d", a)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the step never started on the victim")
		}
		// Two more nodes join once the victim holds the step.
		for _, name := range []string{"rescuer-1", "rescuer-2"} {
			ro := o
			ro.Store, ro.Redis, ro.Prefix = base, victim.Redis, victim.Prefix
			ro.Configure = func(c *engine.Config) { timing(c, name) }
			enginetest.New(t, ro)
		}
		ctx := context.Background()
		testenv.Eventually(t, 10*time.Second, func() bool {
			nodes, err := victim.Engine.Nodes(ctx)
			return err == nil && len(nodes) == 3
		}, "three nodes never heartbeated")

		ps.cut.Store(true)
		cutAt := time.Now()
		select {
		case a := <-started:
			took := time.Since(cutAt)
			t.Logf("%s: step taken over by attempt %d %v after the victim's last heartbeat (node timeout %v, lease %v)",
				b.name, a, took.Round(10*time.Millisecond), nodeTimeout, time.Minute)
			if a != 2 || took < nodeTimeout-time.Second || took > nodeTimeout+5*time.Second {
				t.Errorf("attempt %d took the step over %v after the cut; want attempt 2 about %v after", a, took, nodeTimeout)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the step was not taken over within 30s of the victim's last heartbeat (its lease is 60s)")
		}
		info := victim.Wait(t, id)
		victim.AssertRun(t, info, persistence.RunSucceeded)
		if s, _ := info.Step("slow"); string(s.Output) != `{"attempt":2}` {
			t.Errorf("output %s; want the rescuer's", s.Output)
		}

		nodes, err := victim.Engine.AllNodes(ctx)
		if v, ok := nodeOf(nodes, "victim"); err != nil || !ok || v.Alive {
			t.Errorf("victim in the registry: %+v, %v; want listed dead", v, err)
		}
		// The victim wakes up: its completion is refused.
		gate <- struct{}{}
		testenv.Eventually(t, 10*time.Second, func() bool {
			return victim.Engine.Stats().StaleCompletions == 1
		}, "the victim's late completion was not refused: %+v", victim.Engine.Stats())
		info = victim.Wait(t, id)
		if s, _ := info.Step("slow"); string(s.Output) != `{"attempt":2}` {
			t.Errorf("after the victim's late completion the output is %s; want the rescuer's", s.Output)
		}
	})
}

// A node whose registry heartbeats fail claims nothing once the other
// nodes are about to presume it dead: a step it claimed then would be
// released by them and run twice (seen on a loaded machine: the cut-off
// node of TestDeadNodeStepsTakenOverAtNodeTimeout claimed the step the
// others had just released for takeover, and they released it again). It
// claims again once a heartbeat is recorded.
func TestNodeCutOffFromRegistryClaimsNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const heartbeat, nodeTimeout = 200 * time.Millisecond, 2 * time.Second
		started := make(chan string, 8)
		wf := oneStep(t, "cut", "only", steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
			started <- sc.RunID
			return json.RawMessage(`{}`), nil
		}))
		o, _, ps := partitioned(t, b, wf)
		o.Configure = func(c *engine.Config) {
			c.NodeHeartbeat, c.NodeTimeout = heartbeat, nodeTimeout
		}
		env := enginetest.New(t, o)
		env.Wait(t, env.Trigger(t, "cut", nil))
		<-started

		ps.cut.Store(true)
		// Past NodeTimeout less one heartbeat, with a heartbeat's margin
		// for the loop's tick.
		time.Sleep(nodeTimeout)
		id := env.Trigger(t, "cut", nil)
		select {
		case got := <-started:
			t.Fatalf("run %s started on a node whose heartbeats have failed for %v (node timeout %v)", got, nodeTimeout, nodeTimeout)
		case <-time.After(2 * heartbeat):
		}

		ps.cut.Store(false)
		select {
		case got := <-started:
			if got != id {
				t.Fatalf("started run %s, want %s", got, id)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the node did not claim again within 10s of its heartbeat being recorded")
		}
		env.AssertRun(t, env.Wait(t, id), persistence.RunSucceeded)
	})
}

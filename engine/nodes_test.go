package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// nodeOf returns the node with id among nodes.
func nodeOf(nodes []engine.NodeInfo, id string) (engine.NodeInfo, bool) {
	i := slices.IndexFunc(nodes, func(n engine.NodeInfo) bool { return n.ID == id })
	if i < 0 {
		return engine.NodeInfo{}, false
	}
	return nodes[i], true
}

// Three nodes are in the registry with where they run, their binary and
// their counts as of their last heartbeat; one that stops is listed dead
// by AllNodes once its heartbeat is older than the node timeout, and
// Nodes leaves it out.
func TestNodeRegistryStatus(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		wf, err := dag.New("nodes").Step("s", steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			var in struct{ Fail bool }
			if err := sc.DecodeInput(&in); err != nil {
				return nil, err
			}
			if in.Fail {
				return nil, steps.Permanent(errors.New("told to fail"))
			}
			return json.RawMessage(`{}`), nil
		})).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Clock = engine.SystemClock
		o.Workflows = []*dag.Workflow{wf}
		timing := func(c *engine.Config) {
			c.NodeHeartbeat = 50 * time.Millisecond
			c.NodeTimeout = time.Second
		}
		o.Configure = func(c *engine.Config) { timing(c); c.NodeID = "node-a" }
		a := enginetest.New(t, o)
		for _, id := range []string{"node-b", "node-c"} {
			o := o
			o.Store, o.Redis, o.Prefix, o.Workflows = a.Store, a.Redis, a.Prefix, nil
			o.Configure = func(c *engine.Config) { timing(c); c.NodeID = id; c.NoWorkers = true }
			if id == "node-b" {
				enginetest.New(t, o)
				continue
			}
			c, err := engine.New(engine.Config{Store: a.Store, Redis: a.Redis, Prefix: a.Prefix, NodeID: id, NoWorkers: true,
				NodeHeartbeat: 50 * time.Millisecond, NodeTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.Stop(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		a.AssertRun(t, a.Wait(t, a.Trigger(t, "nodes", map[string]bool{"Fail": false})), persistence.RunSucceeded)
		a.AssertRun(t, a.Wait(t, a.Trigger(t, "nodes", map[string]bool{"Fail": true})), persistence.RunFailed)

		ctx := context.Background()
		host, _ := os.Hostname()
		var nodes []engine.NodeInfo
		testenv.Eventually(t, 10*time.Second, func() bool {
			nodes, err = a.Engine.AllNodes(ctx)
			n, ok := nodeOf(nodes, "node-a")
			// The counts and the in-flight set change one after the
			// other: wait for a heartbeat after both.
			return err == nil && len(nodes) == 3 && ok && n.StepsDone == 2 && n.StepsRunning == 0
		}, "node-a never reported its two finished steps and none running: %+v, %v", nodes, err)
		start := time.Now()
		for _, n := range nodes {
			if !n.Alive || n.Host != host || n.PID != os.Getpid() || !strings.HasPrefix(n.Version, "dagflow ") ||
				n.StartedAt.IsZero() || n.HeartbeatAt.Before(n.StartedAt) || start.Sub(n.HeartbeatAt) > 5*time.Second {
				t.Errorf("node %s: %+v; want alive on %s pid %d with a dagflow version and a recent heartbeat", n.ID, n, host, os.Getpid())
			}
		}
		if n, _ := nodeOf(nodes, "node-a"); n.Failures != 1 || n.StepsRunning != 0 || n.Concurrency != 8 ||
			!slices.Equal(n.Queues, []string{"default"}) || !n.Runs("nodes", "s", "default") {
			t.Errorf("node-a: %+v; want 2 steps done, 1 failure, none running, concurrency 8 on the default queue", n)
		}
		if n, _ := nodeOf(nodes, "node-b"); n.Concurrency != 0 || len(n.Queues) != 0 {
			t.Errorf("node-b runs no workers: %+v", n)
		}
		// A heartbeat moves HeartbeatAt on.
		first, _ := nodeOf(nodes, "node-b")
		testenv.Eventually(t, 5*time.Second, func() bool {
			nodes, err := a.Engine.AllNodes(ctx)
			n, _ := nodeOf(nodes, "node-b")
			return err == nil && n.HeartbeatAt.After(first.HeartbeatAt)
		}, "node-b's heartbeat never moved on from %v", first.HeartbeatAt)
	})
}

// A node that stops heartbeating is listed dead by AllNodes once its last
// heartbeat is older than the node timeout, and Nodes leaves it out.
func TestNodeRegistryListsDeadNodes(t *testing.T) {
	o := enginetest.Options{Clock: engine.SystemClock, Configure: func(c *engine.Config) {
		c.NodeID, c.NodeHeartbeat, c.NodeTimeout = "watcher", 50*time.Millisecond, 500*time.Millisecond
	}}
	w := enginetest.New(t, o)
	gone, err := engine.New(engine.Config{Store: w.Store, Redis: w.Redis, Prefix: w.Prefix, NodeID: "gone", NoWorkers: true,
		NodeHeartbeat: 50 * time.Millisecond, NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := gone.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := gone.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var all, live []engine.NodeInfo
	testenv.Eventually(t, 5*time.Second, func() bool {
		all, err = w.Engine.AllNodes(ctx)
		n, ok := nodeOf(all, "gone")
		return err == nil && ok && !n.Alive
	}, "the stopped node is never listed dead: %+v, %v", all, err)
	if n, _ := nodeOf(all, "watcher"); !n.Alive {
		t.Errorf("the live node is listed dead: %+v", n)
	}
	live, err = w.Engine.Nodes(ctx)
	if err != nil || len(live) != 1 || live[0].ID != "watcher" {
		t.Errorf("Nodes = %+v, %v; want the live node only", live, err)
	}
}

// NodeTimeout must be longer than NodeHeartbeat.
func TestNodeTimeoutValidated(t *testing.T) {
	env := enginetest.New(t, enginetest.Options{})
	for _, c := range []engine.Config{
		{NodeHeartbeat: time.Second, NodeTimeout: time.Second},
		{NodeTimeout: 2 * time.Second}, // under the default heartbeat
		{NodeHeartbeat: time.Microsecond},
	} {
		c.Store, c.Redis = env.Store, env.Redis
		_, err := engine.New(c)
		if err == nil || !strings.Contains(err.Error(), "Config.Node") {
			t.Errorf("NodeHeartbeat %v NodeTimeout %v: %v; want an error naming the field", c.NodeHeartbeat, c.NodeTimeout, err)
		}
	}
}

// Every registry heartbeat is published on NodesChannel as the node's
// JSON NodeInfo, its counts included.
func TestNodeStatusPublished(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		o := b.opts(t)
		o.Clock = engine.SystemClock
		o.Configure = func(c *engine.Config) { c.NodeID, c.NodeHeartbeat = "publisher", 50*time.Millisecond }
		env := enginetest.New(t, o)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sub := env.Redis.Subscribe(ctx, engine.NodesChannel(env.Prefix))
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		var last engine.NodeInfo
		for i := 0; i < 3; i++ {
			msg, err := sub.ReceiveMessage(ctx)
			if err != nil {
				t.Fatalf("no status published on %s: %v", engine.NodesChannel(env.Prefix), err)
			}
			var n engine.NodeInfo
			if err := json.Unmarshal([]byte(msg.Payload), &n); err != nil {
				t.Fatalf("published status %q: %v", msg.Payload, err)
			}
			if n.ID != "publisher" || !n.Alive || n.Host != host || n.PID != os.Getpid() || n.Concurrency != 8 ||
				!strings.HasPrefix(n.Version, "dagflow ") || n.StartedAt.IsZero() || !n.HeartbeatAt.After(last.HeartbeatAt) {
				t.Errorf("published status %s; want publisher's, alive, on %s pid %d, each heartbeat later", msg.Payload, host, os.Getpid())
			}
			last = n
		}
	})
}

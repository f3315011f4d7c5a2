package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// The node registry with real processes: a node that is SIGKILLed or
// frozen while it holds a step with a long lease loses the step at its
// node timeout, not when the lease expires, and the fence still refuses
// what a frozen node records once it thaws.

// Node registry settings of these scenarios: a lease far longer than the
// node timeout, so that a takeover within the node timeout can only come
// from the registry.
const (
	registryLease     = 60 * time.Second
	registryTimeout   = 5 * time.Second
	registryHeartbeat = time.Second
)

func registryConfig(c *childConfig) {
	c.Lease = registryLease
	c.Heartbeat = 2 * time.Second // the step lease's extension
	c.NodeHeartbeat = registryHeartbeat
	c.NodeTimeout = registryTimeout
}

// nodeID is the node id a worker process runs as (runWorker).
func nodeID(w *worker) string { return w.name + "-" + strconv.Itoa(w.pid) }

// waitTakeover waits until attempt 2 or later of run's step is claimed,
// and returns how long after since that was seen. It polls the store every
// 20ms, so the time is exact to about that.
func waitTakeover(t *testing.T, c *cluster, run, step string, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	for {
		s, err := c.store.StepGet(context.Background(), run, step)
		if err == nil && s.Attempt >= 2 {
			return time.Since(since)
		}
		if time.Since(since) > timeout {
			t.Fatalf("run %s step %s not taken over within %v (attempt %d, status %s, err %v)", run, step, timeout, s.Attempt, s.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// attemptsOf returns the forward attempts of a run's step by number.
func attemptsOf(t *testing.T, c *cluster, run, step string) map[int]persistence.Attempt {
	t.Helper()
	atts, err := c.store.AttemptList(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]persistence.Attempt{}
	for _, a := range atts {
		if a.Step == step && a.Kind == persistence.AttemptForward {
			out[a.Attempt] = a
		}
	}
	return out
}

// stepOutputPID is the pid in a forward step's output: the process whose
// result the store kept.
func stepOutputPID(t *testing.T, c *cluster, run, step string) int {
	t.Helper()
	s, err := c.store.StepGet(context.Background(), run, step)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(s.Output, &out); err != nil {
		t.Fatalf("run %s step %s output %q: %v", run, step, s.Output, err)
	}
	return out.PID
}

// TestNodeRegistryTakeover: three worker processes are in the registry
// (the store's and the engine's view, and the pub/sub channel) and their
// heartbeats advance; SIGKILL the one holding a step with a 60s lease
// and a 5s node timeout, and another node takes the step over within
// about the node timeout; the registry shows the killed node dead.
func TestNodeRegistryTakeover(t *testing.T) {
	c := newCluster(t, clusterOptions{Configure: registryConfig, NodeHeartbeat: registryHeartbeat, NodeTimeout: registryTimeout})
	ctx := t.Context()

	// Live status on the pub/sub channel, from before the nodes start.
	sub := c.rdb.Subscribe(ctx, engine.NodesChannel(c.prefix))
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	var (
		pubMu     sync.Mutex
		published = map[string]engine.NodeInfo{}
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range sub.Channel() {
			var n engine.NodeInfo
			if json.Unmarshal([]byte(m.Payload), &n) == nil {
				pubMu.Lock()
				published[n.ID] = n
				pubMu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { sub.Close(); <-done })

	ws := c.start(3, nil)
	ids := map[string]*worker{}
	for _, w := range ws {
		ids[nodeID(w)] = w
	}
	// All three in the store's registry and the engine's, alive, as they
	// are; then each heartbeat advances.
	first := map[string]time.Time{}
	testenv.Eventually(t, 15*time.Second, func() bool {
		nodes, err := c.eng.Nodes(ctx)
		if err != nil {
			return false
		}
		seen := 0
		for _, n := range nodes {
			w := ids[n.ID]
			if w == nil || !n.Alive || n.PID != w.pid || n.Concurrency != c.base.Concurrency || len(n.Queues) == 0 || len(n.Workflows[wfChain]) != 4 {
				continue
			}
			if _, ok := first[n.ID]; !ok {
				first[n.ID] = n.HeartbeatAt
			}
			seen++
		}
		return seen == 3
	}, "the 3 worker nodes alive in the registry, as they are")
	testenv.Eventually(t, 10*time.Second, func() bool {
		rows, err := c.store.NodeList(ctx, persistence.NodeListParams{AliveSince: time.Now().Add(-registryTimeout)})
		if err != nil {
			return false
		}
		advanced := 0
		for _, r := range rows {
			if f, ok := first[r.ID]; ok && r.HeartbeatAt.After(f) {
				advanced++
			}
		}
		return advanced == 3
	}, "every worker node's heartbeat advancing in the store")
	testenv.Eventually(t, 10*time.Second, func() bool {
		pubMu.Lock()
		defer pubMu.Unlock()
		n := 0
		for id := range ids {
			if p, ok := published[id]; ok && p.PID == ids[id].pid {
				n++
			}
		}
		return n == 3
	}, "every worker node's status published on %s", engine.NodesChannel(c.prefix))

	id := c.trigger(wfChain, plan{N: 21, Hold: map[string][]int{"b": {1}}})
	ev := c.waitEvent(30*time.Second, "hold", id, "b", "step", "1")
	holder := ev.Worker
	// The holder reports the step as running.
	testenv.Eventually(t, 10*time.Second, func() bool {
		nodes, err := c.eng.Nodes(ctx)
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n.ID == nodeID(holder) {
				return n.StepsRunning >= 1
			}
		}
		return false
	}, "node %s reporting its running step", nodeID(holder))
	holder.kill(t)
	killed := time.Now()
	took := waitTakeover(t, c, id, "b", killed, registryLease)
	logRecovery(t, fmt.Sprintf("node registry: SIGKILL -> step taken over (lease %v, node timeout %v)", registryLease, registryTimeout), took)
	if took > 20*time.Second {
		t.Errorf("takeover took %v with a %v node timeout and a %v lease: want well under the lease (< 20s)", took, registryTimeout, registryLease)
	}

	runs := checkInvariants(t, c, []string{id}, 30*time.Second)
	if got := runs[id].Status; got != persistence.RunSucceeded {
		t.Fatalf("run %s: %s, want succeeded (%s)", id, got, runs[id].Error)
	}
	atts := attemptsOf(t, c, id, "b")
	if a := atts[1]; a.Worker != nodeID(holder) || a.Outcome != persistence.OutcomeLost {
		t.Errorf("b attempt 1: worker %q outcome %q, want %q lost", a.Worker, a.Outcome, nodeID(holder))
	}
	if a := atts[2]; a.Worker == nodeID(holder) || ids[a.Worker] == nil || a.Outcome != persistence.OutcomeSucceeded {
		t.Errorf("b attempt 2: worker %q outcome %q, want another worker node, succeeded", a.Worker, a.Outcome)
	}
	all, err := c.eng.AllNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alive := map[string]bool{}
	for _, n := range all {
		if ids[n.ID] != nil {
			alive[n.ID] = n.Alive
		}
	}
	for nid, w := range ids {
		if want := w != holder; alive[nid] != want {
			t.Errorf("node %s: alive %v in the registry, want %v (%v)", nid, alive[nid], want, alive)
		}
	}
}

// TestNodeTimeoutFrozenNodeFenced: a node frozen (SIGSTOP) while it
// holds a step with a 60s lease is presumed dead at its 5s node timeout
// and the step is taken over and succeeds; thawed (SIGCONT), the frozen
// node returns its success, which the fence refuses: the store keeps the
// new owner's result and records the frozen node's attempt as lost.
func TestNodeTimeoutFrozenNodeFenced(t *testing.T) {
	// The step's lease is extended every 30s here, not 2s: a beat due
	// during the freeze would run first on the thaw, be refused and abort
	// the attempt, and the completion would never reach StepComplete's
	// fence, which is what this test is about. The handler sleeps 3s
	// after its "hold" event, so that the freeze surely lands inside it
	// on a loaded machine; that time has passed by the thaw.
	c := newCluster(t, clusterOptions{Configure: func(c *childConfig) {
		registryConfig(c)
		c.Heartbeat = 30 * time.Second
	}})
	ws := c.start(3, nil)
	id := c.trigger(wfChain, plan{N: 22, Hold: map[string][]int{"b": {1}}, HoldSleep: true, HoldSleepMS: 3000})
	ev := c.waitEvent(30*time.Second, "hold", id, "b", "step", "1")
	zombie := ev.Worker
	zombie.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	took := waitTakeover(t, c, id, "b", stopped, registryLease)
	logRecovery(t, fmt.Sprintf("node registry: SIGSTOP -> step taken over (lease %v, node timeout %v)", registryLease, registryTimeout), took)
	if took > 20*time.Second {
		t.Errorf("takeover took %v with a %v node timeout and a %v lease: want well under the lease (< 20s)", took, registryTimeout, registryLease)
	}
	waitStatus(t, c, id, "b", persistence.StepSucceeded, 30*time.Second)
	c.waitRuns([]string{id}, 30*time.Second)
	owner := stepOutputPID(t, c, id, "b")
	if owner == zombie.pid {
		t.Fatalf("b's output is the frozen worker's (pid %d) before it was thawed", owner)
	}

	zombie.signal(t, syscall.SIGCONT)
	stats := c.stop(zombie, 30*time.Second)
	if stats.StaleCompletions < 1 {
		t.Errorf("frozen worker's StaleCompletions = %d, want >= 1 (stats %+v)", stats.StaleCompletions, stats)
	}
	if log, _ := os.ReadFile(zombie.log); !strings.Contains(string(log), "stale completion refused") {
		t.Errorf("the thawed worker's success was not refused by the completion's fence (its log has no \"stale completion refused\"):\n%s", log)
	}
	runs := checkInvariants(t, c, []string{id}, 30*time.Second)
	if got := runs[id].Status; got != persistence.RunSucceeded {
		t.Fatalf("run %s: %s, want succeeded (%s)", id, got, runs[id].Error)
	}
	if got := stepOutputPID(t, c, id, "b"); got != owner {
		t.Errorf("b's output is pid %d's after the thaw, want the new owner's %d", got, owner)
	}
	atts := attemptsOf(t, c, id, "b")
	if a := atts[1]; a.Worker != nodeID(zombie) || a.Outcome != persistence.OutcomeLost {
		t.Errorf("b attempt 1: worker %q outcome %q, want %q lost", a.Worker, a.Outcome, nodeID(zombie))
	}
	if a := atts[2]; a.Outcome != persistence.OutcomeSucceeded || a.Worker != nodeID(byPid(ws, owner)) {
		t.Errorf("b attempt 2: worker %q outcome %q, want %q succeeded", a.Worker, a.Outcome, nodeID(byPid(ws, owner)))
	}
	info, err := c.eng.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := successes(info, "b"); got != 1 {
		t.Errorf("b: %d successes recorded, want 1", got)
	}
}

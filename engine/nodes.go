package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/dagflow/dagflow/internal/buildinfo"
	"github.com/dagflow/dagflow/persistence"
)

// The node registry: every engine records in the store, every
// Config.NodeHeartbeat, that it is alive, what it can run and how it is
// doing, and publishes the same on Redis (NodesChannel) for dashboards. It answers
// "which live node can run this step?" (WhyWaiting) for any process that
// reads the store, even one that runs nothing.

const (
	// NodeAliveWithin is the default of Config.NodeTimeout: how recent a
	// node's last heartbeat must be for it to count as alive, three
	// default heartbeats.
	NodeAliveWithin = 3 * DefaultNodeHeartbeat
	// nodeForgetAfter is how long a node that stopped heartbeating stays
	// in the registry (for operators to see that it went).
	nodeForgetAfter = 24 * time.Hour
	// nodeForgetEvery is how often a node deletes the nodes forgotten.
	nodeForgetEvery = 5 * time.Minute
)

// processHost and processVersion are this process's host name and
// binary's description, read once.
var (
	processHost = sync.OnceValue(func() string {
		h, err := os.Hostname()
		if err != nil {
			return "unknown"
		}
		return h
	})
	processVersion = sync.OnceValue(buildinfo.String)
)

// NodeInfo is what a node says of itself in the registry: what it can
// run, where it runs, and how it is doing as of its last heartbeat.
type NodeInfo struct {
	// ID is the node's Config.NodeID.
	ID string `json:"id"`
	// Host and PID are where the node runs; Version describes its binary
	// (module, version, VCS revision, Go version: what `dagflow
	// --version` prints).
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	// StartedAt is when the node started; HeartbeatAt is its last
	// heartbeat.
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// Alive is set by the readers of the registry (Nodes, AllNodes): the
	// last heartbeat is within the node timeout.
	Alive bool `json:"alive"`
	// Workflows maps each workflow the node has registered to its steps.
	Workflows map[string][]string `json:"workflows"`
	// Queues are the queues the node's workers take steps from (none
	// when it runs no workers).
	Queues      []string `json:"queues"`
	Concurrency int      `json:"concurrency"`
	// StepsRunning is how many steps the node was running at its last
	// heartbeat; StepsDone how many attempts it had finished since it
	// started (succeeded or failed), and Failures how many of those
	// failed (Stats.StepsFailed).
	StepsRunning int   `json:"steps_running"`
	StepsDone    int64 `json:"steps_done"`
	Failures     int64 `json:"failures"`
}

// Runs reports whether the node runs step of workflow: it has them
// registered and works the step's queue.
func (n NodeInfo) Runs(workflow, step, queue string) bool {
	return slices.Contains(n.Workflows[workflow], step) && slices.Contains(n.Queues, queue)
}

// selfInfo is this node's registry entry as of now.
func (e *Engine) selfInfo(started time.Time) NodeInfo {
	info := NodeInfo{
		ID: e.cfg.NodeID, Host: processHost(), PID: os.Getpid(), Version: processVersion(),
		StartedAt: started, HeartbeatAt: e.clock.Now(),
		Alive: true, Workflows: map[string][]string{}, Queues: []string{},
	}
	e.mu.RLock()
	for name, w := range e.workflows {
		var names []string
		for _, s := range w.Steps() {
			names = append(names, s.Name)
		}
		info.Workflows[name] = names
	}
	e.mu.RUnlock()
	if !e.cfg.NoWorkers && e.cfg.Concurrency > 0 {
		info.Queues = e.queueNames()
		info.Concurrency = e.cfg.Concurrency
	}
	st := e.Stats()
	info.StepsRunning = st.InFlight
	info.StepsDone = st.StepsSucceeded + st.StepsFailed
	info.Failures = st.StepsFailed
	return info
}

// heartbeatNode records this node in the registry; Start calls it once,
// then the node loop every Config.NodeHeartbeat.
func (e *Engine) heartbeatNode(ctx context.Context, started time.Time) error {
	self := e.selfInfo(started)
	info, err := json.Marshal(self)
	if err != nil {
		return err
	}
	if err := e.store.NodeHeartbeat(ctx, persistence.Node{
		ID: self.ID, StartedAt: started, HeartbeatAt: self.HeartbeatAt, Info: info,
	}); err != nil {
		return err
	}
	e.replica.heartbeatTaken(self.HeartbeatAt)
	e.stats.beatOK.Store(monoNow())
	if e.stats.registryFenced.CompareAndSwap(true, false) {
		e.log.Info("node registry: this node's heartbeat is recorded again; claiming steps")
		e.wakeFetch()
	}
	e.publishNode(ctx, info)
	return nil
}

// NodesChannel is the Redis pub/sub channel on which the nodes of prefix
// publish their status (NodeInfo as JSON) on every registry heartbeat:
// "<prefix>:nodes". Dashboards subscribe to it to follow the nodes live;
// the registry in the store (Nodes, AllNodes) is the record.
func NodesChannel(prefix string) string { return prefix + ":nodes" }

// publishNode publishes this node's status, recorded in the registry
// just before, on NodesChannel. Only a heartbeat the store took is
// published, so that a node the others count dead does not look alive
// to dashboards. A failure is a Redis error (counted and logged), not
// the heartbeat's: the store is the record. It waits at most one
// heartbeat interval.
func (e *Engine) publishNode(parent context.Context, info []byte) {
	ctx, cancel := context.WithTimeout(parent, e.cfg.NodeHeartbeat)
	defer cancel()
	ch := NodesChannel(e.cfg.Prefix)
	if err := e.cfg.Redis.Publish(ctx, ch, info).Err(); err != nil && parent.Err() == nil {
		e.redisError("node registry: publishing the node's status failed", err, "channel", ch)
	}
}

// nodeLoop keeps this node's registry entry fresh until Stop, releases
// the steps of the nodes that missed their heartbeats (takeover.go), and
// now and then forgets nodes long gone.
func (e *Engine) nodeLoop(started time.Time) {
	// Forget old nodes every nodeForgetEvery, from the first heartbeat on.
	forgetEvery := max(1, int(nodeForgetEvery/e.cfg.NodeHeartbeat))
	i := 0
	e.every(e.cfg.NodeHeartbeat, false, func(ctx context.Context) {
		if err := e.heartbeatNode(ctx, started); err != nil && ctx.Err() == nil {
			e.log.Warn("node registry: heartbeat failed", "err", err)
		}
		if _, err := e.releaseDeadNodes(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("node registry: releasing the steps of dead nodes failed", "err", err)
		}
		if i%forgetEvery == 0 {
			if _, err := e.store.NodeDeleteStale(ctx, e.clock.Now().Add(-nodeForgetAfter)); err != nil && ctx.Err() == nil {
				e.log.Warn("node registry: forgetting old nodes failed", "err", err)
			}
		}
		i++
	})
}

// Nodes lists the nodes alive now (a heartbeat within Config.NodeTimeout),
// by id, with what each can run.
func (e *Engine) Nodes(ctx context.Context) ([]NodeInfo, error) {
	return e.listNodes(ctx, false)
}

// AllNodes lists every node in the registry, by id: the live ones and
// those that stopped heartbeating (Alive false) but are not forgotten yet
// (a day after their last heartbeat).
func (e *Engine) AllNodes(ctx context.Context) ([]NodeInfo, error) {
	return e.listNodes(ctx, true)
}

// listNodes reads the registry: every node, or the live ones only.
func (e *Engine) listNodes(ctx context.Context, dead bool) ([]NodeInfo, error) {
	aliveSince := e.clock.Now().Add(-e.cfg.NodeTimeout)
	p := persistence.NodeListParams{AliveSince: aliveSince}
	if dead {
		p.AliveSince = time.Time{}
	}
	rows, err := e.store.NodeList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("engine: list nodes: %w", err)
	}
	out := make([]NodeInfo, 0, len(rows))
	for _, r := range rows {
		var n NodeInfo
		if err := json.Unmarshal(r.Info, &n); err != nil {
			// A node of another version may describe itself otherwise;
			// it is alive all the same.
			e.log.Debug("node registry: unreadable node info", "node", r.ID, "err", err)
		}
		n.ID, n.StartedAt, n.HeartbeatAt = r.ID, r.StartedAt, r.HeartbeatAt
		n.Alive = !r.HeartbeatAt.Before(aliveSince)
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow is the time since monoBase on the monotonic clock, in
// nanoseconds, never 0: it ignores Config.Clock, which tests move by
// hours, and wall-clock steps.
func monoNow() int64 { return int64(time.Since(monoBase)) + 1 }

// fenceAfter is how long a node's heartbeats may go unrecorded before it
// claims nothing: NodeTimeout less one heartbeat, but never under one and
// a half heartbeats, the silence of a healthy node between two of them
// (a NodeTimeout that close to NodeHeartbeat is fragile anyway: the
// others may presume a healthy node dead).
func fenceAfter(nodeTimeout, heartbeat time.Duration) time.Duration {
	return max(nodeTimeout-heartbeat, heartbeat+heartbeat/2)
}

// registryFenced reports whether this node must claim nothing because the
// store has not taken its registry heartbeat for fenceAfter. The other nodes presume it dead at NodeTimeout and release
// the steps it holds (takeover.go); a step it claimed after that would be
// released again and run twice. It stops first, by a heartbeat's margin,
// and claims again once a heartbeat is recorded. A node whose first
// heartbeat never reached the store is not fenced: no node knows it, so
// none releases its steps.
func (e *Engine) registryFenced() bool {
	last := e.stats.beatOK.Load()
	if last == 0 {
		return false
	}
	silent := time.Duration(monoNow() - last)
	fenced := silent > fenceAfter(e.cfg.NodeTimeout, e.cfg.NodeHeartbeat)
	if fenced && e.stats.registryFenced.CompareAndSwap(false, true) {
		e.log.Warn("node registry: this node's heartbeat has not been recorded for too long; it claims nothing until one is, as the other nodes will presume it dead",
			"silent_for", silent.Round(time.Millisecond), "node_timeout", e.cfg.NodeTimeout)
	}
	return fenced
}

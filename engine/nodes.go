package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// The node registry: every engine records in the store, every
// nodeHeartbeatEvery, that it is alive and what it can run. It answers
// "which live node can run this step?" (WhyWaiting) for any process that
// reads the store, even one that runs nothing.

const (
	// nodeHeartbeatEvery is how often a node records that it is alive.
	nodeHeartbeatEvery = 5 * time.Second
	// NodeAliveWithin is how recent a node's last heartbeat must be for
	// it to count as alive: three heartbeats.
	NodeAliveWithin = 3 * nodeHeartbeatEvery
	// nodeForgetAfter is how long a node that stopped heartbeating stays
	// in the registry (for operators to see that it went).
	nodeForgetAfter = 24 * time.Hour
)

// NodeInfo is what a node says of itself in the registry.
type NodeInfo struct {
	ID          string    `json:"-"`
	StartedAt   time.Time `json:"-"`
	HeartbeatAt time.Time `json:"-"`
	// Workflows maps each workflow the node has registered to its steps.
	Workflows map[string][]string `json:"workflows"`
	// Queues are the queues the node's workers take steps from (none
	// when it runs no workers).
	Queues      []string `json:"queues"`
	Concurrency int      `json:"concurrency"`
}

// Runs reports whether the node runs step of workflow: it has them
// registered and works the step's queue.
func (n NodeInfo) Runs(workflow, step, queue string) bool {
	return slices.Contains(n.Workflows[workflow], step) && slices.Contains(n.Queues, queue)
}

// selfInfo is this node's registry entry.
func (e *Engine) selfInfo() NodeInfo {
	info := NodeInfo{Workflows: map[string][]string{}, Queues: []string{}}
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
	return info
}

// heartbeatNode records this node in the registry; Start calls it once,
// then the node loop every nodeHeartbeatEvery.
func (e *Engine) heartbeatNode(ctx context.Context, started time.Time) error {
	info, err := json.Marshal(e.selfInfo())
	if err != nil {
		return err
	}
	return e.store.NodeHeartbeat(ctx, persistence.Node{
		ID: e.cfg.NodeID, StartedAt: started, HeartbeatAt: e.clock.Now(), Info: info,
	})
}

// nodeLoop keeps this node's registry entry fresh until Stop, and now
// and then forgets nodes long gone.
func (e *Engine) nodeLoop(started time.Time) {
	defer e.wg.Done()
	t := time.NewTicker(nodeHeartbeatEvery)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-e.fetchCtx.Done():
			return
		case <-t.C:
		}
		if err := e.heartbeatNode(e.fetchCtx, started); err != nil && e.fetchCtx.Err() == nil {
			e.log.Warn("node registry: heartbeat failed", "err", err)
		}
		if i%60 == 0 {
			if _, err := e.store.NodeDeleteStale(e.fetchCtx, e.clock.Now().Add(-nodeForgetAfter)); err != nil && e.fetchCtx.Err() == nil {
				e.log.Warn("node registry: forgetting old nodes failed", "err", err)
			}
		}
	}
}

// Nodes lists the nodes alive now (a heartbeat within NodeAliveWithin),
// by id, with what each can run.
func (e *Engine) Nodes(ctx context.Context) ([]NodeInfo, error) {
	rows, err := e.store.NodeList(ctx, persistence.NodeListParams{AliveSince: e.clock.Now().Add(-NodeAliveWithin)})
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
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// The takeover of a dead node's steps. A node that stops heartbeating in
// the node registry for Config.NodeTimeout is presumed dead: every other
// node, on its own registry heartbeat, ends the leases that node holds
// (persistence.Store.StepReleaseLeases, fenced per step) and enqueues the
// steps, so that they are taken over within about NodeTimeout plus a
// heartbeat instead of when each lease expires. Nothing else changes for
// the presumed-dead node: its fence stays valid until another node claims
// the step, and from that claim on the store refuses whatever it records.

// releaseWindow is how long after its node timeout a dead node's leases
// are still looked for: past it, any lease it held has expired (a lease
// runs at most Lease past the holder's last heartbeat) and the
// reconciler has them.
func (e *Engine) releaseWindow() time.Duration {
	return max(2*e.cfg.Lease, 10*time.Minute)
}

// releaseDeadNodes ends the leases held by the nodes whose registry
// heartbeat is older than the node timeout (and younger than the release
// window), and enqueues their steps for another worker. It returns how
// many steps it released. A paused node (clock off, Redis prefix not
// bound) releases nothing: its idea of "older" cannot be trusted.
func (e *Engine) releaseDeadNodes(ctx context.Context) (int, error) {
	if e.paused() {
		return 0, nil
	}
	now := e.clock.Now()
	deadBefore := now.Add(-e.cfg.NodeTimeout)
	rows, err := e.store.NodeList(ctx, persistence.NodeListParams{AliveSince: deadBefore.Add(-e.releaseWindow())})
	if err != nil {
		return 0, fmt.Errorf("engine: list nodes to release: %w", err)
	}
	var dead []string
	for _, r := range rows {
		if r.ID != e.cfg.NodeID && r.HeartbeatAt.Before(deadBefore) {
			dead = append(dead, r.ID)
		}
	}
	total := 0
	for len(dead) > 0 {
		n := min(len(dead), maxReleaseWorkers)
		released, err := e.store.StepReleaseLeases(ctx, persistence.StepReleaseLeasesParams{Workers: dead[:n], Now: now, Limit: reconcileBatch})
		if len(released) > 0 {
			e.log.Warn("node registry: nodes missed their heartbeats; released the leases they held for takeover",
				"nodes", dead[:n], "steps", len(released), "node_timeout", e.cfg.NodeTimeout)
			e.requeue(ctx, released, now, true)
			total += len(released)
		}
		if err != nil {
			return total, fmt.Errorf("engine: release the leases of dead nodes %v: %w", dead[:n], err)
		}
		dead = dead[n:]
	}
	return total, nil
}

// maxReleaseWorkers is how many dead nodes one StepReleaseLeases call
// names (the stores' bound).
const maxReleaseWorkers = 100

package engine

import (
	"context"
	"time"
)

// every starts one of the node's periodic loops: pass runs every
// interval until Stop ends fetchCtx (and once at once first, with
// atStart), never two at a time. The loops a node runs this way: the
// clock check (health.go), the paused-queue watch (pause.go), the
// reconciler (reconcile.go), the node registry (nodes.go), retention
// (retention.go) and the scheduler (scheduler.go).
func (e *Engine) every(interval time.Duration, atStart bool, pass func(ctx context.Context)) {
	ctx := e.fetchCtx
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		if atStart {
			pass(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pass(ctx)
		}
	}()
}

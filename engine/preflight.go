package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dagflow/dagflow/queue"
)

// What Start checks before it starts anything. A node that cannot work
// (Redis refuses its credentials or its ACL lacks a command, the
// database lacks migrations or cannot be read) would otherwise start,
// fail every call and log warnings for ever; Start returns the reason
// instead, and a process supervisor sees the node fail. New has already checked the
// configuration itself (Config.validate).

// probeTimeout bounds the Redis probe of a Redis that does not answer.
const probeTimeout = 10 * time.Second

// preflight runs Start's checks, in the order an operator fixes them.
func (e *Engine) preflight(ctx context.Context) error {
	if err := e.checkRedis(ctx); err != nil {
		return err
	}
	if err := e.checkSchema(ctx); err != nil {
		return err
	}
	if err := e.checkKeyring(ctx); err != nil {
		return err
	}
	e.warnUnworkedQueues()
	return nil
}

// checkRedis probes Redis under the prefix (queue.Probe). A refusal
// (credentials, ACL) is Start's error: it lasts until an operator fixes
// it. A Redis that cannot be reached is not: the node works through a
// Redis outage (the store keeps every transition, the reconciler refills
// Redis when it is back), so it starts, and counts and logs the failure
// as every Redis failure.
func (e *Engine) checkRedis(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := e.q.Probe(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrRedisAuth), errors.Is(err, queue.ErrRedisDenied):
		return fmt.Errorf("engine: Redis (key prefix %q): %w", e.cfg.Prefix, err)
	}
	e.redisError("the probe at start failed; starting anyway", err)
	return nil
}

// checkSchema refuses a database behind this binary's migrations. One
// ahead of it is logged and accepted: during a rolling deploy the new
// release migrates first, and this node must keep running until it is
// replaced.
func (e *Engine) checkSchema(ctx context.Context) error {
	v, err := e.store.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("engine: reading the database's schema version: %w", err)
	}
	if err := v.Check(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if v.Ahead() {
		e.log.Warn("the database's schema is ahead of this binary (a newer release migrated it); running until this node is replaced",
			"database_version", v.Database, "binary_version", v.Binary)
	}
	return nil
}

// warnUnworkedQueues logs the queues of registered workflows that a node
// with Config.Queues does not work: their steps wait for other nodes.
func (e *Engine) warnUnworkedQueues() {
	if e.cfg.NoWorkers || len(e.cfg.Queues) == 0 {
		return
	}
	e.mu.RLock()
	var missing []string
	for _, w := range e.workflows {
		for _, s := range w.Steps() {
			if !slices.Contains(e.cfg.Queues, s.Queue) && !slices.Contains(missing, s.Queue) {
				missing = append(missing, s.Queue)
			}
		}
	}
	e.mu.RUnlock()
	if len(missing) > 0 {
		sort.Strings(missing)
		e.log.Warn("registered workflows use queues this node does not work (Config.Queues); their steps wait for another node",
			"queues", missing, "worked", e.cfg.Queues)
	}
}

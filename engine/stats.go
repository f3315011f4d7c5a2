package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// counters are the engine's running totals; see Stats.
type counters struct {
	runsCreated      atomic.Int64
	stepsStarted     atomic.Int64
	stepsSucceeded   atomic.Int64
	stepsFailed      atomic.Int64
	stepsDead        atomic.Int64
	stepsSkipped     atomic.Int64
	stepsParked      atomic.Int64
	signals          atomic.Int64
	staleCompletions atomic.Int64
	compensations    atomic.Int64
	reconciled       atomic.Int64
	errors           atomic.Int64
	claimBatches     atomic.Int64
	claimItems       atomic.Int64
	commitBatches    atomic.Int64
	commitItems      atomic.Int64
	createBatches    atomic.Int64
	createItems      atomic.Int64
	claimedAtRelease atomic.Int64
	claimedAtCreate  atomic.Int64
	redisErrors      atomic.Int64
	clockSkew        atomic.Int64 // nanoseconds, this node's clock minus the database's
	clockSkewed      atomic.Bool
	foreignPrefix    atomic.Bool // the Redis prefix is bound to another database
	bound            atomic.Bool // the Redis prefix was bound to the store once
	// beatOK is when (monoNow) the store last took this node's registry
	// heartbeat; 0 before the first. registryFenced is set while the
	// node claims nothing because its heartbeats have failed (nodes.go).
	beatOK         atomic.Int64
	registryFenced atomic.Bool

	refusedMu sync.Mutex
	refused   map[persistence.ClaimRefusal]int64
}

// countRefusal counts a claim the store refused, by reason.
func (c *counters) countRefusal(r persistence.ClaimRefusal) {
	c.refusedMu.Lock()
	if c.refused == nil {
		c.refused = map[persistence.ClaimRefusal]int64{}
	}
	c.refused[r]++
	c.refusedMu.Unlock()
}

// Stats are an engine's running totals since New.
type Stats struct {
	RunsCreated    int64
	StepsStarted   int64
	StepsSucceeded int64
	StepsFailed    int64 // failed attempts, retried or not
	StepsDead      int64
	StepsSkipped   int64
	// StepsParked counts wait and sleep steps this node parked, and
	// Signals the signals that completed a parked step.
	StepsParked, Signals int64
	// StaleCompletions counts outcomes refused because the worker had lost
	// its lease (a zombie worker's late result).
	StaleCompletions int64
	Compensations    int64
	Reconciled       int64 // tasks the reconciler put back into Redis
	Errors           int64 // store or Redis errors seen by workers
	// RedisErrors counts the Redis calls that failed (Redis unreachable,
	// refused or timed out); they are in Errors too.
	RedisErrors int64
	// ClaimsRefused counts the tasks whose claim the store refused, by
	// reason (persistence.RefusedNotDue, RefusedOwned, RefusedFinished...).
	// A task refused as not due yet is put back for its due time; the
	// others are stale and dropped.
	ClaimsRefused map[persistence.ClaimRefusal]int64
	InFlight      int
	// ClaimBatches and ClaimItems count claim transactions and the tasks
	// they carried; CommitBatches and CommitItems the same for completions.
	// Items per batch is the group commit's effect.
	ClaimBatches, ClaimItems   int64
	CommitBatches, CommitItems int64
	// CreateBatches and CreateItems count the transactions that created
	// runs for Trigger calls, and the runs they created together.
	CreateBatches, CreateItems int64
	// ClaimedAtRelease counts steps claimed by the transaction that
	// released them and run on this node without a trip through Redis.
	ClaimedAtRelease int64
	// ClaimedAtCreate counts root steps claimed by the transaction that
	// created their run (a Trigger on a node with free workers) and run on
	// this node without a trip through Redis.
	ClaimedAtCreate int64
	// ClockSkew is how far this node's clock was ahead of the database's
	// (negative: behind) at the last check, and ClockSkewed whether that
	// is over Config.MaxClockSkew, so that the node claims nothing.
	ClockSkew   time.Duration
	ClockSkewed bool
	// PrefixConflict is set while the Redis prefix is bound to another
	// database (see ErrNamespaceConflict): the node claims nothing.
	PrefixConflict bool
}

// Stats returns the engine's running totals.
func (e *Engine) Stats() Stats {
	e.inflightMu.Lock()
	n := len(e.inflight)
	e.inflightMu.Unlock()
	c := &e.stats
	c.refusedMu.Lock()
	refused := make(map[persistence.ClaimRefusal]int64, len(c.refused))
	for k, v := range c.refused {
		refused[k] = v
	}
	c.refusedMu.Unlock()
	return Stats{
		RedisErrors: c.redisErrors.Load(), ClaimsRefused: refused,
		ClockSkew: time.Duration(c.clockSkew.Load()), ClockSkewed: c.clockSkewed.Load(),
		PrefixConflict: c.foreignPrefix.Load(),
		RunsCreated:    c.runsCreated.Load(), StepsStarted: c.stepsStarted.Load(),
		StepsSucceeded: c.stepsSucceeded.Load(), StepsFailed: c.stepsFailed.Load(),
		StepsDead: c.stepsDead.Load(), StepsSkipped: c.stepsSkipped.Load(),
		StepsParked: c.stepsParked.Load(), Signals: c.signals.Load(),
		StaleCompletions: c.staleCompletions.Load(), Compensations: c.compensations.Load(),
		Reconciled: c.reconciled.Load(), Errors: c.errors.Load(), InFlight: n,
		ClaimBatches: c.claimBatches.Load(), ClaimItems: c.claimItems.Load(),
		CommitBatches: c.commitBatches.Load(), CommitItems: c.commitItems.Load(),
		CreateBatches: c.createBatches.Load(), CreateItems: c.createItems.Load(),
		ClaimedAtRelease: c.claimedAtRelease.Load(), ClaimedAtCreate: c.claimedAtCreate.Load(),
	}
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Retention deletes finished runs once they are older than
// Config.Retention.Keep, with every row kept by run (steps, attempts,
// event links and the events left without runs, the schedule ticks that
// started them), in small batches: each batch is one short transaction
// that reads at most Retention.Batch runs through an index and deletes
// by key, followed by a pause (Retention.Pause, and at least what
// Retention.Share asks), so that the sweep never holds locks or the
// database's attention for long, and a database slowed by load slows the
// sweep rather than the sweep slowing the load. Runs with a dead step (the
// dead-letter queue) are kept until an operator retries or discards the
// step.
//
// Every node runs the loop; one node at a time sweeps: a sweep holds the
// store's "retention" lease (Store.LeaseAcquire), extended before each
// batch and released at its end. A node that dies mid-sweep leaves the
// lease to expire (retentionLease) and another node's next sweep goes on
// where the store's index says, not where the dead node was.

const (
	// DefaultRetentionKeep is how long finished runs are kept
	// (Retention.Keep).
	DefaultRetentionKeep = 30 * 24 * time.Hour
	// DefaultRetentionInterval is how often a node tries to start a
	// sweep (Retention.Interval).
	DefaultRetentionInterval = time.Hour
	// DefaultRetentionBatch is how many runs a batch reads
	// (Retention.Batch).
	DefaultRetentionBatch = 500
	// DefaultRetentionPause is the pause between batches
	// (Retention.Pause).
	DefaultRetentionPause = 200 * time.Millisecond
	// DefaultRetentionShare bounds the sweep's share of its own time
	// spent in batches (Retention.Share). Deleting a run costs the
	// database about what creating it did: a full-load bench beside an
	// unpaced sweep (batch 500, pause 200ms: a third of the time in
	// batches) lost 13–18% of its throughput, at a fifth 9–13%
	// (docs/benchmarks.md, "Retention").
	DefaultRetentionShare = 0.15
	// maxRetentionBatch is the store's bound on a batch.
	maxRetentionBatch = 10000
	// retentionLease is how long a sweep holds the lease past its last
	// batch: a batch and its pause must fit in it many times over.
	retentionLease = time.Minute
	// retentionLeaseName names the sweep's lease in the store.
	retentionLeaseName = "retention"
)

// ErrPurgeBusy is returned by Purge while another node (or process)
// holds the retention lease: one sweep at a time.
var ErrPurgeBusy = errors.New("engine: another node is deleting finished runs (the retention lease is held)")

// Retention configures the deletion of old finished runs (Config.Retention).
type Retention struct {
	// Keep is how long a finished run (succeeded, failed, compensated,
	// cancelled) is kept after it finished. Default 30 days
	// (DefaultRetentionKeep). Negative: this node deletes nothing by
	// itself (Purge still works).
	Keep time.Duration
	// Interval is how often this node tries to start a sweep; a sweep
	// runs until nothing older than Keep is left. Default 1h.
	Interval time.Duration
	// Batch bounds the runs one batch (one transaction) reads and
	// deletes. Default 500, at most 10000.
	Batch int
	// Pause is the least wait between two batches. Default 200ms.
	// Negative: no least wait (Share still applies).
	Pause time.Duration
	// Share bounds the part of the sweep's time spent in batches: after a
	// batch that took d it waits at least d×(1−Share)/Share, so the
	// sweep keeps to about that share of one database connection, and
	// goes fast on an idle database and slowly on a busy one. Default
	// 0.15 (DefaultRetentionShare); 1: only Pause; at most 1.
	Share float64
}

func (r Retention) withDefaults() Retention {
	if r.Keep == 0 {
		r.Keep = DefaultRetentionKeep
	}
	if r.Interval == 0 {
		r.Interval = DefaultRetentionInterval
	}
	if r.Batch == 0 {
		r.Batch = DefaultRetentionBatch
	}
	if r.Pause == 0 {
		r.Pause = DefaultRetentionPause
	}
	if r.Share == 0 {
		r.Share = DefaultRetentionShare
	}
	return r
}

func (r Retention) validate() []error {
	var errs []error
	if r.Batch < 0 || r.Batch > maxRetentionBatch {
		errs = append(errs, fmt.Errorf("engine: Config.Retention.Batch %d must be between 1 and %d", r.Batch, maxRetentionBatch))
	}
	if !(r.Share > 0 && r.Share <= 1) {
		errs = append(errs, fmt.Errorf("engine: Config.Retention.Share %v must be above 0 and at most 1 (a share of the time, not a percentage)", r.Share))
	}
	if r.Interval < minInterval {
		errs = append(errs, fmt.Errorf("engine: Config.Retention.Interval %v is under %v (a missing unit?)", r.Interval, minInterval))
	}
	if r.Keep > 0 && r.Keep < time.Second {
		errs = append(errs, fmt.Errorf("engine: Config.Retention.Keep %v is under 1s (a missing unit?)", r.Keep))
	}
	return errs
}

// PurgeParams are the arguments of Engine.Purge.
type PurgeParams struct {
	// Before: runs that finished before it are deleted. Required.
	Before time.Time
	// DryRun deletes nothing and counts what would be deleted (it takes
	// no lease).
	DryRun bool
	// OnBatch, when set, is called after each batch with what it did.
	OnBatch func(persistence.RunDeleteFinishedResult)
	// Share, when set, paces this sweep instead of
	// Config.Retention.Share: 1 for an operator's purge at a quiet hour,
	// as fast as the database deletes. Above 0 and at most 1.
	Share float64
}

// PurgeResult counts what Purge deleted (or, DryRun, would delete).
type PurgeResult struct {
	Runs int
	// Kept counts the runs that finished before the bound and were kept
	// because they have a dead step.
	Kept                                               int
	Steps, Attempts, EventLinks, Events, ScheduleTicks int
	// Actions counts the operator actions deleted with their runs.
	Actions int
	// Batches is the number of batches (transactions).
	Batches int
}

func (r *PurgeResult) add(b persistence.RunDeleteFinishedResult) {
	r.Batches++
	r.Runs += len(b.RunIDs)
	r.Kept += b.Kept
	r.Steps += b.Steps
	r.Attempts += b.Attempts
	r.EventLinks += b.EventLinks
	r.Events += b.Events
	r.ScheduleTicks += b.ScheduleTicks
	r.Actions += b.Actions
}

// Purge deletes every run that finished before p.Before (and the rows
// kept by run), in batches of Config.Retention.Batch with a pause
// between them (Config.Retention.Pause and Share), holding the store's
// retention lease: while another node holds it, Purge returns ErrPurgeBusy at once.
// Runs with a dead step are kept (PurgeResult.Kept). It works on an
// engine that was not started (the CLI's `runs purge`); the engine's
// retention loop calls it every Retention.Interval with the time Keep
// ago. Each batch is committed on its own: an error or a cancelled ctx
// ends the sweep with what was deleted so far counted.
func (e *Engine) Purge(ctx context.Context, p PurgeParams) (PurgeResult, error) {
	var res PurgeResult
	if e.stopped() {
		return res, ErrStopped
	}
	if p.Before.IsZero() {
		return res, errors.New("engine: Purge: Before is required (runs that finished before it are deleted)")
	}
	rc := e.cfg.Retention
	if p.Share != 0 {
		if !(p.Share > 0 && p.Share <= 1) {
			return res, fmt.Errorf("engine: Purge: Share %v must be above 0 and at most 1", p.Share)
		}
		rc.Share = p.Share
	}
	lease := persistence.LeaseParams{Name: retentionLeaseName, Holder: e.cfg.NodeID}
	hold := func() error {
		lease.Now = e.clock.Now()
		lease.Until = lease.Now.Add(retentionLease)
		ok, err := e.store.LeaseAcquire(ctx, lease)
		if err != nil {
			return err
		}
		if !ok {
			return ErrPurgeBusy
		}
		return nil
	}
	if !p.DryRun {
		if err := hold(); err != nil {
			return res, err
		}
		defer func() {
			// Let the next sweep start at once, on any node.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := e.store.LeaseRelease(rctx, lease); err != nil {
				e.log.Warn("retention: releasing the lease failed; it expires by itself", "err", err, "expires", lease.Until)
			}
		}()
	}
	cursor := ""
	for {
		began := time.Now()
		b, err := e.store.RunDeleteFinished(ctx, persistence.RunDeleteFinishedParams{
			Before: p.Before, Limit: rc.Batch, Cursor: cursor, DryRun: p.DryRun,
		})
		if err != nil {
			return res, err
		}
		res.add(b)
		if p.OnBatch != nil {
			p.OnBatch(b)
		}
		if b.NextCursor == "" {
			return res, nil
		}
		cursor = b.NextCursor
		if wait := sweepPause(rc, time.Since(began)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return res, ctx.Err()
			case <-t.C:
			}
		}
		if !p.DryRun {
			// Still ours? A node that stalled past the lease stops:
			// another may be sweeping now.
			if err := hold(); err != nil {
				return res, err
			}
		}
	}
}

// retentionPass is the retention loop's turn, every Retention.Interval: a
// sweep (Purge of the runs that finished more than Keep ago); the node
// that gets the lease sweeps, the others skip their turn.
func (e *Engine) retentionPass(ctx context.Context) {
	if e.clockSkewed() {
		// A clock that is off would delete by a wrong bound and hold
		// leases by a wrong clock.
		return
	}
	e.sweepRetention(ctx)
}

// sweepRetention runs one sweep of the retention loop and logs what it did.
func (e *Engine) sweepRetention(ctx context.Context) {
	before := e.clock.Now().Add(-e.cfg.Retention.Keep)
	start := time.Now()
	res, err := e.Purge(ctx, PurgeParams{Before: before})
	switch {
	case errors.Is(err, ErrPurgeBusy):
		e.log.Debug("retention: another node is sweeping")
		return
	case err != nil && ctx.Err() == nil:
		e.log.Warn("retention: sweep failed", "err", err, "runs_deleted", res.Runs)
		return
	}
	if res.Runs > 0 || res.Kept > 0 {
		e.log.Info("retention: finished runs deleted", "before", before, "runs", res.Runs, "steps", res.Steps,
			"attempts", res.Attempts, "events", res.Events, "kept_dead_lettered", res.Kept, "batches", res.Batches,
			"took", time.Since(start).Round(time.Millisecond))
	}
}

// sweepPause is the wait after a batch that took took: Pause, or longer
// when Share asks for it.
func sweepPause(rc Retention, took time.Duration) time.Duration {
	wait := time.Duration(float64(took) * (1 - rc.Share) / rc.Share)
	return max(wait, rc.Pause)
}

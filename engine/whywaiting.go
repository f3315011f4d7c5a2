package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/persistence"
)

// WaitReason names why a step is not running.
type WaitReason string

// Why a step is not running, as WhyWaiting tells it.
const (
	// WaitNone: the step is not waiting; it finished, failed or was
	// cancelled (or its run did).
	WaitNone WaitReason = "none"
	// WaitRunPending: the run has not started; it starts at DueAt.
	WaitRunPending WaitReason = "run_pending"
	// WaitDependencies: the steps in Pending have not finished.
	WaitDependencies WaitReason = "dependencies"
	// WaitQueued: the step is in the queue since Since, and a live node
	// that can run it (Nodes) will take it.
	WaitQueued WaitReason = "queued"
	// WaitRetry: the step failed and its next attempt is due at DueAt.
	WaitRetry WaitReason = "retry"
	// WaitNoNode: the step is due but no live node can run it: none has
	// its workflow and step registered and works its queue. It waits,
	// using no attempts, until one starts.
	WaitNoNode WaitReason = "no_node"
	// WaitLimited: the step is queued for live nodes that can run it,
	// but its queue is at its concurrency limit or paced by its rate
	// limit (Config.QueueLimits); it starts when a slot frees or its
	// turn comes, using no attempts meanwhile.
	WaitLimited WaitReason = "limited"
	// WaitRunning: the step (or its compensation) is running; the
	// worker's lease ends at DueAt unless renewed.
	WaitRunning WaitReason = "running"
	// WaitParked: a wait or sleep step is parked until its event, its
	// signal or its time (DueAt: a sleep's wake-up, a wait's timeout).
	WaitParked WaitReason = "parked"
)

// StepWait says why a step is not running (WhyWaiting).
type StepWait struct {
	RunID    string
	Workflow string
	Step     string
	Queue    string
	Status   persistence.StepStatus
	Reason   WaitReason
	// Detail says the same in a sentence for people.
	Detail string
	// Pending lists the unfinished dependencies (WaitDependencies).
	Pending []string
	// Since is when the step was queued (WaitQueued, WaitNoNode).
	Since time.Time
	// DueAt is the run's start (WaitRunPending), the retry's due time
	// (WaitRetry) or the lease's end (WaitRunning).
	DueAt time.Time
	// Nodes are the live nodes that can run the step.
	Nodes []string
}

// WhyWaiting says why a step of a run is not running: its run has not
// started, its dependencies have not finished, its retry is not due, it
// is queued for a live node that can run it (or its queue is at its limit,
// Config.QueueLimits), or no live node can (see
// the node registry: Nodes). It reads the store only, so any node —
// even one that runs no steps — can answer it.
func (e *Engine) WhyWaiting(ctx context.Context, runID, step string) (StepWait, error) {
	run, err := e.store.RunGet(ctx, runID)
	if err != nil {
		return StepWait{}, err
	}
	sts, err := e.store.StepList(ctx, runID)
	if err != nil {
		return StepWait{}, err
	}
	status := make(map[string]persistence.StepStatus, len(sts))
	var s *persistence.StepRun
	for i := range sts {
		status[sts[i].Step] = sts[i].Status
		if sts[i].Step == step {
			s = &sts[i]
		}
	}
	if s == nil {
		return StepWait{}, fmt.Errorf("%w: run %s has no step %q", persistence.ErrStepNotFound, runID, step)
	}
	w := StepWait{RunID: runID, Workflow: run.Workflow, Step: step, Queue: s.Queue, Status: s.Status}
	switch {
	case run.Status == persistence.RunPending:
		w.Reason, w.DueAt = WaitRunPending, run.StartAt
		w.Detail = "the run starts at " + stamp(run.StartAt)
		return w, nil
	case run.Status.Terminal() && s.Status != persistence.StepCompensating:
		w.Reason, w.Detail = WaitNone, fmt.Sprintf("the step is %s and its run %s", s.Status, run.Status)
		return w, nil
	}
	switch s.Status {
	case persistence.StepWaiting:
		whyDependencies(&w, s, status)
		return w, nil
	case persistence.StepRunning:
		w.Reason, w.DueAt = WaitRunning, deref(s.LeaseExpiresAt)
		w.Detail = "running; the worker's lease ends at " + stamp(w.DueAt) + " unless renewed"
		return w, nil
	case persistence.StepCompensating:
		if s.LeaseExpiresAt != nil {
			w.Reason, w.DueAt = WaitRunning, *s.LeaseExpiresAt
			w.Detail = "compensating; the worker's lease ends at " + stamp(w.DueAt) + " unless renewed"
			return w, nil
		}
	case persistence.StepParked:
		return e.whyParked(ctx, w, s)
	case persistence.StepQueued, persistence.StepRetrying:
	default:
		w.Reason, w.Detail = WaitNone, "the step is "+string(s.Status)
		return w, nil
	}
	return e.whyDue(ctx, w, s)
}

// whyDependencies finishes WhyWaiting for a step that waits for its
// dependencies: the unfinished ones, with their statuses.
func whyDependencies(w *StepWait, s *persistence.StepRun, status map[string]persistence.StepStatus) {
	for _, d := range s.Deps {
		if !status[d].Done() {
			w.Pending = append(w.Pending, d)
		}
	}
	parts := make([]string, len(w.Pending))
	for i, d := range w.Pending {
		parts[i] = fmt.Sprintf("%s (%s)", d, status[d])
	}
	w.Reason, w.Detail = WaitDependencies, "waiting for "+strings.Join(parts, ", ")
}

// whyParked finishes WhyWaiting for a parked wait or sleep step: what it
// waits for, and until when.
func (e *Engine) whyParked(ctx context.Context, w StepWait, s *persistence.StepRun) (StepWait, error) {
	pw, err := e.store.StepWaitGet(ctx, s.RunID, s.Step)
	if err != nil {
		return w, err
	}
	w.Reason, w.DueAt = WaitParked, deref(pw.DueAt)
	switch pw.Kind {
	case persistence.WaitSleep:
		w.Detail = "sleeping until " + stamp(w.DueAt)
	case persistence.WaitEvent:
		what := "correlation"
		if _, hashed := e.cfg.Codec.(codec.Hasher); hashed {
			what = "correlation hash" // the value is not stored
		}
		w.Detail = fmt.Sprintf("waiting for event %q with %s %q (or a signal)", pw.Event, what, pw.Correlation)
	default:
		w.Detail = "waiting for a signal"
	}
	if pw.Kind != persistence.WaitSleep && pw.DueAt != nil {
		w.Detail += "; times out at " + stamp(w.DueAt)
	}
	return w, nil
}

// whyDue finishes WhyWaiting for a step that waits for a worker: which
// live nodes can run it, and when it is due.
func (e *Engine) whyDue(ctx context.Context, w StepWait, s *persistence.StepRun) (StepWait, error) {
	nodes, err := e.Nodes(ctx)
	if err != nil {
		return w, err
	}
	for _, n := range nodes {
		if n.Runs(w.Workflow, w.Step, w.Queue) {
			w.Nodes = append(w.Nodes, n.ID)
		}
	}
	w.Since = deref(s.QueuedAt)
	if len(w.Nodes) == 0 {
		w.Reason = WaitNoNode
		w.Detail = fmt.Sprintf("no live node can run it: none of the %d live node(s) has workflow %q step %q registered and works queue %q",
			len(nodes), w.Workflow, w.Step, w.Queue)
		return w, nil
	}
	if s.NextAttemptAt != nil && (s.Status == persistence.StepRetrying || s.NextAttemptAt.After(e.clock.Now())) {
		w.Reason, w.DueAt = WaitRetry, *s.NextAttemptAt
		w.Detail = fmt.Sprintf("attempt %d failed; the next is due at %s", s.Attempt, stamp(w.DueAt))
		return w, nil
	}
	w.Reason = WaitQueued
	w.Detail = fmt.Sprintf("queued since %s for %d live node(s) that can run it", stamp(w.Since), len(w.Nodes))
	e.whyLimited(ctx, &w)
	return w, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "(unknown)"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

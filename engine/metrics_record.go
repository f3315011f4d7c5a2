package engine

import (
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// What the engine records as it goes. The hot path's calls look their
// children up (made once: metrics.go) and resolve no label; the schedule
// and reconciler metrics, off the hot path, resolve theirs per call.

// started records the slot pool of a started node with workers.
func (m *metrics) started(p *slotPool) {
	if m == nil || p == nil {
		return
	}
	m.slots.Store(p)
}

// runStarted counts a run a Trigger created.
func (m *metrics) runStarted(workflow string) {
	if m == nil {
		return
	}
	m.run(workflow).started.Inc()
}

// runFinished counts a run this node moved to a terminal status, with
// its duration from its start (its creation, if it never started) to
// end (now, if the store did not say).
func (m *metrics) runFinished(run persistence.Run, status persistence.RunStatus, now time.Time) {
	if m == nil || run.Workflow == "" {
		return // a store that did not return the run: no label to count it under
	}
	c := m.run(run.Workflow)
	fin, ok := c.finished[status]
	if !ok {
		return
	}
	fin.Inc()
	start := run.CreatedAt
	if run.StartedAt != nil {
		start = *run.StartedAt
	}
	end := now
	if run.FinishedAt != nil {
		end = *run.FinishedAt
	}
	if !start.IsZero() && !end.Before(start) {
		c.duration[status].Observe(end.Sub(start).Seconds())
	}
}

// stepStarted observes how long a step's first attempt waited from
// queued to its handler's start. A retry's wait (from the end of its
// backoff) is not in the claim, so it is not observed.
func (m *metrics) stepStarted(s persistence.StepRun, now time.Time) {
	if m == nil || s.Attempt != 1 || s.QueuedAt == nil {
		return
	}
	if d := now.Sub(*s.QueuedAt); d >= 0 {
		m.queue(s.Queue).Observe(d.Seconds())
	}
}

// stepRan observes how long a step's handler ran.
func (m *metrics) stepRan(workflow, step string, d time.Duration) {
	if m == nil {
		return
	}
	m.step(workflow, step).duration.Observe(d.Seconds())
}

// stepFinished counts a step that ended with status (one of the
// metric* step statuses).
func (m *metrics) stepFinished(workflow, step, status string) {
	if m == nil {
		return
	}
	c := m.step(workflow, step)
	switch status {
	case metricSucceeded:
		c.succeeded.Inc()
	case metricSkipped:
		c.skipped.Inc()
	case metricDead:
		c.dead.Inc()
	case metricCancelled:
		c.cancelled.Inc()
	}
}

// stepRetried counts a failed attempt scheduled for a retry.
func (m *metrics) stepRetried(workflow, step string) {
	if m == nil {
		return
	}
	m.step(workflow, step).retries.Inc()
}

// compensationEnded counts a compensation that succeeded, or
// dead-lettered (ok false).
func (m *metrics) compensationEnded(workflow string, ok bool) {
	if m == nil {
		return
	}
	c := m.run(workflow)
	if ok {
		c.compensated.Inc()
	} else {
		c.compensationsFailed.Inc()
	}
}

// scheduleFired records the lag of a tick whose run this node created.
func (m *metrics) scheduleFired(schedule string, tick, now time.Time) {
	if m == nil {
		return
	}
	m.scheduleLag.WithLabelValues(schedule).Set(max(0, now.Sub(tick).Seconds()))
}

// scheduleMissedTicks counts ticks a pass dropped; n = 0 only makes the
// series exist at 0 before its first miss.
func (m *metrics) scheduleMissedTicks(schedule string, n int) {
	if m == nil {
		return
	}
	m.scheduleMissed.WithLabelValues(schedule).Add(float64(n))
}

// reconciled counts tasks the reconciler put back, by reason.
func (m *metrics) reconciled(reason string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.requeued.WithLabelValues(reason).Add(float64(n))
}

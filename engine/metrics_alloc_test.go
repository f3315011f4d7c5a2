package engine

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dagflow/dagflow/persistence"
)

// The hot path's metric calls allocate nothing once a step's children
// are made: no label is resolved per event.
func TestMetricsHotPathAllocatesNothing(t *testing.T) {
	m, err := newMetrics(&Engine{}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)
	queued := now.Add(-time.Second)
	started := now.Add(-2 * time.Second)
	s := persistence.StepRun{Step: "ship", Queue: "default", Attempt: 1, QueuedAt: &queued}
	run := persistence.Run{Workflow: "order", StartedAt: &started}
	m.step("order", "ship") // made once, as Register does
	m.run("order")
	m.queue("default")
	allocs := testing.AllocsPerRun(1000, func() {
		m.stepStarted(s, now)
		m.stepRan("order", "ship", time.Millisecond)
		m.stepFinished("order", "ship", metricSucceeded)
		m.stepRetried("order", "ship")
		m.runStarted("order")
		m.runFinished(run, persistence.RunSucceeded, now)
		m.compensationEnded("order", true)
	})
	if allocs != 0 {
		t.Errorf("a step's metric calls allocate %v times, want 0", allocs)
	}
}

package faults

import (
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Scenario 1: a worker is SIGKILLed after its handler made the effect and
// before the completion was recorded. Another worker runs the step again
// (with the same idempotency key, so the effect is made once), and the run
// succeeds.
func TestCrashMidStep(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	c.start(2, nil)
	id := c.trigger(wfChain, plan{N: 1, Hold: map[string][]int{"b": {1}}})
	ev := c.waitEvent(30*time.Second, "hold", id, "b", "step", "1")
	ev.Worker.kill(t)
	killed := time.Now()
	waitStatus(t, c, id, "b", persistence.StepSucceeded, 30*time.Second)
	logRecovery(t, "crash mid-step: kill -> step succeeded elsewhere", time.Since(killed))
	runs := checkInvariants(t, c, []string{id}, 30*time.Second)
	if got := runs[id].Status; got != persistence.RunSucceeded {
		t.Fatalf("run %s: %s, want succeeded (%s)", id, got, runs[id].Error)
	}
	effs := c.effects(id)
	if e := effs["b/do"]; e.Deliveries != 2 {
		t.Errorf("b's effect was requested %d times, want 2 (the killed attempt and the retry, deduped by key)", e.Deliveries)
	}
	if n := c.invocations(id, "b", effectDo); n != 2 {
		t.Errorf("b ran %d times, want 2", n)
	}
	for _, s := range []string{"c", "d"} {
		if n := c.invocations(id, s, effectDo); n != 1 {
			t.Errorf("successor %s ran %d times, want 1", s, n)
		}
	}
}

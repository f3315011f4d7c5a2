package faults

import (
	"context"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// TestChildSurvivesWorkerKill: every worker is SIGKILLed while a parent
// run's child step is parked and its child runs a step; after the
// respawn there is still exactly one child run, it finishes with each
// step and effect once (checkInvariants), and the parent step completes
// with the child's output.
func TestChildSurvivesWorkerKill(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	ws := c.start(2, nil)
	ctx := context.Background()
	id := c.trigger(wfParent, plan{SleepMS: map[string]int{"k1": 1500}})
	deadline := time.Now().Add(30 * time.Second)
	var child string
	for child == "" {
		if time.Now().After(deadline) {
			t.Fatalf("run %s: no child started and running: sub is %s", id, c.stepStatus(id, "sub"))
		}
		if c.stepStatus(id, "sub") == persistence.StepParked {
			cs, err := c.store.RunChildren(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) == 1 && c.stepStatus(cs[0].ID, "k1") == persistence.StepRunning {
				child = cs[0].ID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, w := range ws {
		w.kill(t)
	}
	killed := time.Now()
	c.start(2, nil)
	runs := checkInvariants(t, c, []string{child}, 60*time.Second)
	assertAllSucceeded(t, runs)
	parent := c.waitRuns([]string{id}, 60*time.Second)[id]
	logRecovery(t, "every worker killed while a parent step was parked and its child ran -> both finished", time.Since(killed))
	if parent.Status != persistence.RunSucceeded {
		t.Errorf("parent run %s is %s, want succeeded", id, parent.Status)
	}
	cs, err := c.store.RunChildren(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].ID != child {
		t.Errorf("parent %s has %d child runs (%+v), want exactly %s", id, len(cs), cs, child)
	}
	sub, err := c.store.StepGet(ctx, id, "sub")
	if err != nil {
		t.Fatal(err)
	}
	if sub.Status != persistence.StepSucceeded || len(sub.Output) == 0 {
		t.Errorf("parent step sub is %s with output %s, want succeeded with the child's output", sub.Status, sub.Output)
	}
}

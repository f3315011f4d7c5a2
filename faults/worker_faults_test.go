package faults

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// Scenario 2: a worker is frozen (SIGSTOP) past its lease while its
// handler runs; another worker takes the step over and completes it; the
// frozen worker is thawed (SIGCONT) and returns success, which the fence
// refuses and counts. Successors run once.
func TestZombieWorker(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	c.start(2, nil)
	id := c.trigger(wfChain, plan{N: 2, Hold: map[string][]int{"b": {1}}, HoldSleep: true, HoldSleepMS: 200})
	ev := c.waitEvent(30*time.Second, "hold", id, "b", "step", "1")
	zombie := ev.Worker
	zombie.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	waitStatus(t, c, id, "b", persistence.StepSucceeded, 30*time.Second)
	logRecovery(t, "zombie: SIGSTOP -> step taken over and succeeded", time.Since(stopped))
	c.waitRuns([]string{id}, 30*time.Second)
	zombie.signal(t, syscall.SIGCONT)
	stats := c.stop(zombie, 30*time.Second)
	if stats.StaleCompletions < 1 {
		t.Errorf("zombie's StaleCompletions = %d, want >= 1 (stats %+v)", stats.StaleCompletions, stats)
	}
	log, _ := os.ReadFile(zombie.log)
	refused := strings.Contains(string(log), "stale completion refused")
	t.Logf("zombie stats %+v; completion refused by StepComplete's fence: %v (else by the heartbeat's)", stats, refused)
	runs := checkInvariants(t, c, []string{id}, 30*time.Second)
	if got := runs[id].Status; got != persistence.RunSucceeded {
		t.Fatalf("run %s: %s, want succeeded (%s)", id, got, runs[id].Error)
	}
	for _, s := range []string{"c", "d"} {
		if n := c.invocations(id, s, effectDo); n != 1 {
			t.Errorf("successor %s ran %d times, want 1", s, n)
		}
	}
	info, err := c.eng.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := successes(info, "b"); got != 1 {
		t.Errorf("b: %d successes recorded, want 1", got)
	}
}

// Scenario 7: a handler that panics on its input is dead-lettered after
// its attempts, with an error that names the step, the attempt and the
// panic; the workers survive (same pids); the completed step is
// compensated once.
func TestPoisonStep(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	ws := c.start(2, nil)
	id := c.trigger(wfChain, plan{N: 7, Panic: []string{"b"}})
	runs := checkInvariants(t, c, []string{id}, 30*time.Second)
	run := runs[id]
	if run.Status != persistence.RunCompensated {
		t.Fatalf("run %s: %s, want compensated (%s)", id, run.Status, run.Error)
	}
	for _, want := range []string{`step "b"`, "3 attempt", "panic", "poison input n=7"} {
		if !strings.Contains(run.Error, want) {
			t.Errorf("run error %q does not name %q", run.Error, want)
		}
	}
	b, err := c.store.StepGet(t.Context(), id, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != persistence.StepDead || b.Attempt != 3 || !strings.Contains(b.Error, "poison input n=7") {
		t.Errorf("step b: %s after %d attempts, error %q; want dead after 3 with the panic", b.Status, b.Attempt, firstLine(b.Error))
	}
	for _, w := range ws {
		if !w.alive() {
			t.Errorf("worker %s (pid %d) exited: %v", w.name, w.pid, w.err)
		}
	}
	if n := c.invocations(id, "b", effectDo); n != 3 {
		t.Errorf("b ran %d times, want 3", n)
	}
	if n := c.invocations(id, "a", effectUndo); n != 1 {
		t.Errorf("a's compensation ran %d times, want 1", n)
	}
	if n := c.invocations(id, "b", effectUndo); n != 0 {
		t.Errorf("b's compensation ran %d times, want 0 (b never succeeded)", n)
	}
}

// Scenario 8: a step that SIGKILLs its worker on every delivery is
// dead-lettered after the delivery limit (3 here) instead of looping
// until its 50 attempts run out; its run compensates.
func TestTaskKillsEveryWorker(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	c.setRespawn(true)
	c.start(2, nil)
	id := c.trigger(wfCrashy, plan{N: 8, Kill: []string{"k2"}})
	start := time.Now()
	runs := checkInvariants(t, c, []string{id}, 90*time.Second)
	logRecovery(t, "task kills every worker: trigger -> dead-lettered and compensated", time.Since(start))
	run := runs[id]
	if run.Status != persistence.RunCompensated {
		t.Fatalf("run %s: %s, want compensated (%s)", id, run.Status, run.Error)
	}
	k2, err := c.store.StepGet(t.Context(), id, "k2")
	if err != nil {
		t.Fatal(err)
	}
	if k2.Status != persistence.StepDead || !strings.Contains(k2.Error, "delivery limit") {
		t.Errorf("k2: %s, error %q; want dead by the delivery limit", k2.Status, firstLine(k2.Error))
	}
	if n := c.invocations(id, "k2", effectDo); n > c.base.DeliveryLimit {
		t.Errorf("k2 ran %d times, want at most the delivery limit %d", n, c.base.DeliveryLimit)
	}
	if n := c.invocations(id, "k1", effectUndo); n != 1 {
		t.Errorf("k1's compensation ran %d times, want 1", n)
	}
}

// Scenario 9: the worker running the 2nd of 3 compensations (c, b, a) is
// SIGKILLed after the undo effect; the compensation resumes on another
// worker and every undo effect is made once.
func TestCrashDuringCompensation(t *testing.T) {
	c := newCluster(t, clusterOptions{})
	c.start(2, nil)
	id := c.trigger(wfChain, plan{N: 9, Fail: []string{"d"}, CompHold: map[string][]int{"b": {1}}})
	ev := c.waitEvent(30*time.Second, "hold", id, "b", "compensation", "1")
	ev.Worker.kill(t)
	killed := time.Now()
	waitStatus(t, c, id, "b", persistence.StepCompensated, 30*time.Second)
	logRecovery(t, "crash during compensation: kill -> compensation done elsewhere", time.Since(killed))
	runs := checkInvariants(t, c, []string{id}, 30*time.Second)
	if got := runs[id].Status; got != persistence.RunCompensated {
		t.Fatalf("run %s: %s, want compensated (%s)", id, got, runs[id].Error)
	}
	effs := c.effects(id)
	for _, s := range []string{"a", "b", "c"} {
		if _, ok := effs[s+"/"+effectUndo]; !ok {
			t.Errorf("no undo effect for %s", s)
		}
	}
	if e := effs["b/undo"]; e.Deliveries != 2 {
		t.Errorf("b's undo was requested %d times, want 2 (killed attempt + resumed one, deduped by key)", e.Deliveries)
	}
	for s, want := range map[string]int{"a": 1, "b": 2, "c": 1} {
		if n := c.invocations(id, s, effectUndo); n != want {
			t.Errorf("%s's compensation ran %d times, want %d", s, n, want)
		}
	}
}

// Scenario 10: SIGTERM while a step runs. Either the step finishes within
// the shutdown deadline, or its lease is released and another worker
// claims it at once, not after the lease (20s here) expires.
func TestGracefulStop(t *testing.T) {
	const lease = 20 * time.Second
	cfg := func(c *childConfig) { c.Lease = lease; c.Heartbeat = 2 * time.Second }
	t.Run("finishes within deadline", func(t *testing.T) {
		c := newCluster(t, clusterOptions{Configure: cfg})
		ws := c.start(2, nil)
		id := c.trigger(wfChain, plan{N: 10, SleepMS: map[string]int{"b": 1000}})
		var pid int
		testenv.Eventually(t, 30*time.Second, func() bool {
			c.db.QueryRow(`SELECT pid FROM invocations WHERE run_id = ? AND step = 'b'`, id).Scan(&pid)
			return pid != 0
		}, "b started")
		w := byPid(ws, pid)
		start := time.Now()
		stats := c.stop(w, 15*time.Second)
		t.Logf("stopped in %v with %+v", time.Since(start), stats)
		runs := checkInvariants(t, c, []string{id}, 30*time.Second)
		if got := runs[id].Status; got != persistence.RunSucceeded {
			t.Fatalf("run %s: %s, want succeeded", id, got)
		}
		if n := c.invocations(id, "b", effectDo); n != 1 {
			t.Errorf("b ran %d times, want 1 (it finished during the graceful stop)", n)
		}
	})
	t.Run("released past deadline", func(t *testing.T) {
		c := newCluster(t, clusterOptions{Configure: func(c *childConfig) { cfg(c); c.Shutdown = 300 * time.Millisecond }})
		c.start(2, nil)
		id := c.trigger(wfChain, plan{N: 10, Hold: map[string][]int{"b": {1}}})
		ev := c.waitEvent(30*time.Second, "hold", id, "b", "step", "1")
		start := time.Now()
		c.stop(ev.Worker, 15*time.Second)
		waitStatus(t, c, id, "b", persistence.StepSucceeded, lease/2)
		took := time.Since(start)
		logRecovery(t, "SIGTERM past the shutdown deadline -> step succeeded elsewhere", took)
		runs := checkInvariants(t, c, []string{id}, 30*time.Second)
		if got := runs[id].Status; got != persistence.RunSucceeded {
			t.Fatalf("run %s: %s, want succeeded", id, got)
		}
		if took > 5*time.Second {
			t.Errorf("handover took %v with a %v lease: the lease was not released", took, lease)
		}
	})
}

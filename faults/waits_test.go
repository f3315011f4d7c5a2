package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// maxWakeLateness bounds how long after its due time a sleep may end
// (the acceptance's tolerance; the timers of the live nodes read the due
// waits every ReconcileInterval, 300 ms here).
const maxWakeLateness = 5 * time.Second

// TestParkedSurviveFlushAndKill: runs of wfParked sleep (Sleep and
// SleepUntil), wait for a correlated event and wait for a signal on three
// worker processes; with the first runs parked and more just triggered,
// the test FLUSHALLs its own Redis and SIGKILLs the worker that parked
// the most, and delivers the events and signals partly before and partly
// after (some events before their run reaches its wait). Every run
// finishes; no sleep ends before its time and none more than
// maxWakeLateness after it (the lateness distribution is logged); each
// wait got its own order's event and signal, never a decoy's; the steps
// after the waits ran once (or, for one the kill interrupted, once more
// elsewhere); and a run whose event never comes (wfParkedShort) times out
// twice, is dead-lettered and compensates. The invariants hold.
func TestParkedSurviveFlushAndKill(t *testing.T) {
	srv := testenv.StartRedis(t) // private: the shared Redis is never flushed
	c := newCluster(t, clusterOptions{Redis: srv.Addr})
	ws := c.start(3, nil)
	ctx := context.Background()
	dues := c.watchDues(t)

	trigger := func(wf string, n int, order string, wakeIn time.Duration) parkedRun {
		wake := time.Now().Add(wakeIn).UTC()
		id := c.trigger(wf, plan{N: n, Order: order, WakeAt: wake.Format(time.RFC3339Nano)})
		return parkedRun{id: id, order: order, wake: wake}
	}
	const first, second = 20, 10
	var runs []parkedRun
	started := time.Now()
	for i := range first {
		runs = append(runs, trigger(wfParked, i, fmt.Sprintf("o-%d", i), 4*time.Second+time.Duration(i%5)*500*time.Millisecond))
	}
	late := trigger(wfParkedShort, -1, "never", 4*time.Second) // its event never comes
	for _, r := range runs {
		for _, s := range []string{"paid", "approve"} {
			waitStatus(t, c, r.id, s, persistence.StepParked, 30*time.Second)
		}
	}

	publish := func(name, corr string, payload any) {
		if _, err := c.eng.Publish(ctx, name, payload, engine.Correlation(corr)); err != nil {
			t.Errorf("publish %s %s: %v", name, corr, err)
		}
	}
	pay := func(r parkedRun) { publish(evPaid, r.order, map[string]any{"order": r.order}) }
	signal := func(r parkedRun) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := c.eng.Signal(ctx, r.id, "approve", map[string]any{"by": r.order})
			if err == nil {
				return
			}
			// Not parked yet: its run has not reached the step.
			if !errors.Is(err, engine.ErrNotWaiting) || time.Now().After(deadline) {
				t.Errorf("signal run %s (%s): %v", r.id, r.order, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Before the fault: half the events, a quarter of the signals.
	inParallel(first, func(i int) {
		if i%2 == 0 {
			pay(runs[i])
		}
		if i%4 == 0 {
			signal(runs[i])
		}
	})
	// More runs, whose first steps the victim may just have claimed.
	for i := range second {
		runs = append(runs, trigger(wfParked, first+i, fmt.Sprintf("o-%d", first+i), 5*time.Second+time.Duration(i%3)*500*time.Millisecond))
	}
	victim := c.busiestParker(t, ws, runs[:first])
	if err := c.rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("flushall on the private redis: %v", err)
	}
	victim.kill(t)
	killed := time.Now()
	t.Logf("FLUSHALL and SIGKILL of %s %v after the first trigger", victim.name, killed.Sub(started).Round(time.Millisecond))
	// After the fault: the second batch's events first (their runs may not
	// have reached the wait: matched when they park), then the rest, and
	// decoys: near misses of real orders, and the right order under
	// another event name. None may complete a wait.
	inParallel(second, func(i int) { pay(runs[first+i]) })
	inParallel(first, func(i int) {
		if i%2 != 0 {
			pay(runs[i])
		}
	})
	inParallel(first+second, func(i int) {
		if i%3 == 0 {
			publish(evPaid, fmt.Sprintf("O-%d", i), map[string]any{"order": "decoy"})
			publish(evPaid, fmt.Sprintf("o-%d-x", i), map[string]any{"order": "decoy"})
			publish("fault.refunded", fmt.Sprintf("o-%d", i), map[string]any{"order": "decoy"})
		}
	})
	inParallel(len(runs), func(i int) {
		if i >= first || i%4 != 0 {
			signal(runs[i])
		}
	})
	t.Logf("every event and signal delivered %v after the kill", time.Since(killed).Round(time.Millisecond))

	ids := []string{late.id}
	for _, r := range runs {
		ids = append(ids, r.id)
	}
	final := checkInvariants(t, c, ids, 60*time.Second)
	logRecovery(t, fmt.Sprintf("%d parked runs, redis FLUSHALL and worker %s SIGKILLed -> all runs finished", len(ids), victim.name), time.Since(killed))

	var lateness []time.Duration
	retried, interrupted := 0, 0
	seen := dues()
	for _, r := range runs {
		if got := final[r.id].Status; got != persistence.RunSucceeded {
			t.Errorf("run %s (%s): %s (%s), want succeeded", r.id, r.order, got, final[r.id].Error)
			c.logHistory(t, r.id)
			continue
		}
		info, err := c.eng.Get(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range info.Steps {
			var due time.Time
			switch s.Step {
			case "nap", "alarm":
				if d := seen[r.id+"/"+s.Step]; len(d) > 0 {
					due = d[0]
				} else if s.Step == "alarm" {
					due = r.wake // woken at once when it parked: never seen parked
				} else if s.StartedAt != nil {
					due = s.StartedAt.Add(parkedNap) // it parked a moment after its claim
				}
				if s.FinishedAt == nil || due.IsZero() {
					t.Errorf("run %s: sleep %s finished at %v, due %v", r.id, s.Step, s.FinishedAt, due)
					continue
				}
				d := s.FinishedAt.Sub(due)
				lateness = append(lateness, d)
				if d < 0 {
					t.Errorf("run %s: sleep %s ended at %v, %v before its time %v", r.id, s.Step, s.FinishedAt.Format(time.RFC3339Nano), -d, due.Format(time.RFC3339Nano))
				} else if d > maxWakeLateness {
					t.Errorf("run %s: sleep %s ended %v after its time, want at most %v", r.id, s.Step, d, maxWakeLateness)
				}
			case "paid":
				checkOutput(t, r.id, s, map[string]any{"order": r.order})
				if s.Attempt > 1 {
					retried++ // the killed worker held its claim
				}
			case "approve":
				checkOutput(t, r.id, s, map[string]any{"by": r.order})
			}
		}
		for _, s := range []string{"ship", "done"} {
			var byVictim int
			invs := 0
			for _, inv := range c.invocationList(r.id) {
				if inv.Step == s && inv.Kind == effectDo {
					invs++
					if inv.Pid == victim.pid {
						byVictim++
					}
				}
			}
			switch {
			case invs == 1:
			case invs == 2 && byVictim == 1:
				interrupted++ // the kill came while it ran: at least once
			default:
				t.Errorf("run %s: %s ran %d times (%d by the killed worker), want once", r.id, s, invs, byVictim)
			}
		}
	}
	logLateness(t, lateness)
	t.Logf("%d of %d waits claimed again (the killed worker held their claim); %d steps after the waits ran again after the kill interrupted them",
		retried, len(runs), interrupted)

	// The run whose event never came: timed out on both attempts, dead,
	// compensated, and nothing after the waits ran.
	if got := final[late.id].Status; got != persistence.RunCompensated {
		t.Errorf("run %s whose event never came: %s (%s), want compensated", late.id, got, final[late.id].Error)
		c.logHistory(t, late.id)
	}
	info, err := c.eng.Get(ctx, late.id)
	if err != nil {
		t.Fatal(err)
	}
	paid := stepOfInfo(info, "paid")
	if paid.Status != persistence.StepDead || paid.Attempt != 2 {
		t.Errorf("run %s: paid %s after %d attempts, want dead after 2 timeouts", late.id, paid.Status, paid.Attempt)
	}
	if d := seen[late.id+"/paid"]; len(d) == 0 || paid.FinishedAt == nil || paid.FinishedAt.Before(d[0].Add(parkedShortTimeout)) {
		t.Errorf("run %s: paid dead at %v, want at least one timeout (%v) after its first deadline %v", late.id, paid.FinishedAt, parkedShortTimeout, d)
	} else {
		t.Logf("the wait that never got its event: first deadline %v, dead %v after it (a retry and a second timeout of %v)",
			d[0].Format(time.RFC3339Nano), paid.FinishedAt.Sub(d[0]).Round(time.Millisecond), parkedShortTimeout)
	}
	if a := stepOfInfo(info, "a"); a.Status != persistence.StepCompensated {
		t.Errorf("run %s: a is %s, want compensated", late.id, a.Status)
	}
	for _, s := range []string{"ship", "done"} {
		if n := c.invocations(late.id, s, effectDo); n != 0 {
			t.Errorf("run %s: %s ran %d times after a dead wait, want never", late.id, s, n)
		}
	}
}

// inParallel calls f(0..n-1) on up to 8 goroutines and waits for them.
func inParallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// parkedRun is one run of wfParked: its order (the correlation of its
// wait) and the time its alarm sleeps until.
type parkedRun struct {
	id, order string
	wake      time.Time
}

// watchDues polls the step_waits rows of the scenario's database and
// returns a function giving, per "<run>/<step>", the distinct due times
// seen, in order (a wait row lives only while its step is parked; the
// sleeps last seconds, the poll takes 50 ms).
func (c *cluster) watchDues(t *testing.T) func() map[string][]time.Time {
	var mu sync.Mutex
	seen := map[string][]time.Time{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			rows, err := c.db.Query(`SELECT run_id, step, due_at FROM step_waits WHERE due_at IS NOT NULL`)
			if err == nil {
				for rows.Next() {
					var run, step string
					var due time.Time
					if rows.Scan(&run, &step, &due) != nil {
						continue
					}
					k := run + "/" + step
					mu.Lock()
					if !slices.ContainsFunc(seen[k], due.Equal) {
						seen[k] = append(seen[k], due)
					}
					mu.Unlock()
				}
				rows.Close()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return func() map[string][]time.Time {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string][]time.Time, len(seen))
		for k, v := range seen {
			out[k] = slices.Clone(v)
		}
		return out
	}
}

// busiestParker returns the live worker that claimed the most of the
// runs' parked steps (by their attempts' worker, "<name>-<pid>").
func (c *cluster) busiestParker(t *testing.T, ws []*worker, runs []parkedRun) *worker {
	t.Helper()
	count := map[string]int{}
	for _, r := range runs {
		atts, err := c.store.AttemptList(context.Background(), r.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range atts {
			if a.Kind == persistence.AttemptForward && slices.Contains([]string{"nap", "alarm", "paid", "approve"}, a.Step) {
				count[a.Worker]++
			}
		}
	}
	var best *worker
	for _, w := range ws {
		if !w.alive() {
			continue
		}
		if best == nil || count[fmt.Sprintf("%s-%d", w.name, w.pid)] > count[fmt.Sprintf("%s-%d", best.name, best.pid)] {
			best = w
		}
	}
	t.Logf("parked steps' claims by worker: %v; killing %s", count, best.name)
	return best
}

// checkOutput compares a step's JSON output with want.
func checkOutput(t *testing.T, run string, s persistence.StepRun, want map[string]any) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(s.Output, &got); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("run %s: %s's output %s, want %v (its own order's)", run, s.Step, s.Output, want)
	}
}

func stepOfInfo(info engine.RunInfo, step string) persistence.StepRun {
	for _, s := range info.Steps {
		if s.Step == step {
			return s
		}
	}
	return persistence.StepRun{}
}

// logLateness logs the distribution of the sleeps' lateness.
func logLateness(t *testing.T, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[int(p*float64(len(ds)-1))].Round(time.Millisecond) }
	var b strings.Builder
	fmt.Fprintf(&b, "sleep lateness over %d sleeps: min %v, p50 %v, p90 %v, p99 %v, max %v", len(ds), q(0), q(0.5), q(0.9), q(0.99), q(1))
	t.Log(b.String())
}

// logHistory logs a run's steps and attempts.
func (c *cluster) logHistory(t *testing.T, run string) {
	t.Helper()
	info, err := c.eng.Get(context.Background(), run)
	if err != nil {
		t.Logf("history of run %s: %v", run, err)
		return
	}
	for _, s := range info.Steps {
		t.Logf("  step %s: %s attempt %d/%d finished %v", s.Step, s.Status, s.Attempt, s.MaxAttempts, s.FinishedAt)
	}
	for _, a := range info.Attempts {
		t.Logf("  attempt %s %s #%d by %s: %s %v..%v %s", a.Step, a.Kind, a.Attempt, a.Worker, a.Outcome,
			a.StartedAt.Format("15:04:05.000"), a.FinishedAt, firstLine(a.Error))
	}
}

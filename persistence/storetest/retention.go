package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// finishRun ends a run at `when`: its step a fails once (an attempt row)
// and the run is cancelled, which cancels the step.
func finishRun(t *testing.T, st persistence.Store, runID string, when time.Time) {
	t.Helper()
	c := ctx(t)
	claim(t, st, runID, "a", "f-"+runID[len(runID)-6:], when.Add(-time.Second))
	retry := when.Add(time.Hour)
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: runID, Step: "a", Fence: "f-" + runID[len(runID)-6:],
		Error: "flaky", RetryAt: &retry, Now: when.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: runID, From: []persistence.RunStatus{persistence.RunRunning},
		To: persistence.RunCancelled, CancelPendingSteps: true, Now: when}); err != nil {
		t.Fatal(err)
	}
}

// sweep deletes (or with dryRun counts) every run that finished before
// `before`, limit runs a call, and returns the calls' results.
func sweep(t *testing.T, st persistence.Store, before time.Time, limit int, dryRun bool) []persistence.RunDeleteFinishedResult {
	t.Helper()
	var out []persistence.RunDeleteFinishedResult
	cursor := ""
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatalf("sweep of %d-run batches did not end after %d calls: %+v", limit, i, out)
		}
		res, err := st.RunDeleteFinished(ctx(t), persistence.RunDeleteFinishedParams{Before: before, Limit: limit, Cursor: cursor, DryRun: dryRun})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.RunIDs)+res.Kept > limit {
			t.Errorf("one call read %d runs (%d deleted, %d kept), over its limit %d", len(res.RunIDs)+res.Kept, len(res.RunIDs), res.Kept, limit)
		}
		out = append(out, res)
		if res.NextCursor == "" {
			return out
		}
		cursor = res.NextCursor
	}
}

// total adds up a sweep's results.
func total(rs []persistence.RunDeleteFinishedResult) persistence.RunDeleteFinishedResult {
	var sum persistence.RunDeleteFinishedResult
	for _, r := range rs {
		sum.RunIDs = append(sum.RunIDs, r.RunIDs...)
		sum.Kept += r.Kept
		sum.Steps += r.Steps
		sum.Attempts += r.Attempts
		sum.EventLinks += r.EventLinks
		sum.Events += r.Events
		sum.ScheduleTicks += r.ScheduleTicks
	}
	return sum
}

// Retention: runs that finished before the bound go with their steps,
// attempts and schedule ticks, oldest first, in batches of at most the
// limit; recent, unfinished and dead-lettered runs stay, and a
// dead-lettered run goes once its dead step is discarded. A dry run
// counts the same and deletes nothing.
func (s *suite) testRunDeleteFinished(t *testing.T, st persistence.Store) {
	c := ctx(t)
	before := at(10 * time.Minute)
	var old []string
	for i := range 5 {
		r := createRun(t, st, "wf", "", "a", "b:a")
		finishRun(t, st, r.Run.ID, at(time.Duration(i)*time.Minute))
		old = append(old, r.Run.ID)
	}
	// A scheduled run, whose fired tick goes with it; a skipped tick
	// (no run) stays.
	tick := at(-time.Hour)
	sched, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Schedule: "nightly", ScheduledTick: &tick,
		IdempotencyKey: "schedule:nightly:1", Now: t0, Steps: specs("a")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range []persistence.ScheduleTick{
		{Schedule: "nightly", Tick: tick, Outcome: persistence.TickFired, RunID: sched.Run.ID, CreatedAt: t0},
		{Schedule: "nightly", Tick: tick.Add(-time.Hour), Outcome: persistence.TickSkipped, Reason: "overlap", CreatedAt: t0},
	} {
		if err := st.ScheduleTickRecord(c, tk); err != nil {
			t.Fatal(err)
		}
	}
	finishRun(t, st, sched.Run.ID, at(5*time.Minute))
	old = append(old, sched.Run.ID)

	// A dead-lettered run: its step dead, the run failed, long ago.
	dl := createRun(t, st, "wf", "", "a", "b:a")
	claim(t, st, dl.Run.ID, "a", "fd", at(-time.Hour))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: dl.Run.ID, Step: "a", Fence: "fd", Error: "boom",
		Now: at(-time.Hour), DeadRunStatus: persistence.RunFailed, DeadRunError: "step a dead"}); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, dl.Run.ID); got.Status != persistence.RunFailed || got.FinishedAt == nil {
		t.Fatalf("dead-lettered run = %+v, want failed and finished", got)
	}
	live := createRun(t, st, "wf", "", "a")
	recent := createRun(t, st, "wf", "", "a")
	finishRun(t, st, recent.Run.ID, at(time.Hour))

	dry := total(sweep(t, st, before, 2, true))
	for _, id := range append(slices.Clone(old), dl.Run.ID, live.Run.ID, recent.Run.ID) {
		if _, err := st.RunGet(c, id); err != nil {
			t.Fatalf("after a dry run, run %s: %v", id, err)
		}
	}

	res := sweep(t, st, before, 2, false)
	got := total(res)
	want := persistence.RunDeleteFinishedResult{RunIDs: old, Kept: 1, Steps: 5*2 + 1, Attempts: 6, ScheduleTicks: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sweep deleted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, dry); diff != "" {
		t.Errorf("dry run counted (-want +got):\n%s", diff)
	}
	if len(res) < 4 {
		t.Errorf("7 runs in batches of 2 took %d calls", len(res))
	}
	for _, id := range old {
		if _, err := st.RunGet(c, id); !errors.Is(err, persistence.ErrRunNotFound) {
			t.Errorf("old finished run %s still there: %v", id, err)
		}
		if atts, _ := st.AttemptList(c, id); len(atts) != 0 {
			t.Errorf("attempts of deleted run %s remain: %v", id, atts)
		}
		for _, step := range []string{"a", "b"} {
			if _, err := st.StepGet(c, id, step); !errors.Is(err, persistence.ErrStepNotFound) {
				t.Errorf("step %s of deleted run %s remains: %v", step, id, err)
			}
		}
	}
	ticks, err := st.ScheduleTickList(c, persistence.ScheduleTickListParams{Name: "nightly"})
	if err != nil || len(ticks) != 1 || ticks[0].Outcome != persistence.TickSkipped {
		t.Errorf("ticks after the sweep = %+v, %v; want the skipped one only", ticks, err)
	}
	for _, id := range []string{dl.Run.ID, live.Run.ID, recent.Run.ID} {
		if _, err := st.RunGet(c, id); err != nil {
			t.Errorf("run %s should survive: %v", id, err)
		}
	}
	if sts, err := st.StepList(c, dl.Run.ID); err != nil || len(sts) != 2 {
		t.Errorf("steps of the dead-lettered run = %d, %v; want both kept", len(sts), err)
	}

	// The dead step discarded, the run is history like any other.
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: dl.Run.ID, Steps: []string{"a"},
		From: []persistence.StepStatus{persistence.StepDead}, To: persistence.StepCancelled, Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got = total(sweep(t, st, before, 2, false))
	if !slices.Equal(got.RunIDs, []string{dl.Run.ID}) || got.Kept != 0 || got.Steps != 2 || got.Attempts != 1 {
		t.Errorf("after the discard the sweep deleted %+v; want the formerly dead-lettered run, its 2 steps and 1 attempt", got)
	}
	if _, err := st.RunGet(c, recent.Run.ID); err != nil {
		t.Errorf("recent run: %v", err)
	}

	if _, err := st.RunDeleteFinished(c, persistence.RunDeleteFinishedParams{Before: before, Cursor: "not-a-cursor"}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("bad cursor = %v, want ErrInvalid", err)
	}
	if _, err := st.RunDeleteFinished(c, persistence.RunDeleteFinishedParams{}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("zero Before = %v, want ErrInvalid", err)
	}
}

// Retention and events: a run's event link goes with it, and the event
// once it has no run left, if it was dispatched and published before the
// bound; an event with a run still there stays.
func (s *suite) testRunDeleteFinishedEvents(t *testing.T, st persistence.Store) {
	c := ctx(t)
	before := at(10 * time.Minute)
	create := func(id string, dispatched bool, workflows ...string) persistence.EventCreateResult {
		p := eventParams(t, id, "order.placed", t0, workflows...)
		p.Dispatched = dispatched
		res, err := st.EventCreate(c, p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	both := create("evt-both", true, "ship", "bill") // both runs old
	half := create("evt-half", true, "ship", "bill") // one run still live
	pend := create("evt-pending", false, "ship")     // not dispatched yet
	var old []string
	for _, r := range []persistence.RunCreateResult{both.Runs[0], both.Runs[1], half.Runs[0], pend.Runs[0]} {
		if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: r.Run.ID, To: persistence.RunCancelled,
			CancelPendingSteps: true, Now: at(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		old = append(old, r.Run.ID)
	}
	got := total(sweep(t, st, before, 3, false))
	slices.Sort(got.RunIDs)
	slices.Sort(old)
	if !slices.Equal(got.RunIDs, old) || got.EventLinks != 4 || got.Events != 1 {
		t.Errorf("sweep deleted %+v; want runs %v, 4 event links, 1 event", got, old)
	}
	if _, err := st.EventGet(c, "evt-both"); !errors.Is(err, persistence.ErrEventNotFound) {
		t.Errorf("event whose runs are all gone: %v, want ErrEventNotFound", err)
	}
	ev, err := st.EventGet(c, "evt-half")
	if err != nil || len(ev.Runs) != 1 || ev.Runs[0].RunID != half.Runs[1].Run.ID {
		t.Errorf("event with a live run = %+v, %v; want it with its live run's link only", ev, err)
	}
	if ev, err := st.EventGet(c, "evt-pending"); err != nil || len(ev.Runs) != 0 {
		t.Errorf("pending event = %+v, %v; want kept (the outbox's), without its deleted run's link", ev, err)
	}
}

// Leases: one holder at a time; the holder extends it; another takes it
// once it expired or was released; a release by another changes nothing.
func (s *suite) testLeases(t *testing.T, st persistence.Store) {
	c := ctx(t)
	acquire := func(holder string, now time.Time) bool {
		t.Helper()
		ok, err := st.LeaseAcquire(c, persistence.LeaseParams{Name: "retention", Holder: holder, Until: now.Add(time.Minute), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	steps := []struct {
		what   string
		holder string
		now    time.Time
		want   bool
	}{
		{"a free lease", "node-a", t0, true},
		{"a lease held by another", "node-b", at(30 * time.Second), false},
		{"the holder extends it", "node-a", at(50 * time.Second), true},
		{"held until the extension ends", "node-b", at(100 * time.Second), false},
		{"expired", "node-b", at(111 * time.Second), true},
		{"the old holder's turn is over", "node-a", at(112 * time.Second), false},
	}
	for _, s := range steps {
		if got := acquire(s.holder, s.now); got != s.want {
			t.Errorf("%s: %s acquires = %v, want %v", s.what, s.holder, got, s.want)
		}
	}
	if err := st.LeaseRelease(c, persistence.LeaseParams{Name: "retention", Holder: "node-a"}); err != nil {
		t.Fatal(err)
	}
	if acquire("node-c", at(113*time.Second)) {
		t.Error("a release by a node that does not hold the lease freed it")
	}
	if err := st.LeaseRelease(c, persistence.LeaseParams{Name: "retention", Holder: "node-b"}); err != nil {
		t.Fatal(err)
	}
	if !acquire("node-c", at(114*time.Second)) {
		t.Error("a released lease could not be taken")
	}
	if ok, err := st.LeaseAcquire(c, persistence.LeaseParams{Name: "other", Holder: "node-a", Until: at(115 * time.Second), Now: at(114 * time.Second)}); err != nil || !ok {
		t.Errorf("another lease name = %v, %v; want its own lease", ok, err)
	}
	for _, bad := range []persistence.LeaseParams{
		{Name: "", Holder: "n", Until: at(time.Minute), Now: t0},
		{Name: "bad name", Holder: "n", Until: at(time.Minute), Now: t0},
		{Name: "retention", Holder: "", Until: at(time.Minute), Now: t0},
		{Name: "retention", Holder: "n", Until: t0, Now: t0},
	} {
		if _, err := st.LeaseAcquire(c, bad); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("LeaseAcquire(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

// Of many nodes taking a free lease at once, exactly one gets it.
func (s *suite) testConcurrentLeases(t *testing.T, st persistence.Store) {
	c := ctx(t)
	for round := range 5 {
		name := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				holder := fmt.Sprintf("node-%d", i)
				ok, err := st.LeaseAcquire(c, persistence.LeaseParams{Name: name, Holder: holder, Until: at(time.Minute), Now: t0})
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					winners = append(winners, holder)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Errorf("round %d: %d nodes got the lease (%v), want exactly one", round, len(winners), winners)
		}
	}
}

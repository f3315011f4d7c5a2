package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// testRunPriority: a run's priority is stored on the run and on each of
// its steps; one out of range is refused.
func (s *suite) testRunPriority(t *testing.T, st persistence.Store) {
	c := ctx(t)
	res, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "prio", Version: 1, Now: t0,
		Priority: persistence.MaxPriority, Steps: specs("a", "b:a")})
	if err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, res.Run.ID).Priority; got != persistence.MaxPriority {
		t.Errorf("run priority = %d, want %d", got, persistence.MaxPriority)
	}
	for _, sr := range append(res.Steps, getStep(t, st, res.Run.ID, "b")) {
		if sr.Priority != persistence.MaxPriority {
			t.Errorf("step %s priority = %d, want %d", sr.Step, sr.Priority, persistence.MaxPriority)
		}
	}
	low, err := st.RunCreateMany(c, persistence.RunCreateManyParams{Items: []persistence.RunCreateParams{
		{ID: newID(t), Workflow: "prio", Version: 1, Now: t0, Priority: persistence.MinPriority, Steps: specs("a")}}})
	if err != nil || low[0].Err != nil {
		t.Fatalf("RunCreateMany: %v, %v", err, low[0].Err)
	}
	if got := getStep(t, st, low[0].Result.Run.ID, "a").Priority; got != persistence.MinPriority {
		t.Errorf("step priority of a batch-created run = %d, want %d", got, persistence.MinPriority)
	}
	for _, p := range []int{persistence.MaxPriority + 1, persistence.MinPriority - 1} {
		_, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "prio", Version: 1, Now: t0,
			Priority: p, Steps: specs("a")})
		if !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("priority %d: %v, want ErrInvalid", p, err)
		}
	}
}

// testRunPause: a paused run's steps are not claimed (running ones
// finish, released ones are queued, not claimed at release), the
// reconciler's lists leave them out; resuming makes them claimable.
func (s *suite) testRunPause(t *testing.T, st persistence.Store) {
	c := ctx(t)
	run := createRun(t, st, "pausing", "", "a", "c", "b:a").Run
	claim(t, st, run.ID, "a", "f-a", at(time.Second))

	res, err := st.RunSetPaused(c, persistence.RunSetPausedParams{RunID: run.ID, Paused: true, Now: at(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Run.PausedAt == nil || !res.Run.PausedAt.Equal(at(2*time.Second)) || len(res.Steps) != 3 {
		t.Fatalf("pause = %+v, want changed, paused at +2s, with 3 steps", res)
	}
	if again, err := st.RunSetPaused(c, persistence.RunSetPausedParams{RunID: run.ID, Paused: true, Now: at(3 * time.Second)}); err != nil || again.Changed {
		t.Fatalf("second pause = %+v, %v; want unchanged", again, err)
	}
	if got := getRun(t, st, run.ID).PausedAt; got == nil || !got.Equal(at(2*time.Second)) {
		t.Fatalf("RunGet PausedAt = %v, want +2s", got)
	}
	_, err = st.StepClaim(c, persistence.StepClaimParams{RunID: run.ID, Step: "c", Fence: "f-c", Worker: "w",
		LeaseUntil: at(time.Hour), Now: at(3 * time.Second)})
	if persistence.RefusalOf(err) != persistence.RefusedRunPaused || !errors.Is(err, persistence.ErrNotClaimable) {
		t.Fatalf("claim of a paused run's step: %v, want %s", err, persistence.RefusedRunPaused)
	}
	outs, err := st.StepClaimMany(c, persistence.StepClaimManyParams{Items: []persistence.StepClaimItem{{RunID: run.ID, Step: "c"}},
		Fence: "f-c", Worker: "w", LeaseUntil: at(time.Hour), Now: at(3 * time.Second)})
	if err != nil || persistence.RefusalOf(outs[0].Err) != persistence.RefusedRunPaused {
		t.Fatalf("batch claim of a paused run's step: %v, %v; want %s", outs, err, persistence.RefusedRunPaused)
	}
	queued := func() []string {
		t.Helper()
		sts, err := st.StepListQueued(c, persistence.ListDueParams{Before: at(time.Hour), Workflows: []string{"pausing"}})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, sr := range sts {
			names = append(names, sr.Step)
		}
		return names
	}
	if got := queued(); len(got) != 0 {
		t.Fatalf("StepListQueued of a paused run = %v, want none", got)
	}

	// The running step finishes; the one it releases is queued, and not
	// claimed at release.
	done, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{
		Items:         []persistence.StepCompleteParams{{RunID: run.ID, Step: "a", Fence: "f-a", Now: at(4 * time.Second)}},
		ClaimReleased: &persistence.ReleaseClaim{Fence: "f-r", Worker: "w", LeaseUntil: at(time.Hour), Max: 10, Queues: []string{"q1"}},
	})
	if err != nil || done[0].Err != nil {
		t.Fatalf("complete a: %v, %v", err, done[0].Err)
	}
	if len(done[0].Result.Claimed) != 0 || getStep(t, st, run.ID, "b").Status != persistence.StepQueued {
		t.Fatalf("released b: claimed %d, status %s; want queued, not claimed", len(done[0].Result.Claimed), getStep(t, st, run.ID, "b").Status)
	}

	res, err = st.RunSetPaused(c, persistence.RunSetPausedParams{RunID: run.ID, Paused: false, Now: at(5 * time.Second)})
	if err != nil || !res.Changed || res.Run.PausedAt != nil {
		t.Fatalf("resume = %+v, %v; want changed, not paused", res, err)
	}
	if diff := cmp.Diff([]string{"c", "b"}, queued()); diff != "" {
		t.Fatalf("StepListQueued after resume (-want +got):\n%s", diff)
	}
	claim(t, st, run.ID, "c", "f-c2", at(6*time.Second))

	if _, err := st.RunSetPaused(c, persistence.RunSetPausedParams{RunID: newID(t), Paused: true, Now: t0}); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("pause of an unknown run: %v, want ErrRunNotFound", err)
	}
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: run.ID, From: []persistence.RunStatus{persistence.RunRunning},
		To: persistence.RunCancelled, Now: at(7 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunSetPaused(c, persistence.RunSetPausedParams{RunID: run.ID, Paused: true, Now: at(8 * time.Second)}); !errors.Is(err, persistence.ErrRunFinished) {
		t.Errorf("pause of a cancelled run: %v, want ErrRunFinished", err)
	}
}

// testQueuePause: paused queues are rows; pausing twice changes nothing.
func (s *suite) testQueuePause(t *testing.T, st persistence.Store) {
	c := ctx(t)
	set := func(queue string, paused bool, want bool) {
		t.Helper()
		changed, err := st.QueueSetPaused(c, persistence.QueueSetPausedParams{Queue: queue, Paused: paused, Now: t0})
		if err != nil || changed != want {
			t.Fatalf("QueueSetPaused(%s, %v) = %v, %v; want %v", queue, paused, changed, err, want)
		}
	}
	set("mail", true, true)
	set("mail", true, false)
	set("bulk", true, true)
	list, err := st.QueueListPaused(c)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]persistence.QueuePause{{Queue: "bulk", PausedAt: t0}, {Queue: "mail", PausedAt: t0}}, list); diff != "" {
		t.Fatalf("QueueListPaused (-want +got):\n%s", diff)
	}
	set("mail", false, true)
	set("mail", false, false)
	if list, err := st.QueueListPaused(c); err != nil || len(list) != 1 || list[0].Queue != "bulk" {
		t.Fatalf("QueueListPaused after resume = %v, %v; want [bulk]", list, err)
	}
	if _, err := st.QueueSetPaused(c, persistence.QueueSetPausedParams{Queue: "no spaces", Paused: true, Now: t0}); !errors.Is(err, persistence.ErrInvalid) {
		t.Fatalf("bad queue name: %v, want ErrInvalid", err)
	}
}

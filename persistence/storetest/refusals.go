package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// refusal claims (forward, or compensation) and returns the refusal, or
// fails the test when the claim succeeds or fails otherwise.
func refusal(t *testing.T, st persistence.Store, runID, step string, comp bool, now time.Time) *persistence.ClaimRefusedError {
	t.Helper()
	_, err := st.StepClaim(ctx(t), persistence.StepClaimParams{RunID: runID, Step: step, Compensation: comp,
		Fence: "refused", Worker: "w", LeaseUntil: now.Add(time.Minute), Now: now})
	var ce *persistence.ClaimRefusedError
	if !errors.As(err, &ce) || !errors.Is(err, persistence.ErrNotClaimable) {
		t.Fatalf("claim of %s at %v = %v, want a *ClaimRefusedError", step, now.Sub(t0), err)
	}
	if ce.RunID != runID || ce.Step != step {
		t.Errorf("refusal names run %s step %q, want %s %q", ce.RunID, ce.Step, runID, step)
	}
	return ce
}

func wantRefusal(t *testing.T, got *persistence.ClaimRefusedError, reason persistence.ClaimRefusal, due time.Time) {
	t.Helper()
	if got.Reason != reason || !got.DueAt.Equal(due) {
		t.Errorf("refusal of %q = %s due %v, want %s due %v (%v)", got.Step, got.Reason, got.DueAt, reason, due, got)
	}
	if persistence.RefusalOf(got) != reason {
		t.Errorf("RefusalOf(%v) = %q, want %q", got, persistence.RefusalOf(got), reason)
	}
}

// testClaimRefusals: every refused claim says why, and when the step (or
// run) becomes claimable where that is known, so that a caller can try
// again then instead of dropping the task.
func (s *suite) testClaimRefusals(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b", "c:a")
	id := r.Run.ID

	wantRefusal(t, refusal(t, st, id, "c", false, at(time.Second)), persistence.RefusedNotReady, time.Time{})
	ca := claim(t, st, id, "a", "fa", at(time.Second))
	wantRefusal(t, refusal(t, st, id, "a", false, at(2*time.Second)), persistence.RefusedOwned, *ca.Step.LeaseExpiresAt)

	// A retry is not due a microsecond early, and is due exactly at its time.
	retryAt := at(10*time.Second + 123*time.Microsecond)
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "fa", Error: "boom", RetryAt: &retryAt, Now: at(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, refusal(t, st, id, "a", false, retryAt.Add(-time.Microsecond)), persistence.RefusedNotDue, retryAt)
	claim(t, st, id, "a", "fa2", retryAt)
	complete(t, st, id, "a", "fa2", "", at(11*time.Second))
	wantRefusal(t, refusal(t, st, id, "a", false, at(12*time.Second)), persistence.RefusedFinished, time.Time{})

	// The same step twice in one batch: the second is a duplicate.
	outs, err := st.StepClaimMany(c, persistence.StepClaimManyParams{
		Items: []persistence.StepClaimItem{{RunID: id, Step: "b"}, {RunID: id, Step: "b"}, {RunID: id, Step: "zz"}},
		Fence: "fb", Worker: "w", LeaseUntil: at(time.Hour), Now: at(12 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Err != nil || persistence.RefusalOf(outs[1].Err) != persistence.RefusedDuplicate ||
		persistence.RefusalOf(outs[2].Err) != persistence.RefusedNotFound || !errors.Is(outs[2].Err, persistence.ErrStepNotFound) {
		t.Errorf("batch claim = %v / %v / %v, want ok / duplicate / not found", outs[0].Err, outs[1].Err, outs[2].Err)
	}

	// A delayed run: its steps are refused with the run's start time.
	later := at(time.Hour)
	pr, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "later", StartAt: later, Now: t0, Steps: specs("a")})
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, refusal(t, st, pr.Run.ID, "a", false, at(time.Minute)), persistence.RefusedRunPending, later)

	// A cancelled run refuses its steps.
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: id, To: persistence.RunCancelled, Now: at(13 * time.Second), CancelPendingSteps: true}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, refusal(t, st, id, "c", false, at(14*time.Second)), persistence.RefusedFinished, time.Time{})
	// A compensating run refuses forward claims.
	r2 := createRun(t, st, "wf", "", "a", "b")
	claim(t, st, r2.Run.ID, "a", "f2a", at(time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: r2.Run.ID, Step: "a", Fence: "f2a", Error: "dead",
		DeadRunStatus: persistence.RunCompensating, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, refusal(t, st, r2.Run.ID, "b", false, at(3*time.Second)), persistence.RefusedRunNotRunning, time.Time{})
	// A compensation claim of a step that is not compensating.
	wantRefusal(t, refusal(t, st, id, "a", true, at(14*time.Second)), persistence.RefusedFinished, time.Time{})
}

// testNow: the store reads its server's clock, which on the test machine
// is this process's clock.
func (s *suite) testNow(t *testing.T, st persistence.Store) {
	before := time.Now()
	got, err := st.Now(ctx(t))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if got.Location() != time.UTC {
		t.Errorf("Now() location = %v, want UTC", got.Location())
	}
	// The server's clock has a resolution of its own (SQLite's is a
	// millisecond): allow that much on each side, and a second of skew.
	slack := time.Second
	if got.Before(before.Add(-slack)) || got.After(after.Add(slack)) {
		t.Errorf("Now() = %v, want between %v and %v", got, before, after)
	}
}

// testClaimStartsDueRun: the claim of a root step of a delayed run whose
// start has come starts the run (its other roots become queued) and
// claims the step; before its start the claim is refused with the start
// time.
func (s *suite) testClaimStartsDueRun(t *testing.T, st persistence.Store) {
	c := ctx(t)
	start := at(time.Minute)
	r, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "later", StartAt: start, Now: t0,
		Steps: specs("a", "b", "c:a")})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Run.ID
	wantRefusal(t, refusal(t, st, id, "a", false, start.Add(-time.Microsecond)), persistence.RefusedRunPending, start)
	ca := claim(t, st, id, "a", "fa", start)
	if ca.Run.Status != persistence.RunRunning || ca.Run.StartedAt == nil || !ca.Run.StartedAt.Equal(start) || ca.Step.Attempt != 1 {
		t.Errorf("claim at the start time: run %s started %v, step attempt %d; want running at %v, attempt 1",
			ca.Run.Status, ca.Run.StartedAt, ca.Step.Attempt, start)
	}
	if got := getRun(t, st, id); got.Status != persistence.RunRunning {
		t.Errorf("stored run is %s, want running", got.Status)
	}
	wantStatuses(t, st, id, map[string]persistence.StepStatus{"a": persistence.StepRunning, "b": persistence.StepQueued, "c": persistence.StepWaiting})
	// The reconciler's RunStart finds nothing left to do.
	if queued, err := st.RunStart(c, persistence.RunStartParams{RunID: id, Now: at(2 * time.Minute)}); err != nil || len(queued) != 0 {
		t.Errorf("RunStart after the claim started the run = %v, %v; want nothing", names(queued), err)
	}
	claim(t, st, id, "b", "fb", at(2*time.Minute))
}

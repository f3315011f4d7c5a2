package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// Isolation: a node claims only steps it can run (Handles), and a claim
// it refuses changes nothing.

// only returns a Handles that accepts the steps of workflow, and of those
// every step but the ones named in but.
func only(workflow string, but ...string) persistence.Handles {
	return func(wf, step string) bool {
		if wf != workflow {
			return false
		}
		for _, b := range but {
			if b == step {
				return false
			}
		}
		return true
	}
}

// wantUnhandled checks that err is a RefusedUnhandled refusal of step of
// workflow wf.
func wantUnhandled(t *testing.T, err error, runID, step, wf string) {
	t.Helper()
	var ce *persistence.ClaimRefusedError
	if !errors.As(err, &ce) || !errors.Is(err, persistence.ErrNotClaimable) {
		t.Fatalf("claim of %s = %v, want a *ClaimRefusedError", step, err)
	}
	if ce.Reason != persistence.RefusedUnhandled || ce.Workflow != wf || ce.RunID != runID || ce.Step != step {
		t.Errorf("refusal = %+v, want %s of run %s step %q workflow %q", ce, persistence.RefusedUnhandled, runID, step, wf)
	}
}

// unchanged checks that the step, its run and their history are as they
// were before a refused claim.
func unchanged(t *testing.T, st persistence.Store, runID, step string, was persistence.StepRun, run persistence.Run, hist []string) {
	t.Helper()
	if diff := cmp.Diff(was, getStep(t, st, runID, step)); diff != "" {
		t.Errorf("step %q changed by a refused claim (-before +after):\n%s", step, diff)
	}
	if diff := cmp.Diff(run, getRun(t, st, runID)); diff != "" {
		t.Errorf("run changed by a refused claim (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(hist, attemptRows(t, st, runID, step)); diff != "" {
		t.Errorf("history of %q changed by a refused claim (-before +after):\n%s", step, diff)
	}
}

// testClaimUnhandled: a forward claim, a claim that would start a due
// delayed run, and a compensation claim, each of a step its Handles
// rejects, are refused with RefusedUnhandled and the step's workflow, and
// change nothing: no attempt used, no fence, no history, no run started.
// Handles sees the workflow and the step.
func (s *suite) testClaimUnhandled(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := createRun(t, st, "wf", "", "a", "b").Run.ID
	check := func(runID, step string, comp bool, h persistence.Handles, now time.Time) {
		t.Helper()
		was, run, hist := getStep(t, st, runID, step), getRun(t, st, runID), attemptRows(t, st, runID, step)
		_, err := st.StepClaim(c, persistence.StepClaimParams{RunID: runID, Step: step, Compensation: comp, Handles: h,
			Fence: "nope", Worker: "w", LeaseUntil: now.Add(time.Minute), Now: now})
		wantUnhandled(t, err, runID, step, run.Workflow)
		unchanged(t, st, runID, step, was, run, hist)
	}
	check(id, "a", false, only("other"), at(time.Second))
	check(id, "b", false, only("wf", "b"), at(time.Second))
	// A handled step of the same run is claimed as usual.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Handles: only("wf", "b"),
		Fence: "fa", Worker: "w", LeaseUntil: at(time.Minute), Now: at(time.Second)}); err != nil {
		t.Fatalf("claim of a handled step: %v", err)
	}

	// A due delayed run is not started by a claim its node cannot run.
	start := at(time.Minute)
	pr, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "later", StartAt: start, Now: t0, Steps: specs("a", "b")})
	if err != nil {
		t.Fatal(err)
	}
	check(pr.Run.ID, "a", false, only("wf"), start.Add(time.Second))
	if got := getRun(t, st, pr.Run.ID); got.Status != persistence.RunPending {
		t.Errorf("delayed run after a refused claim is %s, want pending", got.Status)
	}

	// A compensating step.
	cr := createRun(t, st, "comp", "", "a")
	claim(t, st, cr.Run.ID, "a", "fa", at(time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: cr.Run.ID, Step: "a", Fence: "fa", Error: "dead",
		DeadRunStatus: persistence.RunCompensating, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: cr.Run.ID, Steps: []string{"a"},
		From: []persistence.StepStatus{persistence.StepDead}, To: persistence.StepCompensating, Now: at(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	check(cr.Run.ID, "a", true, only("wf"), at(4*time.Second))
	cb, err := st.StepClaim(c, persistence.StepClaimParams{RunID: cr.Run.ID, Step: "a", Compensation: true, Handles: only("comp"),
		Fence: "cb", Worker: "w", LeaseUntil: at(time.Minute), Now: at(4 * time.Second)})
	if err != nil || cb.Step.CompAttempt != 1 {
		t.Errorf("compensation claim of a handled step = %+v, %v; want comp attempt 1", cb.Step, err)
	}
}

// testClaimManyUnhandled: a batch claims the steps its Handles accepts;
// the others are refused with RefusedUnhandled and stay as they were.
func (s *suite) testClaimManyUnhandled(t *testing.T, st persistence.Store) {
	c := ctx(t)
	mine := createRun(t, st, "mine", "", "a").Run.ID
	theirs := createRun(t, st, "theirs", "", "a").Run.ID
	was, run, hist := getStep(t, st, theirs, "a"), getRun(t, st, theirs), attemptRows(t, st, theirs, "a")
	outs, err := st.StepClaimMany(c, persistence.StepClaimManyParams{
		Items: []persistence.StepClaimItem{{RunID: theirs, Step: "a"}, {RunID: mine, Step: "a"}},
		Fence: "fm", Worker: "w", LeaseUntil: at(time.Minute), Now: at(time.Second), Handles: only("mine"),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantUnhandled(t, outs[0].Err, theirs, "a", "theirs")
	if outs[1].Err != nil || outs[1].Result.Step.Status != persistence.StepRunning || outs[1].Result.Step.Attempt != 1 {
		t.Errorf("claim of the handled item = %+v, %v; want running, attempt 1", outs[1].Result.Step, outs[1].Err)
	}
	unchanged(t, st, theirs, "a", was, run, hist)
}

// testReleaseClaimUnhandled: a completion's ReleaseClaim claims only the
// released steps its Handles accepts; the others are queued as usual.
func (s *suite) testReleaseClaimUnhandled(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := createRun(t, st, "wf", "", "a", "b:a", "c:a").Run.ID
	claim(t, st, id, "a", "fa", t0)
	outs, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{
		Items: []persistence.StepCompleteParams{{RunID: id, Step: "a", Fence: "fa", Now: at(time.Second)}},
		ClaimReleased: &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 10, Fence: "eager", Worker: "w",
			LeaseUntil: at(time.Minute), Handles: only("wf", "b")},
	})
	if err != nil || outs[0].Err != nil {
		t.Fatalf("complete a: %v %v", err, outs[0].Err)
	}
	var claimed []string
	for _, cl := range outs[0].Result.Claimed {
		claimed = append(claimed, cl.Step.Step)
	}
	if diff := cmp.Diff([]string{"c"}, claimed); diff != "" {
		t.Errorf("claimed at release (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b"}, names(outs[0].Result.Ready)); diff != "" {
		t.Errorf("ready at release (-want +got):\n%s", diff)
	}
	if b := getStep(t, st, id, "b"); b.Status != persistence.StepQueued || b.Attempt != 0 || b.Fence != "" {
		t.Errorf("unhandled released step = %+v, want queued, attempt 0, no fence", b)
	}
	// Roots claimed at create: the same rule.
	res, err := st.RunCreateMany(c, persistence.RunCreateManyParams{
		Items: []persistence.RunCreateParams{{ID: newID(t), Workflow: "other", Now: t0, Steps: specs("a")}},
		ClaimRoots: &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 10, Fence: "eager", Worker: "w",
			LeaseUntil: at(time.Minute), Handles: only("wf")},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("RunCreateMany: %v", err)
	}
	if len(res[0].Claimed) != 0 {
		t.Errorf("roots of an unhandled workflow claimed at create: %+v", res[0].Claimed)
	}
}

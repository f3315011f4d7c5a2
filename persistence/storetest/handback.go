package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// testHandBack: StepHandBack undoes a claim whose handler never started:
// the step is queued again with the attempt number it had, no attempt is
// recorded (none lost, so no delivery is counted), and the next claim
// runs the same attempt. It is fenced: a step another claim holds, or one
// that finished, is left as it is (ErrFenceMismatch), and the handed-back
// fence records nothing afterwards.
func (s *suite) testHandBack(t *testing.T, st persistence.Store) {
	c := ctx(t)
	handBack := func(id, step, fence string, now time.Time) error {
		return st.StepHandBack(c, persistence.StepHandBackParams{RunID: id, Step: step, Fence: fence, Now: now})
	}
	r := createRun(t, st, "wf", "", "a", "b")
	id := r.Run.ID

	// A first attempt handed back: queued, attempt 0, never started.
	claim(t, st, id, "a", "fa", at(time.Second))
	if err := handBack(id, "a", "fa", at(2*time.Second)); err != nil {
		t.Fatalf("StepHandBack of the holder's claim: %v", err)
	}
	a := getStep(t, st, id, "a")
	if a.Status != persistence.StepQueued || a.Attempt != 0 || a.Fence != "" || a.LeaseExpiresAt != nil ||
		a.StartedAt != nil || a.QueuedAt == nil || !a.QueuedAt.Equal(t0) {
		t.Errorf("a after the hand-back: status %s attempt %d fence %q lease %v started %v queued %v; want queued, attempt 0, no fence, lease or start, queued at %v",
			a.Status, a.Attempt, a.Fence, a.LeaseExpiresAt, a.StartedAt, a.QueuedAt, t0)
	}
	if h := history(t, st, id, "a"); len(h) != 0 {
		t.Errorf("a's history after the hand-back: %v, want none", h)
	}
	queued, err := st.StepListQueued(c, persistence.ListDueParams{Before: at(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names(queued)); diff != "" {
		t.Errorf("queued steps after the hand-back (-want +got):\n%s", diff)
	}
	// The handed-back fence is spent.
	if err := handBack(id, "a", "fa", at(3*time.Second)); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("a second hand-back: %v, want ErrFenceMismatch", err)
	}
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "a", Fence: "fa", Now: at(3 * time.Second)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("a completion under the handed-back fence: %v, want ErrFenceMismatch", err)
	}
	// The next claim runs attempt 1, started at its own time.
	if got := claim(t, st, id, "a", "fa2", at(4*time.Second)); got.Step.Attempt != 1 || got.Step.StartedAt == nil || !got.Step.StartedAt.Equal(at(4*time.Second)) {
		t.Errorf("the claim after the hand-back: attempt %d started %v, want attempt 1 started at 4s", got.Step.Attempt, got.Step.StartedAt)
	}
	complete(t, st, id, "a", "fa2", "", at(5*time.Second))
	if diff := cmp.Diff([]string{"1 succeeded"}, history(t, st, id, "a")); diff != "" {
		t.Errorf("a's history (-want +got):\n%s", diff)
	}
	if err := handBack(id, "a", "fa2", at(6*time.Second)); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("the hand-back of a finished step: %v, want ErrFenceMismatch", err)
	}

	// Another worker's claim is not handed back under a wrong fence.
	before := claim(t, st, id, "b", "fb", at(time.Second)).Step
	if err := handBack(id, "b", "fx", at(2*time.Second)); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("the hand-back under another fence: %v, want ErrFenceMismatch", err)
	}
	if after := getStep(t, st, id, "b"); after.Status != persistence.StepRunning || after.Attempt != 1 || after.Fence != "fb" ||
		after.LeaseExpiresAt == nil || !after.LeaseExpiresAt.Equal(*before.LeaseExpiresAt) {
		t.Errorf("b after a hand-back under another fence: %s attempt %d fence %q lease %v; want the claim untouched",
			after.Status, after.Attempt, after.Fence, after.LeaseExpiresAt)
	}
	// A takeover handed back: the lost attempt it ended stays lost (one
	// delivery), the hand-back adds none, and the start stays the first.
	claim(t, st, id, "b", "fb2", at(62*time.Second))
	if err := handBack(id, "b", "fb2", at(63*time.Second)); err != nil {
		t.Fatalf("StepHandBack of a takeover: %v", err)
	}
	if b := getStep(t, st, id, "b"); b.Status != persistence.StepQueued || b.Attempt != 1 || b.StartedAt == nil || !b.StartedAt.Equal(at(time.Second)) {
		t.Errorf("b after the takeover's hand-back: %s attempt %d started %v; want queued, attempt 1, started at 1s", b.Status, b.Attempt, b.StartedAt)
	}
	if got := claim(t, st, id, "b", "fb3", at(64*time.Second)); got.Step.Attempt != 2 {
		t.Errorf("the claim after the takeover's hand-back: attempt %d, want 2", got.Step.Attempt)
	}
	complete(t, st, id, "b", "fb3", "", at(65*time.Second))
	if diff := cmp.Diff([]string{"1 lost", "2 succeeded"}, history(t, st, id, "b")); diff != "" {
		t.Errorf("b's history (-want +got):\n%s", diff)
	}

	s.testHandBackRetryAndCreate(t, st)
	handBackInput(t, st, id)
}

// handBackInput: StepHandBack refuses a missing run or step, fence or
// time, and an unknown step.
func handBackInput(t *testing.T, st persistence.Store, id string) {
	for _, c := range []struct {
		p    persistence.StepHandBackParams
		want error
	}{
		{persistence.StepHandBackParams{Step: "a", Fence: "f", Now: at(time.Second)}, persistence.ErrStepNotFound},
		{persistence.StepHandBackParams{RunID: id, Fence: "f", Now: at(time.Second)}, persistence.ErrStepNotFound},
		{persistence.StepHandBackParams{RunID: id, Step: "zz", Fence: "f", Now: at(time.Second)}, persistence.ErrStepNotFound},
		{persistence.StepHandBackParams{RunID: id, Step: "a", Now: at(time.Second)}, persistence.ErrInvalid},
		{persistence.StepHandBackParams{RunID: id, Step: "a", Fence: "f"}, persistence.ErrInvalid},
	} {
		if err := st.StepHandBack(ctx(t), c.p); !errors.Is(err, c.want) {
			t.Errorf("StepHandBack(%+v) = %v, want %v", c.p, err, c.want)
		}
	}
}

// testHandBackRetryAndCreate: a retry's claim handed back leaves the
// failed attempt as the last one; a root claimed at create handed back is
// queued as the run created it.
func (s *suite) testHandBackRetryAndCreate(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := createRun(t, st, "wf", "", "r").Run.ID
	claim(t, st, id, "r", "fr", at(time.Second))
	retry := at(2 * time.Second)
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "r", Fence: "fr", Error: "x", RetryAt: &retry, Now: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	claim(t, st, id, "r", "fr2", at(3*time.Second))
	if err := st.StepHandBack(c, persistence.StepHandBackParams{RunID: id, Step: "r", Fence: "fr2", Now: at(4 * time.Second)}); err != nil {
		t.Fatalf("StepHandBack of a retry: %v", err)
	}
	if got := claim(t, st, id, "r", "fr3", at(5*time.Second)); got.Step.Attempt != 2 {
		t.Errorf("the claim after a retry's hand-back: attempt %d, want 2", got.Step.Attempt)
	}
	complete(t, st, id, "r", "fr3", "", at(6*time.Second))
	if diff := cmp.Diff([]string{"1 failed", "2 succeeded"}, history(t, st, id, "r")); diff != "" {
		t.Errorf("r's history (-want +got):\n%s", diff)
	}

	p := persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Version: 1, Now: t0, Steps: specs("root")}
	rc := &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 1, Fence: "boot", Worker: "w9", LeaseUntil: at(time.Minute)}
	outs, err := st.RunCreateMany(c, persistence.RunCreateManyParams{Items: []persistence.RunCreateParams{p}, ClaimRoots: rc})
	if err != nil || outs[0].Err != nil || len(outs[0].Claimed) != 1 {
		t.Fatalf("RunCreateMany with a root claim: %v, %+v", err, outs)
	}
	if err := st.StepHandBack(c, persistence.StepHandBackParams{RunID: p.ID, Step: "root", Fence: "boot", Now: at(time.Second)}); err != nil {
		t.Fatalf("StepHandBack of a claim at create: %v", err)
	}
	if root := getStep(t, st, p.ID, "root"); root.Status != persistence.StepQueued || root.Attempt != 0 || root.StartedAt != nil || root.Fence != "" {
		t.Errorf("root after the hand-back: %s attempt %d started %v fence %q; want queued, attempt 0, not started", root.Status, root.Attempt, root.StartedAt, root.Fence)
	}
	if h := history(t, st, p.ID, "root"); len(h) != 0 {
		t.Errorf("root's history after the hand-back: %v, want none", h)
	}
	if got := claim(t, st, p.ID, "root", "f2", at(2*time.Second)); got.Step.Attempt != 1 {
		t.Errorf("the claim after the hand-back at create: attempt %d, want 1", got.Step.Attempt)
	}
}

// history is a step's forward attempts as "attempt outcome".
func history(t *testing.T, st persistence.Store, runID, step string) []string {
	t.Helper()
	atts, err := st.AttemptList(ctx(t), runID)
	if err != nil {
		t.Fatal(err)
	}
	var h []string
	for _, a := range atts {
		if a.Step == step && a.Kind == persistence.AttemptForward {
			h = append(h, fmt.Sprintf("%d %s", a.Attempt, a.Outcome))
		}
	}
	return h
}

package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

func (s *suite) testStepClaim(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", `{"in":"put"}`, "a", "b", "c:a,b")
	id := r.Run.ID

	ca := claim(t, st, id, "a", "fa", at(time.Second))
	if ca.Step.Status != persistence.StepRunning || ca.Step.Attempt != 1 || ca.Step.Fence != "fa" ||
		ca.Step.LeaseExpiresAt == nil || !ca.Step.LeaseExpiresAt.Equal(at(time.Second+time.Minute)) ||
		ca.Step.StartedAt == nil || !ca.Step.StartedAt.Equal(at(time.Second)) {
		t.Errorf("claimed step = %+v", ca.Step)
	}
	if string(ca.Run.Input) != `{"in":"put"}` || ca.Run.ID != id {
		t.Errorf("claim run = %+v, want the run with its input", ca.Run)
	}
	if len(ca.Outputs) != 0 {
		t.Errorf("claim outputs = %v, want none", ca.Outputs)
	}
	// A second claim of the same step loses.
	_, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "fx", Worker: "w", LeaseUntil: at(time.Hour), Now: at(2 * time.Second)})
	if !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("second claim = %v, want ErrNotClaimable", err)
	}
	if got := getStep(t, st, id, "a"); got.Fence != "fa" || got.Attempt != 1 {
		t.Errorf("a lost claim changed the step: %+v", got)
	}
	// Waiting steps are not claimable; unknown steps are not found.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "c", Fence: "fc", Worker: "w", LeaseUntil: at(time.Hour), Now: at(time.Second)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("claim of waiting step = %v, want ErrNotClaimable", err)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "zz", Fence: "fz", Worker: "w", LeaseUntil: at(time.Hour), Now: at(time.Second)}); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("claim of unknown step = %v, want ErrStepNotFound", err)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "b", Fence: "", Worker: "w", LeaseUntil: at(time.Hour), Now: at(time.Second)}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("claim with empty fence = %v, want ErrInvalid", err)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "b", Fence: "f", Worker: "", LeaseUntil: at(time.Hour), Now: at(time.Second)}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("claim with empty worker = %v, want ErrInvalid", err)
	}

	complete(t, st, id, "a", "fa", `{"a":1}`, at(3*time.Second))
	cb := claim(t, st, id, "b", "fb", at(3*time.Second))
	done := complete(t, st, id, "b", "fb", "", at(4*time.Second))
	if diff := cmp.Diff([]string{"c"}, names(done.Ready)); diff != "" {
		t.Fatalf("ready after b (-want +got):\n%s", diff)
	}
	cc := claim(t, st, id, "c", "fc", at(5*time.Second), "a", "b")
	if diff := cmp.Diff(map[string][]byte{"a": []byte(`{"a":1}`)}, cc.Outputs); diff != "" {
		t.Errorf("claim outputs (-want +got):\n%s", diff)
	}
	_ = cb

	atts, err := st.AttemptList(c, id)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Step    string
		Kind    persistence.AttemptKind
		Attempt int
		Worker  string
		Outcome persistence.AttemptOutcome
	}
	var got []row
	for _, a := range atts {
		got = append(got, row{a.Step, a.Kind, a.Attempt, a.Worker, a.Outcome})
		if a.RunID != id || (a.ID == 0) != (a.Outcome == persistence.OutcomeRunning && a.Kind == persistence.AttemptForward) {
			t.Errorf("attempt = %+v (ID 0 is for, and only for, a handler execution in progress)", a)
		}
	}
	want := []row{
		{"a", persistence.AttemptForward, 1, "w-fa", persistence.OutcomeSucceeded},
		{"b", persistence.AttemptForward, 1, "w-fb", persistence.OutcomeSucceeded},
		{"c", persistence.AttemptForward, 1, "w-fc", persistence.OutcomeRunning},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if d := atts[0].Duration(); d != 2*time.Second {
		t.Errorf("attempt a took %v, want 2s", d)
	}
	if atts[2].FinishedAt != nil {
		t.Errorf("running attempt has FinishedAt %v", atts[2].FinishedAt)
	}
}

func (s *suite) testStepClaimRunNotRunning(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b")
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: r.Run.ID, To: persistence.RunCancelled, Now: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	// The steps are still queued (no CancelPendingSteps), but the run is
	// not running: forward claims fail and change nothing.
	_, err := st.StepClaim(c, persistence.StepClaimParams{RunID: r.Run.ID, Step: "a", Fence: "f", Worker: "w", LeaseUntil: at(time.Hour), Now: at(2 * time.Second)})
	if !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("claim in cancelled run = %v, want ErrNotClaimable", err)
	}
	if got := getStep(t, st, r.Run.ID, "a"); got.Status != persistence.StepQueued || got.Attempt != 0 || got.Fence != "" {
		t.Errorf("refused claim changed the step: %+v", got)
	}
	if atts, _ := st.AttemptList(c, r.Run.ID); len(atts) != 0 {
		t.Errorf("refused claim left attempts: %+v", atts)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: newID(t), Step: "a", Fence: "f", Worker: "w", LeaseUntil: at(time.Hour), Now: at(2 * time.Second)}); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("claim in unknown run = %v, want ErrStepNotFound", err)
	}
}

// testTakeover: a lease that expired can be taken over; the old holder's
// fence then completes, fails and heartbeats nothing.
func (s *suite) testTakeover(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a")
	id := r.Run.ID
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "old", Worker: "w1", LeaseUntil: at(10 * time.Second), Now: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	// Not before the lease expires (strictly before Now).
	for _, now := range []time.Time{at(5 * time.Second), at(10 * time.Second)} {
		if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "new", Worker: "w2", LeaseUntil: at(time.Minute), Now: now}); !errors.Is(err, persistence.ErrNotClaimable) {
			t.Errorf("takeover at %v = %v, want ErrNotClaimable", now.Sub(t0), err)
		}
	}
	tk, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "new", Worker: "w2", LeaseUntil: at(time.Minute), Now: at(11 * time.Second)})
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if tk.Step.Attempt != 2 || tk.Step.Fence != "new" {
		t.Errorf("taken over step = %+v, want attempt 2 with the new fence", tk.Step)
	}
	before := getStep(t, st, id, "a")

	err = st.StepHeartbeat(c, persistence.StepHeartbeatParams{RunID: id, Step: "a", Fence: "old", LeaseUntil: at(time.Hour), Now: at(12 * time.Second)})
	if !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("stale heartbeat = %v, want ErrFenceMismatch", err)
	}
	_, err = st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "a", Fence: "old", Output: []byte(`1`), Now: at(12 * time.Second)})
	if !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("stale complete = %v, want ErrFenceMismatch", err)
	}
	_, err = st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "old", Error: "boom", Now: at(12 * time.Second)})
	if !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("stale fail = %v, want ErrFenceMismatch", err)
	}
	_, err = st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "", Error: "boom", Now: at(12 * time.Second)})
	if !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("empty-fence fail = %v, want ErrFenceMismatch", err)
	}
	if diff := cmp.Diff(before, getStep(t, st, id, "a")); diff != "" {
		t.Errorf("stale calls changed the step (-before +after):\n%s", diff)
	}
	wantStatuses(t, st, id, map[string]persistence.StepStatus{"a": persistence.StepRunning, "b": persistence.StepWaiting})

	atts, err := st.AttemptList(c, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 || atts[0].Outcome != persistence.OutcomeLost || atts[0].Worker != "w1" || atts[0].FinishedAt == nil ||
		atts[1].Outcome != persistence.OutcomeRunning || atts[1].Attempt != 2 || atts[1].Worker != "w2" {
		t.Errorf("attempts after takeover = %+v", atts)
	}
	// The new holder completes normally.
	done := complete(t, st, id, "a", "new", `"ok"`, at(13*time.Second))
	if diff := cmp.Diff([]string{"b"}, names(done.Ready)); diff != "" {
		t.Errorf("ready (-want +got):\n%s", diff)
	}
	// And its fence is spent afterwards.
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "a", Fence: "new", Now: at(14 * time.Second)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("second complete = %v, want ErrFenceMismatch", err)
	}
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "zz", Fence: "new", Now: at(14 * time.Second)}); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("complete of unknown step = %v, want ErrStepNotFound", err)
	}
}

func (s *suite) testHeartbeat(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a")
	id := r.Run.ID
	claim(t, st, id, "a", "f", at(time.Second))
	if err := st.StepHeartbeat(c, persistence.StepHeartbeatParams{RunID: id, Step: "a", Fence: "f", LeaseUntil: at(5 * time.Minute), Now: at(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	// The same heartbeat twice (no column changes) still matches.
	if err := st.StepHeartbeat(c, persistence.StepHeartbeatParams{RunID: id, Step: "a", Fence: "f", LeaseUntil: at(5 * time.Minute), Now: at(30 * time.Second)}); err != nil {
		t.Errorf("repeated heartbeat: %v", err)
	}
	got := getStep(t, st, id, "a")
	if got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(at(5*time.Minute)) {
		t.Errorf("lease = %v, want +5m", got.LeaseExpiresAt)
	}
	// The extended lease protects the step from a takeover.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "g", Worker: "w", LeaseUntil: at(time.Hour), Now: at(2 * time.Minute)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("claim under extended lease = %v, want ErrNotClaimable", err)
	}
	if err := st.StepHeartbeat(c, persistence.StepHeartbeatParams{RunID: id, Step: "a", Fence: "g", LeaseUntil: at(time.Hour), Now: at(time.Minute)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("heartbeat with wrong fence = %v, want ErrFenceMismatch", err)
	}
	if err := st.StepHeartbeat(c, persistence.StepHeartbeatParams{RunID: id, Step: "zz", Fence: "f", LeaseUntil: at(time.Hour), Now: at(time.Minute)}); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("heartbeat of unknown step = %v, want ErrStepNotFound", err)
	}
	complete(t, st, id, "a", "f", "", at(3*time.Minute))
	if err := st.StepHeartbeat(c, persistence.StepHeartbeatParams{RunID: id, Step: "a", Fence: "f", LeaseUntil: at(time.Hour), Now: at(4 * time.Minute)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("heartbeat after complete = %v, want ErrFenceMismatch", err)
	}
}

func (s *suite) testCompleteReleases(t *testing.T, st persistence.Store) {
	// a -> b, c -> d ; e independent.
	r := createRun(t, st, "wf", "", "a", "b:a", "c:a", "d:b,c", "e")
	id := r.Run.ID
	claim(t, st, id, "a", "fa", at(time.Second))
	res := complete(t, st, id, "a", "fa", `{"x":1}`, at(2*time.Second))
	if res.Step.Status != persistence.StepSucceeded || string(res.Step.Output) != `{"x":1}` || res.Step.Fence != "" ||
		res.Step.LeaseExpiresAt != nil || res.Step.FinishedAt == nil || !res.Step.FinishedAt.Equal(at(2*time.Second)) {
		t.Errorf("completed step = %+v", res.Step)
	}
	if diff := cmp.Diff(res.Step, getStep(t, st, id, "a")); diff != "" {
		t.Errorf("returned vs stored step (-returned +stored):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b", "c"}, names(res.Ready)); diff != "" {
		t.Errorf("ready after a (-want +got):\n%s", diff)
	}
	for _, sr := range res.Ready {
		if sr.Status != persistence.StepQueued || sr.PendingDeps != 0 || sr.QueuedAt == nil {
			t.Errorf("ready step = %+v", sr)
		}
		if diff := cmp.Diff(sr, getStep(t, st, id, sr.Step)); diff != "" {
			t.Errorf("returned vs stored ready step (-returned +stored):\n%s", diff)
		}
	}
	if res.RunFinished {
		t.Error("RunFinished after a")
	}
	claim(t, st, id, "b", "fb", at(3*time.Second))
	claim(t, st, id, "c", "fc", at(3*time.Second))
	if res := complete(t, st, id, "b", "fb", "", at(4*time.Second)); len(res.Ready) != 0 {
		t.Errorf("ready after b = %v, want none (d waits for c)", names(res.Ready))
	}
	if got := getStep(t, st, id, "d"); got.PendingDeps != 1 || got.Status != persistence.StepWaiting {
		t.Errorf("d after b = %+v, want waiting with 1 pending", got)
	}
	if res := complete(t, st, id, "c", "fc", "", at(5*time.Second)); len(res.Ready) != 1 || res.Ready[0].Step != "d" {
		t.Errorf("ready after c = %v, want d", names(res.Ready))
	}
	claim(t, st, id, "d", "fd", at(6*time.Second))
	if res := complete(t, st, id, "d", "fd", "", at(7*time.Second)); res.RunFinished {
		t.Error("RunFinished while e is queued")
	}
	if got := getRun(t, st, id); got.Status != persistence.RunRunning {
		t.Errorf("run = %s, want running", got.Status)
	}
	claim(t, st, id, "e", "fe", at(8*time.Second))
	res = complete(t, st, id, "e", "fe", "", at(9*time.Second))
	if !res.RunFinished {
		t.Error("RunFinished = false after the last step")
	}
	run := getRun(t, st, id)
	if run.Status != persistence.RunSucceeded || run.FinishedAt == nil || !run.FinishedAt.Equal(at(9*time.Second)) {
		t.Errorf("finished run = %+v", run)
	}
}

func (s *suite) testCompleteSkipped(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a", "c:b")
	id := r.Run.ID
	claim(t, st, id, "a", "fa", at(time.Second))
	complete(t, st, id, "a", "fa", "", at(2*time.Second))
	claim(t, st, id, "b", "fb", at(3*time.Second))
	res, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "b", Fence: "fb", Skipped: true, Now: at(4 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Step.Status != persistence.StepSkipped || res.Step.Output != nil {
		t.Errorf("skipped step = %+v", res.Step)
	}
	if diff := cmp.Diff([]string{"c"}, names(res.Ready)); diff != "" {
		t.Errorf("ready after skip (-want +got):\n%s", diff)
	}
	atts, _ := st.AttemptList(c, id)
	if len(atts) != 2 || atts[1].Outcome != persistence.OutcomeSkipped {
		t.Errorf("attempts = %+v, want b skipped", atts)
	}
	claim(t, st, id, "c", "fc", at(5*time.Second))
	res, err = st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "c", Fence: "fc", Skipped: true, Now: at(6 * time.Second)})
	if err != nil || !res.RunFinished {
		t.Errorf("skipping the last step: RunFinished %v, %v; want the run finished", res.RunFinished, err)
	}
}

func (s *suite) testCompletePayload(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a")
	id := r.Run.ID
	claim(t, st, id, "a", "f", at(time.Second))
	big := []byte(`"` + strings.Repeat("y", 1<<20) + `"`)
	var le *persistence.LimitError
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "a", Fence: "f", Output: big, Now: at(2 * time.Second)}); !errors.As(err, &le) || !errors.Is(err, persistence.ErrTooLarge) {
		t.Errorf("too large output = %v, want *LimitError", err)
	}
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "a", Fence: "f", Output: []byte(`{"a"`), Now: at(2 * time.Second)}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("invalid output = %v, want ErrInvalid", err)
	}
	if got := getStep(t, st, id, "a"); got.Status != persistence.StepRunning {
		t.Errorf("refused output changed the step: %+v", got)
	}
	// Just under the limit is fine.
	ok := []byte(`"` + strings.Repeat("z", 1<<20-2) + `"`)
	res := complete(t, st, id, "a", "f", string(ok), at(3*time.Second))
	if got := getStep(t, st, id, "a"); string(got.Output) != string(ok) || !res.RunFinished {
		t.Errorf("1 MiB output did not round-trip (len %d)", len(got.Output))
	}
}

func (s *suite) testFailRetryDead(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a")
	id := r.Run.ID
	claim(t, st, id, "a", "f1", at(time.Second))
	retryAt := at(time.Minute)
	got, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "f1", Error: "timeout", RetryAt: &retryAt, Now: at(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != persistence.StepRetrying || got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(retryAt) ||
		got.Fence != "" || got.LeaseExpiresAt != nil || got.Error != "timeout" || got.FinishedAt != nil {
		t.Errorf("retrying step = %+v", got)
	}
	if diff := cmp.Diff(got, getStep(t, st, id, "a")); diff != "" {
		t.Errorf("returned vs stored (-returned +stored):\n%s", diff)
	}
	// The failed fence is spent.
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "f1", Error: "again", Now: at(3 * time.Second)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("second fail = %v, want ErrFenceMismatch", err)
	}
	due, err := st.StepListRetryDue(c, persistence.ListDueParams{Before: at(30 * time.Second)})
	if err != nil || len(due) != 0 {
		t.Errorf("retry due early = %v, %v; want none", names(due), err)
	}
	due, err = st.StepListRetryDue(c, persistence.ListDueParams{Before: retryAt})
	if err != nil || len(due) != 1 || due[0].Step != "a" {
		t.Errorf("retry due = %v, %v; want a", names(due), err)
	}
	// Not claimable before it is due.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "f2", Worker: "w", LeaseUntil: at(time.Hour), Now: at(30 * time.Second)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("early retry claim = %v, want ErrNotClaimable", err)
	}
	c2 := claim(t, st, id, "a", "f2", retryAt)
	if c2.Step.Attempt != 2 || c2.Step.NextAttemptAt != nil {
		t.Errorf("retry claim = %+v, want attempt 2, no next attempt", c2.Step)
	}
	got, err = st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "f2", Error: "permanent: bad card", Now: at(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != persistence.StepDead || got.FinishedAt == nil || got.NextAttemptAt != nil || got.Error != "permanent: bad card" {
		t.Errorf("dead step = %+v", got)
	}
	dead, err := st.StepListDead(c, persistence.StepListDeadParams{})
	if err != nil || len(dead.Steps) != 1 || dead.Steps[0].Step != "a" || dead.NextCursor != "" {
		t.Errorf("dead list = %+v, %v", dead, err)
	}
	atts, _ := st.AttemptList(c, id)
	if len(atts) != 2 || atts[0].Outcome != persistence.OutcomeFailed || atts[0].Error != "timeout" ||
		atts[1].Outcome != persistence.OutcomeFailed || atts[1].Error != "permanent: bad card" || atts[1].Attempt != 2 {
		t.Errorf("attempts = %+v", atts)
	}
	// The run is left alone without DeadRunStatus.
	if run := getRun(t, st, id); run.Status != persistence.RunRunning {
		t.Errorf("run = %s, want running", run.Status)
	}
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "zz", Fence: "f", Now: at(time.Hour)}); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("fail of unknown step = %v, want ErrStepNotFound", err)
	}
	// A long error with invalid UTF-8 is stored, cleaned and truncated.
	r2 := createRun(t, st, "wf", "", "a")
	claim(t, st, r2.Run.ID, "a", "f", at(time.Second))
	long := "bad \xff byte " + strings.Repeat("é", 100<<10)
	got, err = st.StepFail(c, persistence.StepFailParams{RunID: r2.Run.ID, Step: "a", Fence: "f", Error: long, Now: at(2 * time.Second)})
	if err != nil {
		t.Fatalf("fail with a long error: %v", err)
	}
	stored := getStep(t, st, r2.Run.ID, "a").Error
	if stored != got.Error || len(stored) > 64<<10 || !strings.HasPrefix(stored, "bad \uFFFD byte é") {
		t.Errorf("stored error: %d bytes, prefix %q", len(stored), stored[:min(len(stored), 20)])
	}
}

func (s *suite) testFailDeadRunStatus(t *testing.T, st persistence.Store) {
	c := ctx(t)
	for _, to := range []persistence.RunStatus{persistence.RunCompensating, persistence.RunFailed} {
		r := createRun(t, st, "wf", "", "a", "b", "c:a", "d:b")
		id := r.Run.ID
		claim(t, st, id, "a", "fa", at(time.Second))
		complete(t, st, id, "a", "fa", "", at(2*time.Second))
		claim(t, st, id, "b", "fb", at(2*time.Second))
		// A retry does not touch the run.
		retry := at(time.Minute)
		if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "b", Fence: "fb", RetryAt: &retry, Error: "x", DeadRunStatus: to, Now: at(3 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		if run := getRun(t, st, id); run.Status != persistence.RunRunning {
			t.Errorf("%s: run after a retry = %s", to, run.Status)
		}
		claim(t, st, id, "b", "fb2", retry)
		if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "b", Fence: "fb2", Error: "dead", DeadRunStatus: to, DeadRunError: "step b is dead", Now: at(2 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		run := getRun(t, st, id)
		if run.Status != to || run.Error != "step b is dead" {
			t.Errorf("%s: run = %+v", to, run)
		}
		if (run.FinishedAt != nil) != to.Terminal() {
			t.Errorf("%s: FinishedAt = %v", to, run.FinishedAt)
		}
		wantStatuses(t, st, id, map[string]persistence.StepStatus{
			"a": persistence.StepSucceeded, "b": persistence.StepDead, "c": persistence.StepCancelled, "d": persistence.StepCancelled,
		})
	}
	r := createRun(t, st, "wf", "", "a")
	claim(t, st, r.Run.ID, "a", "f", at(time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: r.Run.ID, Step: "a", Fence: "f", DeadRunStatus: persistence.RunSucceeded, Now: at(time.Minute)}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("DeadRunStatus succeeded = %v, want ErrInvalid", err)
	}
}

func (s *suite) testRunReopen(t *testing.T, st persistence.Store) {
	c := ctx(t)
	// a -> b -> d ; c (independent, in flight when the run fails).
	r := createRun(t, st, "wf", "", "a", "b:a", "c", "d:b,c")
	id := r.Run.ID
	claim(t, st, id, "a", "fa", at(time.Second))
	complete(t, st, id, "a", "fa", "", at(2*time.Second))
	claim(t, st, id, "c", "fc", at(2*time.Second))
	claim(t, st, id, "b", "fb", at(3*time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "b", Fence: "fb", Error: "dead", DeadRunStatus: persistence.RunFailed, Now: at(4 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	wantStatuses(t, st, id, map[string]persistence.StepStatus{"a": persistence.StepSucceeded, "b": persistence.StepDead, "c": persistence.StepRunning, "d": persistence.StepCancelled})
	// c finishes after the run failed: d is cancelled and stays so.
	if res := complete(t, st, id, "c", "fc", "", at(5*time.Second)); len(res.Ready) != 0 || res.RunFinished {
		t.Errorf("late completion = ready %v finished %v", names(res.Ready), res.RunFinished)
	}
	if _, err := st.RunReopen(c, persistence.RunReopenParams{RunID: id, Steps: []string{"a"}, Now: at(time.Minute)}); !errors.Is(err, persistence.ErrInvalidTransition) {
		t.Errorf("reopen naming a succeeded step = %v, want ErrInvalidTransition", err)
	}
	queued, err := st.RunReopen(c, persistence.RunReopenParams{RunID: id, Steps: []string{"b"}, Now: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b"}, names(queued)); diff != "" {
		t.Errorf("reopen queued (-want +got):\n%s", diff)
	}
	if b := getStep(t, st, id, "b"); b.Status != persistence.StepQueued || b.Attempt != 0 || b.FinishedAt != nil {
		t.Errorf("reopened b = %+v", b)
	}
	if d := getStep(t, st, id, "d"); d.Status != persistence.StepWaiting || d.PendingDeps != 1 {
		t.Errorf("reopened d = %+v, want waiting on b only", d)
	}
	run := getRun(t, st, id)
	if run.Status != persistence.RunRunning || run.FinishedAt != nil {
		t.Errorf("reopened run = %+v", run)
	}
	claim(t, st, id, "b", "fb2", at(2*time.Minute))
	if res := complete(t, st, id, "b", "fb2", "", at(3*time.Minute)); len(res.Ready) != 1 || res.Ready[0].Step != "d" {
		t.Errorf("ready after reopened b = %v, want d", names(res.Ready))
	}
	claim(t, st, id, "d", "fd", at(4*time.Minute))
	if res := complete(t, st, id, "d", "fd", "", at(5*time.Minute)); !res.RunFinished {
		t.Error("the reopened run did not finish")
	}
	if _, err := st.RunReopen(c, persistence.RunReopenParams{RunID: id, Now: at(time.Hour)}); !errors.Is(err, persistence.ErrInvalidTransition) {
		t.Errorf("reopen of a succeeded run = %v, want ErrInvalidTransition", err)
	}
	if _, err := st.RunReopen(c, persistence.RunReopenParams{RunID: newID(t), Now: at(time.Hour)}); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("reopen of unknown run = %v, want ErrRunNotFound", err)
	}
	// Cancelled steps whose dependencies are done come back queued.
	r2 := createRun(t, st, "wf", "", "a", "b")
	claim(t, st, r2.Run.ID, "a", "f", at(time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: r2.Run.ID, Step: "a", Fence: "f", DeadRunStatus: persistence.RunFailed, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	queued, err = st.RunReopen(c, persistence.RunReopenParams{RunID: r2.Run.ID, Now: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b"}, names(queued)); diff != "" {
		t.Errorf("reopen without steps queued (-want +got):\n%s", diff)
	}
	wantStatuses(t, st, r2.Run.ID, map[string]persistence.StepStatus{"a": persistence.StepDead, "b": persistence.StepQueued})
}

func (s *suite) testCompensation(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a", "c:a")
	id := r.Run.ID
	claim(t, st, id, "a", "fa", at(time.Second))
	complete(t, st, id, "a", "fa", `{"charge":"ch_1"}`, at(2*time.Second))
	claim(t, st, id, "b", "fb", at(3*time.Second))
	complete(t, st, id, "b", "fb", `{"b":1}`, at(4*time.Second))
	claim(t, st, id, "c", "fc", at(5*time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "c", Fence: "fc", Error: "dead", DeadRunStatus: persistence.RunCompensating, Now: at(6 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	// Compensation claims need the step compensating.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "b", Compensation: true, Fence: "x", Worker: "w", LeaseUntil: at(time.Hour), Now: at(7 * time.Second)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("compensation claim of a succeeded step = %v, want ErrNotClaimable", err)
	}
	moved, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"b"}, From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: at(7 * time.Second)})
	if err != nil || len(moved) != 1 || moved[0].Status != persistence.StepCompensating || moved[0].Fence != "" {
		t.Fatalf("StepTransition to compensating = %+v, %v", moved, err)
	}
	if diff := cmp.Diff(moved[0], getStep(t, st, id, "b")); diff != "" {
		t.Errorf("returned vs stored (-returned +stored):\n%s", diff)
	}
	queued, err := st.StepListQueued(c, persistence.ListDueParams{Before: at(8 * time.Second)})
	if err != nil || len(queued) != 1 || queued[0].Step != "b" {
		t.Errorf("StepListQueued = %v, %v; want the compensating b", names(queued), err)
	}
	// A forward claim of a compensating step fails.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "b", Fence: "x", Worker: "w", LeaseUntil: at(time.Hour), Now: at(8 * time.Second)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("forward claim of compensating step = %v, want ErrNotClaimable", err)
	}
	cb, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "b", Compensation: true, Fence: "cb1", Worker: "w", LeaseUntil: at(time.Minute), Now: at(8 * time.Second), WithOutputs: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if cb.Step.CompAttempt != 1 || cb.Step.Attempt != 1 || cb.Step.Status != persistence.StepCompensating || cb.Step.Fence != "cb1" {
		t.Errorf("compensation claim = %+v", cb.Step)
	}
	if string(cb.Outputs["b"]) != `{"b":1}` {
		t.Errorf("compensation outputs = %v, want b's output", cb.Outputs)
	}
	if q, _ := st.StepListQueued(c, persistence.ListDueParams{Before: at(9 * time.Second)}); len(q) != 0 {
		t.Errorf("claimed compensation still listed as queued: %v", names(q))
	}
	// Not claimable twice while the lease holds.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "b", Compensation: true, Fence: "cb2", Worker: "w", LeaseUntil: at(time.Hour), Now: at(9 * time.Second)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("second compensation claim = %v, want ErrNotClaimable", err)
	}
	if err := st.StepHeartbeat(c, persistence.StepHeartbeatParams{RunID: id, Step: "b", Fence: "cb1", LeaseUntil: at(2 * time.Minute), Now: at(10 * time.Second)}); err != nil {
		t.Errorf("compensation heartbeat: %v", err)
	}
	// A forward completion with the compensation fence does not match.
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "b", Fence: "cb1", Now: at(10 * time.Second)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("forward complete of a compensation = %v, want ErrFenceMismatch", err)
	}
	retry := at(5 * time.Minute)
	got, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "b", Fence: "cb1", Compensation: true, Error: "refund api down", RetryAt: &retry, Now: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != persistence.StepCompensating || got.LeaseExpiresAt != nil || got.Fence != "" || got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(retry) {
		t.Errorf("compensation retry = %+v", got)
	}
	if q, _ := st.StepListQueued(c, persistence.ListDueParams{Before: at(time.Hour)}); len(q) != 0 {
		t.Errorf("compensation waiting for its retry listed as queued: %v", names(q))
	}
	if due, _ := st.StepListRetryDue(c, persistence.ListDueParams{Before: retry}); len(due) != 1 || due[0].Step != "b" {
		t.Errorf("StepListRetryDue = %v, want b", names(due))
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "b", Compensation: true, Fence: "cb2", Worker: "w", LeaseUntil: at(time.Hour), Now: at(2 * time.Minute)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("compensation claim before its retry = %v, want ErrNotClaimable", err)
	}
	cb2, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "b", Compensation: true, Fence: "cb2", Worker: "w", LeaseUntil: at(time.Hour), Now: retry})
	if err != nil || cb2.Step.CompAttempt != 2 {
		t.Fatalf("compensation retry claim = %+v, %v", cb2.Step, err)
	}
	res, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "b", Fence: "cb2", Compensation: true, Now: at(6 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Step.Status != persistence.StepCompensated || string(res.Step.Output) != `{"b":1}` || len(res.Ready) != 0 || res.RunFinished {
		t.Errorf("compensated = %+v", res)
	}
	// a's compensation dead-letters.
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"a"}, From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: at(7 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	claimA, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Compensation: true, Fence: "ca", Worker: "w", LeaseUntil: at(8 * time.Minute), Now: at(7 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	// Its lease expires: listed, then taken over (the lost attempt recorded).
	exp, err := st.StepListLeaseExpired(c, persistence.ListDueParams{Before: at(9 * time.Minute)})
	if err != nil || len(exp) != 1 || exp[0].Step != "a" {
		t.Errorf("StepListLeaseExpired = %v, %v; want a", names(exp), err)
	}
	_ = claimA
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Compensation: true, Fence: "ca2", Worker: "w2", LeaseUntil: at(time.Hour), Now: at(9 * time.Minute)}); err != nil {
		t.Fatalf("compensation takeover: %v", err)
	}
	got, err = st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "ca2", Compensation: true, Error: "gave up", Now: at(10 * time.Minute)})
	if err != nil || got.Status != persistence.StepCompensationFailed || got.FinishedAt == nil {
		t.Errorf("compensation failure = %+v, %v", got, err)
	}
	atts, _ := st.AttemptList(c, id)
	var comp []string
	for _, a := range atts {
		if a.Kind == persistence.AttemptCompensation {
			comp = append(comp, fmt.Sprintf("%s %d %s", a.Step, a.Attempt, a.Outcome))
		}
	}
	// By step in plan order (a before b, though b's were first), then by
	// attempt number.
	want := []string{"a 1 lost", "a 2 failed", "b 1 failed", "b 2 succeeded"}
	if diff := cmp.Diff(want, comp); diff != "" {
		t.Errorf("compensation attempts (-want +got):\n%s", diff)
	}
	// Compensation claims need a compensating run.
	r2 := createRun(t, st, "wf", "", "a")
	claim(t, st, r2.Run.ID, "a", "f", at(time.Second))
	complete(t, st, r2.Run.ID, "a", "f", "", at(2*time.Second))
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: r2.Run.ID, From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: at(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: r2.Run.ID, Step: "a", Compensation: true, Fence: "x", Worker: "w", LeaseUntil: at(time.Hour), Now: at(4 * time.Second)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("compensation claim in a succeeded run = %v, want ErrNotClaimable", err)
	}
}

func (s *suite) testStepTransition(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a")
	id := r.Run.ID
	claim(t, st, id, "a", "f", at(time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "f", Error: "boom", Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	// From does not match: nothing changes.
	moved, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"a"}, From: []persistence.StepStatus{persistence.StepRetrying}, To: persistence.StepQueued, Now: at(time.Minute)})
	if err != nil || len(moved) != 0 {
		t.Errorf("mismatched StepTransition = %v, %v; want nothing", names(moved), err)
	}
	// Requeue from the dead-letter queue.
	moved, err = st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"a"}, From: []persistence.StepStatus{persistence.StepDead}, To: persistence.StepQueued, Now: at(time.Minute)})
	if err != nil || len(moved) != 1 {
		t.Fatalf("requeue = %v, %v", names(moved), err)
	}
	a := moved[0]
	if a.Status != persistence.StepQueued || a.Attempt != 0 || a.NextAttemptAt != nil || a.QueuedAt == nil || !a.QueuedAt.Equal(at(time.Minute)) || a.FinishedAt != nil {
		t.Errorf("requeued step = %+v", a)
	}
	if diff := cmp.Diff(a, getStep(t, st, id, "a")); diff != "" {
		t.Errorf("returned vs stored (-returned +stored):\n%s", diff)
	}
	if c2 := claim(t, st, id, "a", "g", at(2*time.Minute)); c2.Step.Attempt != 1 {
		t.Errorf("claim after requeue: attempt %d, want 1", c2.Step.Attempt)
	}
	// All steps of the run (Steps empty), with an error message.
	moved, err = st.StepTransition(c, persistence.StepTransitionParams{RunID: id, From: []persistence.StepStatus{persistence.StepWaiting, persistence.StepRunning}, To: persistence.StepCancelled, Error: "cancelled by user", Now: at(3 * time.Minute)})
	if err != nil || len(moved) != 2 {
		t.Fatalf("cancel all = %v, %v", names(moved), err)
	}
	for _, m := range moved {
		if m.Status != persistence.StepCancelled || m.Error != "cancelled by user" || m.Fence != "" || m.LeaseExpiresAt != nil || m.FinishedAt == nil {
			t.Errorf("cancelled = %+v", m)
		}
		if diff := cmp.Diff(m, getStep(t, st, id, m.Step)); diff != "" {
			t.Errorf("returned vs stored (-returned +stored):\n%s", diff)
		}
	}
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: newID(t), From: []persistence.StepStatus{persistence.StepWaiting}, To: persistence.StepCancelled, Now: t0}); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("unknown run = %v, want ErrRunNotFound", err)
	}
	for _, p := range []persistence.StepTransitionParams{
		{RunID: id, From: []persistence.StepStatus{"nope"}, To: persistence.StepCancelled},
		{RunID: id, From: []persistence.StepStatus{persistence.StepWaiting}, To: "nope"},
		{RunID: id, To: persistence.StepCancelled},
	} {
		if _, err := st.StepTransition(c, p); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("StepTransition(%+v) = %v, want ErrInvalid", p, err)
		}
	}
}

func (s *suite) testReconcilerLists(t *testing.T, st persistence.Store) {
	c := ctx(t)
	var ids []string
	for i := range 4 {
		res, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Now: at(time.Duration(i) * time.Second), Steps: specs("a", "b:a")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Run.ID)
	}
	queued, err := st.StepListQueued(c, persistence.ListDueParams{Before: at(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	// Queued strictly before: the runs created at 0s and 1s.
	if len(queued) != 2 || queued[0].RunID != ids[0] || queued[1].RunID != ids[1] {
		t.Errorf("StepListQueued = %+v", queued)
	}
	if q, _ := st.StepListQueued(c, persistence.ListDueParams{Before: at(time.Hour), Limit: 3}); len(q) != 3 {
		t.Errorf("StepListQueued limit 3 = %d rows", len(q))
	}
	// Leases: two claimed with different deadlines.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: ids[0], Step: "a", Fence: "f0", Worker: "w", LeaseUntil: at(10 * time.Second), Now: at(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: ids[1], Step: "a", Fence: "f1", Worker: "w", LeaseUntil: at(20 * time.Second), Now: at(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	exp, err := st.StepListLeaseExpired(c, persistence.ListDueParams{Before: at(15 * time.Second)})
	if err != nil || len(exp) != 1 || exp[0].RunID != ids[0] {
		t.Errorf("StepListLeaseExpired(15s) = %+v, %v", exp, err)
	}
	if exp, _ := st.StepListLeaseExpired(c, persistence.ListDueParams{Before: at(10 * time.Second)}); len(exp) != 0 {
		t.Errorf("StepListLeaseExpired(10s) = %d rows, want 0 (expiry is strict)", len(exp))
	}
	if exp, _ := st.StepListLeaseExpired(c, persistence.ListDueParams{Before: at(time.Hour), Limit: 1}); len(exp) != 1 || exp[0].RunID != ids[0] {
		t.Errorf("StepListLeaseExpired limit 1 = %+v, want the earliest", exp)
	}
	if q, _ := st.StepListQueued(c, persistence.ListDueParams{Before: at(time.Hour)}); len(q) != 2 {
		t.Errorf("StepListQueued after claims = %d, want 2", len(q))
	}
	// Retries due, ordered by due time.
	for i, id := range ids[2:] {
		if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "r", Worker: "w", LeaseUntil: at(time.Minute), Now: at(5 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		due := at(time.Duration(100-i) * time.Second)
		if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "r", RetryAt: &due, Now: at(6 * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	due, err := st.StepListRetryDue(c, persistence.ListDueParams{Before: at(time.Hour)})
	if err != nil || len(due) != 2 || due[0].RunID != ids[3] || due[1].RunID != ids[2] {
		t.Errorf("StepListRetryDue = %+v, %v", due, err)
	}
}

func (s *suite) testListDeadPaging(t *testing.T, st persistence.Store) {
	c := ctx(t)
	type key struct{ Run, Step string }
	var want []key
	for i := range 3 {
		wf := "alpha"
		if i == 1 {
			wf = "beta"
		}
		r, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: wf, Now: t0, Steps: specs("a", "b")})
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []string{"a", "b"} {
			claim(t, st, r.Run.ID, step, "f", at(time.Second))
			// Steps of one run die at the same instant: ties break by
			// run id and step.
			if _, err := st.StepFail(c, persistence.StepFailParams{RunID: r.Run.ID, Step: step, Fence: "f", Error: "x", Now: at(time.Duration(i+1) * time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
		want = append([]key{{r.Run.ID, "b"}, {r.Run.ID, "a"}}, want...)
	}
	collect := func(p persistence.StepListDeadParams) []key {
		var got []key
		for range 10 {
			page, err := st.StepListDead(c, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page.Steps {
				got = append(got, key{s.RunID, s.Step})
			}
			if page.NextCursor == "" {
				break
			}
			p.Cursor = page.NextCursor
		}
		return got
	}
	if diff := cmp.Diff(want, collect(persistence.StepListDeadParams{Limit: 4})); diff != "" {
		t.Errorf("dead steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, collect(persistence.StepListDeadParams{Limit: 1})); diff != "" {
		t.Errorf("dead steps by one (-want +got):\n%s", diff)
	}
	beta := collect(persistence.StepListDeadParams{Workflow: "beta", Limit: 1})
	if diff := cmp.Diff(want[2:4], beta); diff != "" {
		t.Errorf("beta's dead steps (-want +got):\n%s", diff)
	}
	if _, err := st.StepListDead(c, persistence.StepListDeadParams{Cursor: "garbage!"}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("bad cursor = %v, want ErrInvalid", err)
	}
}

// attemptRows returns a run's attempts of one step as (attempt, worker,
// outcome, recorded) strings.
func attemptRows(t *testing.T, st persistence.Store, runID, step string) []string {
	t.Helper()
	atts, err := st.AttemptList(ctx(t), runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		if a.Step != step || a.Kind != persistence.AttemptForward {
			continue
		}
		rec := "recorded"
		if a.ID == 0 {
			rec = "in progress"
		}
		fin := "-"
		if a.FinishedAt != nil {
			fin = a.FinishedAt.Sub(t0).String()
		}
		out = append(out, fmt.Sprintf("%d %s %s %s %s..%s", a.Attempt, a.Worker, a.Outcome, rec, a.StartedAt.Sub(t0), fin))
	}
	return out
}

// testAttemptHistory: an attempt in progress is shown from its step; the
// attempt's row is written when it ends (succeeded, failed, lost to a
// takeover) with its worker and start; an attempt aborted by a step
// transition stays in the history as it was.
func (s *suite) testAttemptHistory(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b")
	id := r.Run.ID
	claim(t, st, id, "a", "f1", at(time.Second))
	if diff := cmp.Diff([]string{"1 w-f1 running in progress 1s..-"}, attemptRows(t, st, id, "a")); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
	retry := at(3 * time.Second)
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "f1", Error: "boom", RetryAt: &retry, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	claim(t, st, id, "a", "f2", at(4*time.Second))
	// f2's lease (a minute) expires; f3 takes the step over.
	claim(t, st, id, "a", "f3", at(2*time.Minute))
	complete(t, st, id, "a", "f3", "", at(2*time.Minute+time.Second))
	want := []string{
		"1 w-f1 failed recorded 1s..2s",
		"2 w-f2 lost recorded 4s..2m0s",
		"3 w-f3 succeeded recorded 2m0s..2m1s",
	}
	if diff := cmp.Diff(want, attemptRows(t, st, id, "a")); diff != "" {
		t.Errorf("history of a (-want +got):\n%s", diff)
	}
	atts, _ := st.AttemptList(c, id)
	for _, a := range atts {
		if a.Step == "a" && a.Outcome == persistence.OutcomeFailed && a.Error != "boom" {
			t.Errorf("failed attempt error = %q, want boom", a.Error)
		}
	}
	claim(t, st, id, "b", "fb", at(5*time.Second))
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"b"},
		From: []persistence.StepStatus{persistence.StepRunning}, To: persistence.StepCancelled, Error: "run cancelled", Now: at(6 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1 w-fb running recorded 5s..-"}, attemptRows(t, st, id, "b")); diff != "" {
		t.Errorf("history of aborted b (-want +got):\n%s", diff)
	}
	t.Run("Order", func(t *testing.T) { s.testAttemptOrder(t, s.newStore(t)) })
}

// testAttemptOrder: AttemptList lists a run's attempts by step in plan
// order, each step's forward attempts by number, then its compensation
// attempts by number, with those in progress in their place, whatever
// order they started and ended in.
func (s *suite) testAttemptOrder(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := createRun(t, st, "wf", "", "a", "b", "c:a,b", "d").Run.ID
	claim(t, st, id, "b", "fb", at(time.Second))
	complete(t, st, id, "b", "fb", "", at(2*time.Second))
	claim(t, st, id, "d", "fd", at(2*time.Second)) // runs to the end
	claim(t, st, id, "a", "fa1", at(3*time.Second))
	retry := at(4 * time.Second)
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "fa1", Error: "boom", RetryAt: &retry, Now: retry}); err != nil {
		t.Fatal(err)
	}
	claim(t, st, id, "a", "fa2", at(5*time.Second))
	want := []string{
		"a step 1 w-fa1 failed 3s..4s",
		"a step 2 w-fa2 running 5s..-",
		"b step 1 w-fb succeeded 1s..2s",
		"d step 1 w-fd running 2s..-",
	}
	if diff := cmp.Diff(want, allAttempts(t, st, id)); diff != "" {
		t.Errorf("history with a retry in progress (-want +got):\n%s", diff)
	}
	complete(t, st, id, "a", "fa2", "", at(6*time.Second))
	claim(t, st, id, "c", "fc", at(7*time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "c", Fence: "fc", Error: "dead",
		DeadRunStatus: persistence.RunCompensating, Now: at(8 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"a", "b"},
		From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: at(9 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	compClaim := func(step, fence string, now time.Time) {
		t.Helper()
		if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: step, Compensation: true, Fence: fence,
			Worker: "w-" + fence, LeaseUntil: now.Add(time.Minute), Now: now}); err != nil {
			t.Fatalf("compensation claim of %s: %v", step, err)
		}
	}
	// b is undone first, then a's compensation fails once and is retried.
	compClaim("b", "cb", at(10*time.Second))
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "b", Fence: "cb", Compensation: true, Now: at(11 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	compClaim("a", "ca1", at(12*time.Second))
	retry = at(13 * time.Second)
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: "ca1", Compensation: true, Error: "refund down", RetryAt: &retry, Now: retry}); err != nil {
		t.Fatal(err)
	}
	compClaim("a", "ca2", at(14*time.Second))
	want = []string{
		"a step 1 w-fa1 failed 3s..4s",
		"a step 2 w-fa2 succeeded 5s..6s",
		"a compensation 1 w-ca1 failed 12s..13s",
		"a compensation 2 w-ca2 running 14s..-",
		"b step 1 w-fb succeeded 1s..2s",
		"b compensation 1 w-cb succeeded 10s..11s",
		"c step 1 w-fc failed 7s..8s",
		"d step 1 w-fd running 2s..-",
	}
	if diff := cmp.Diff(want, allAttempts(t, st, id)); diff != "" {
		t.Errorf("history while compensating (-want +got):\n%s", diff)
	}
}

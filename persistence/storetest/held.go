package storetest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// allAttempts returns a run's attempts as "step kind attempt worker
// outcome start..finish" strings, in AttemptList's order, and checks that
// every ended attempt has a nonzero ID, distinct within the run.
func allAttempts(t *testing.T, st persistence.Store, runID string) []string {
	t.Helper()
	atts, err := st.AttemptList(ctx(t), runID)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]bool{}
	var out []string
	for _, a := range atts {
		running := a.Kind == persistence.AttemptForward && a.Outcome == persistence.OutcomeRunning
		if (a.ID == 0) != running || (a.ID != 0 && ids[a.ID]) {
			t.Errorf("attempt %+v: ID 0 is for a handler execution in progress, other IDs are distinct", a)
		}
		ids[a.ID] = true
		fin := "-"
		if a.FinishedAt != nil {
			fin = a.FinishedAt.Sub(t0).String()
		}
		out = append(out, a.Step+" "+string(a.Kind)+" "+itoa(a.Attempt)+" "+a.Worker+" "+string(a.Outcome)+" "+
			a.StartedAt.Sub(t0).String()+".."+fin)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// testHeldAttempts: a forward attempt that succeeds or is skipped is kept
// on its step row, not in an attempt row of its own; the history shows it
// in its place among the recorded attempts (by step in plan order, then
// by kind and number), once, and keeps it when the step moves on (to
// compensating) and its row is written.
func (s *suite) testHeldAttempts(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a", "c", "d:b,c")
	id := r.Run.ID
	claim(t, st, id, "c", "fc", at(2*time.Second))
	claim(t, st, id, "a", "fa", at(time.Second))
	complete(t, st, id, "c", "fc", `{"c":1}`, at(2500*time.Millisecond))
	complete(t, st, id, "a", "fa", `{"a":1}`, at(3*time.Second))
	claim(t, st, id, "b", "fb1", at(4*time.Second))
	retry := at(5 * time.Second)
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "b", Fence: "fb1", Error: "boom", RetryAt: &retry, Now: at(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	claim(t, st, id, "b", "fb2", at(6*time.Second))
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "b", Fence: "fb2", Skipped: true, Now: at(7 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	claim(t, st, id, "d", "fd", at(8*time.Second))
	// c ended first, but a, b, c, d is the plan's order.
	want := []string{
		"a step 1 w-fa succeeded 1s..3s",
		"b step 1 w-fb1 failed 4s..5s",
		"b step 2 w-fb2 skipped 6s..7s",
		"c step 1 w-fc succeeded 2s..2.5s",
		"d step 1 w-fd running 8s..-",
	}
	if diff := cmp.Diff(want, allAttempts(t, st, id)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// d dies and the run compensates: a and c move to compensating. Their
	// forward attempts stay in the history, once, as they were.
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "d", Fence: "fd", Error: "dead", DeadRunStatus: persistence.RunCompensating, Now: at(9 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"a", "c"},
		From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: at(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	want[4] = "d step 1 w-fd failed 8s..9s"
	if diff := cmp.Diff(want, allAttempts(t, st, id)); diff != "" {
		t.Errorf("history after the transition to compensating (-want +got):\n%s", diff)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Compensation: true, Fence: "ca", Worker: "w-ca", LeaseUntil: at(time.Hour), Now: at(11 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "a", Fence: "ca", Compensation: true, Now: at(12 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	// a's compensation follows a's forward attempt.
	want = slices.Insert(want, 1, "a compensation 1 w-ca succeeded 11s..12s")
	if diff := cmp.Diff(want, allAttempts(t, st, id)); diff != "" {
		t.Errorf("history after a's compensation (-want +got):\n%s", diff)
	}

	// A step moved on from retrying (its failed attempt recorded) holds no
	// attempt: skipping it adds nothing to the history.
	r2 := createRun(t, st, "wf", "", "a")
	claim(t, st, r2.Run.ID, "a", "f1", at(time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: r2.Run.ID, Step: "a", Fence: "f1", Error: "boom", RetryAt: &retry, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: r2.Run.ID, Steps: []string{"a"},
		From: []persistence.StepStatus{persistence.StepRetrying}, To: persistence.StepSkipped, Now: at(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a step 1 w-f1 failed 1s..2s"}, allAttempts(t, st, r2.Run.ID)); diff != "" {
		t.Errorf("history of a step skipped while retrying (-want +got):\n%s", diff)
	}
}

// testEndedAttemptRows: steps that succeeded before step rows held their
// attempts have an attempt row too; the history shows such an attempt
// once, and moving the step on does not write it again.
func (s *suite) testEndedAttemptRows(t *testing.T, st persistence.Store) {
	if s.opts.beginTx == nil {
		t.Skip("needs WithBeginTx")
	}
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a")
	id := r.Run.ID
	claim(t, st, id, "a", "fa", at(time.Second))
	complete(t, st, id, "a", "fa", "", at(2*time.Second))
	tx, err := s.opts.beginTx(c, st)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// The row the store wrote before: the same attempt, ended at t0+2s.
	if _, err := tx.ExecContext(c, `INSERT INTO step_attempts (run_id, step, kind, attempt, worker, fence, outcome, started_at, finished_at)
		VALUES (?, 'a', ?, 1, 'w-fa', 'fa', ?, '2026-03-04 05:06:08.123456', '2026-03-04 05:06:09.123456')`,
		id, string(persistence.AttemptForward), string(persistence.OutcomeSucceeded)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a step 1 w-fa succeeded 1s..2s"}
	if diff := cmp.Diff(want, allAttempts(t, st, id)); diff != "" {
		t.Errorf("history with the old row (-want +got):\n%s", diff)
	}
	claim(t, st, id, "b", "fb", at(3*time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "b", Fence: "fb", Error: "dead", DeadRunStatus: persistence.RunCompensating, Now: at(4 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"a"},
		From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: at(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "b step 1 w-fb failed 3s..4s")
	if diff := cmp.Diff(want, allAttempts(t, st, id)); diff != "" {
		t.Errorf("history after a moved on (-want +got):\n%s", diff)
	}
}

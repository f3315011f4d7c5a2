package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// deadRun creates a run a -> b -> d, c and makes b dead with runStatus
// (failed or compensating); a succeeded with an output, c too.
func deadRun(t *testing.T, st persistence.Store, runStatus persistence.RunStatus) string {
	t.Helper()
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a", "c", "d:b,c")
	id := r.Run.ID
	claim(t, st, id, "a", "fa", at(time.Second))
	complete(t, st, id, "a", "fa", `{"a":1}`, at(2*time.Second))
	claim(t, st, id, "c", "fc", at(2*time.Second))
	complete(t, st, id, "c", "fc", `{"c":1}`, at(3*time.Second))
	claim(t, st, id, "b", "fb", at(3*time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "b", Fence: "fb", Error: "dead", DeadRunStatus: runStatus, Now: at(4 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	return id
}

// compensate undoes the succeeded steps of a compensating run and ends it
// compensated, as the saga would.
func compensate(t *testing.T, st persistence.Store, id string, steps ...string) {
	t.Helper()
	c := ctx(t)
	for i, s := range steps {
		now := at(time.Duration(10+i) * time.Second)
		if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{s},
			From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: s, Compensation: true, Fence: "u" + s,
			Worker: "w", LeaseUntil: at(time.Hour), Now: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: s, Fence: "u" + s, Compensation: true, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: id, From: []persistence.RunStatus{persistence.RunCompensating},
		To: persistence.RunCompensated, Error: "b dead", Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
}

func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	var re *persistence.RetryRefusedError
	if !errors.As(err, &re) || !errors.Is(err, persistence.ErrInvalidTransition) || re.Reason == "" {
		t.Errorf("%s = %v, want a *RetryRefusedError", what, err)
	}
}

func (s *suite) testRunRetryFailed(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := deadRun(t, st, persistence.RunFailed)
	res, err := st.RunRetry(c, persistence.RunRetryParams{RunID: id, Mode: persistence.RetryFailed, Actor: "alice", Now: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b"}, names(res.Queued)); diff != "" {
		t.Errorf("retry queued (-want +got):\n%s", diff)
	}
	wantStatuses(t, st, id, map[string]persistence.StepStatus{"a": persistence.StepSucceeded, "b": persistence.StepQueued,
		"c": persistence.StepSucceeded, "d": persistence.StepWaiting})
	if a := getStep(t, st, id, "a"); string(a.Output) != `{"a":1}` || a.Reruns != 0 {
		t.Errorf("kept a = %+v, want its output and no rerun", a)
	}
	if b := getStep(t, st, id, "b"); b.Attempt != 0 || b.Reruns != 0 || b.Error != "" {
		t.Errorf("retried b = %+v, want attempt 0, the same key (no rerun)", b)
	}
	if run := getRun(t, st, id); run.Status != persistence.RunRunning || run.FinishedAt != nil || run.Error != "" {
		t.Errorf("retried run = %+v", run)
	}
	want := persistence.RunAction{RunID: id, Seq: 1, At: at(time.Minute), Actor: "alice", Action: persistence.ActionRetry, Steps: []string{"b"}}
	if diff := cmp.Diff(want, res.Action); diff != "" {
		t.Errorf("action (-want +got):\n%s", diff)
	}
	// Refused while the run is running again; nothing recorded.
	_, err = st.RunRetry(c, persistence.RunRetryParams{RunID: id, Mode: persistence.RetryFailed, Actor: "alice", Now: at(2 * time.Minute)})
	wantRefused(t, "retry of a running run", err)
	_, err = st.StepSkip(c, persistence.StepSkipParams{RunID: id, Step: "b", Actor: "alice", Now: at(2 * time.Minute)})
	wantRefused(t, "skip in a running run", err)
	// b succeeds, d runs, the run succeeds: its history keeps the action.
	claim(t, st, id, "b", "fb2", at(2*time.Minute))
	complete(t, st, id, "b", "fb2", "", at(3*time.Minute))
	claim(t, st, id, "d", "fd", at(3*time.Minute))
	if r := complete(t, st, id, "d", "fd", "", at(4*time.Minute)); !r.RunFinished {
		t.Error("the retried run did not finish")
	}
	acts, err := st.RunActionList(c, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]persistence.RunAction{want}, acts); diff != "" {
		t.Errorf("RunActionList (-want +got):\n%s", diff)
	}
	_, err = st.RunRetry(c, persistence.RunRetryParams{RunID: id, Mode: persistence.RetryFailed, Actor: "alice", Now: at(time.Hour)})
	wantRefused(t, "retry of failed steps of a succeeded run", err)

	// Bad input names what was wrong and changes nothing.
	for _, p := range []persistence.RunRetryParams{
		{RunID: id, Mode: "everything", Actor: "a", Now: at(time.Hour)},
		{RunID: id, Mode: persistence.RetryFromStep, Actor: "a", Now: at(time.Hour)},
		{RunID: id, Mode: persistence.RetryFailed, Now: at(time.Hour)},
	} {
		if _, err := st.RunRetry(c, p); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("RunRetry(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	if _, err := st.RunRetry(c, persistence.RunRetryParams{RunID: id, Mode: persistence.RetryFromStep, Step: "nope", Actor: "a", Now: at(time.Hour)}); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("rerun from an unknown step = %v, want ErrStepNotFound", err)
	}
	if _, err := st.RunRetry(c, persistence.RunRetryParams{RunID: newID(t), Mode: persistence.RetryFailed, Actor: "a", Now: at(time.Hour)}); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("retry of an unknown run = %v, want ErrRunNotFound", err)
	}
	if acts, _ := st.RunActionList(c, id); len(acts) != 1 {
		t.Errorf("refused actions recorded: %+v", acts)
	}
}

func (s *suite) testRunRetryCompensated(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := deadRun(t, st, persistence.RunCompensating)
	compensate(t, st, id, "c", "a")
	undone := map[string]persistence.StepStatus{"a": persistence.StepCompensated, "b": persistence.StepDead,
		"c": persistence.StepCompensated, "d": persistence.StepCancelled}
	wantStatuses(t, st, id, undone)
	// A retry of the failed steps, of the dead one, or a skip would go on
	// from undone work: refused, saying to rerun from a step, and nothing
	// changes.
	refusals := map[string]error{}
	_, refusals["retry of a compensated run"] = st.RunRetry(c, persistence.RunRetryParams{RunID: id, Mode: persistence.RetryFailed, Actor: "cli", Now: at(2 * time.Minute)})
	_, refusals["retry of a dead step of a compensated run"] = st.RunRetry(c, persistence.RunRetryParams{RunID: id, Mode: persistence.RetryFailed, Step: "b", Actor: "cli", Now: at(2 * time.Minute)})
	_, refusals["skip in a compensated run"] = st.StepSkip(c, persistence.StepSkipParams{RunID: id, Step: "b", Output: []byte(`{"manual":true}`), Actor: "bob", Now: at(2 * time.Minute)})
	for what, err := range refusals {
		wantRefused(t, what, err)
		if err != nil && !strings.Contains(err.Error(), "rerun") {
			t.Errorf("%s: %q does not say to rerun from a step", what, err)
		}
	}
	wantStatuses(t, st, id, undone)
	if run := getRun(t, st, id); run.Status != persistence.RunCompensated {
		t.Errorf("run after the refusals = %s, want compensated", run.Status)
	}
	if acts, _ := st.RunActionList(c, id); len(acts) != 0 {
		t.Errorf("refused actions recorded: %+v", acts)
	}
	// A rerun from a step resumes it and redoes the undone a and c under
	// new keys: nothing of theirs is reused.
	res, err := st.RunRetry(c, persistence.RunRetryParams{RunID: id, Mode: persistence.RetryFromStep, Step: "b", Actor: "cli", Now: at(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "c"}, names(res.Queued)); diff != "" {
		t.Errorf("queued (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, res.Action.Steps); diff != "" {
		t.Errorf("steps run again (-want +got):\n%s", diff)
	}
	for _, n := range []string{"a", "c"} {
		if x := getStep(t, st, id, n); x.Reruns != 1 || x.Output != nil || x.Attempt != 1 || x.MaxAttempts != 4 || x.CompAttempt != 0 {
			t.Errorf("undone %s = %+v, want a rerun with a fresh budget after its attempt 1", n, x)
		}
	}
	if b := getStep(t, st, id, "b"); b.Status != persistence.StepWaiting || b.PendingDeps != 1 || b.Reruns != 0 {
		t.Errorf("dead b = %+v, want waiting on a", b)
	}
	// The first executions stay in the history.
	atts, err := st.AttemptList(c, id)
	if err != nil {
		t.Fatal(err)
	}
	var kept int
	for _, a := range atts {
		if a.Outcome == persistence.OutcomeSucceeded {
			kept++
		}
	}
	if kept != 4 { // a and c forward, a and c undone
		t.Errorf("history after the rerun has %d successes, want 4: %+v", kept, atts)
	}
	// A compensation that failed: refused, whatever the action.
	id3 := deadRun(t, st, persistence.RunCompensating)
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id3, Steps: []string{"a"},
		From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: at(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id3, Step: "a", Compensation: true, Fence: "ua",
		Worker: "w", LeaseUntil: at(time.Hour), Now: at(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id3, Step: "a", Fence: "ua", Compensation: true, Error: "refund refused", Now: at(11 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	_, err = st.RunRetry(c, persistence.RunRetryParams{RunID: id3, Mode: persistence.RetryFailed, Actor: "a", Now: at(time.Minute)})
	wantRefused(t, "retry of a compensating run", err)
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: id3, From: []persistence.RunStatus{persistence.RunCompensating},
		To: persistence.RunFailed, Error: "compensation failed", Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []persistence.RunRetryParams{
		{RunID: id3, Mode: persistence.RetryFailed, Actor: "a", Now: at(time.Hour)},
		{RunID: id3, Mode: persistence.RetryFromStep, Step: "a", Actor: "a", Now: at(time.Hour)},
	} {
		_, err := st.RunRetry(c, p)
		wantRefused(t, "retry of a run whose compensation failed ("+string(p.Mode)+")", err)
	}
	_, err = st.StepSkip(c, persistence.StepSkipParams{RunID: id3, Step: "b", Actor: "a", Now: at(time.Hour)})
	wantRefused(t, "skip in a run whose compensation failed", err)
	wantStatuses(t, st, id3, map[string]persistence.StepStatus{"a": persistence.StepCompensationFailed, "b": persistence.StepDead,
		"c": persistence.StepSucceeded, "d": persistence.StepCancelled})
}

func (s *suite) testRunRerunFromStep(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b:a", "c:b", "x")
	id := r.Run.ID
	for i, n := range []string{"a", "x", "b", "c"} {
		claim(t, st, id, n, "f"+n, at(time.Duration(2*i+1)*time.Second))
		complete(t, st, id, n, "f"+n, `{"n":1}`, at(time.Duration(2*i+2)*time.Second))
	}
	if run := getRun(t, st, id); run.Status != persistence.RunSucceeded {
		t.Fatalf("run = %s, want succeeded", run.Status)
	}
	res, err := st.RunRetry(c, persistence.RunRetryParams{RunID: id, Mode: persistence.RetryFromStep, Step: "b", Actor: "carol", Now: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b"}, names(res.Queued)); diff != "" {
		t.Errorf("rerun queued (-want +got):\n%s", diff)
	}
	wantStatuses(t, st, id, map[string]persistence.StepStatus{"a": persistence.StepSucceeded, "b": persistence.StepQueued,
		"c": persistence.StepWaiting, "x": persistence.StepSucceeded})
	for n, reruns := range map[string]int{"a": 0, "b": 1, "c": 1, "x": 0} {
		if got := getStep(t, st, id, n).Reruns; got != reruns {
			t.Errorf("step %s reruns = %d, want %d", n, got, reruns)
		}
	}
	if run := getRun(t, st, id); run.Status != persistence.RunRunning || run.FinishedAt != nil || run.Output != nil {
		t.Errorf("rerun run = %+v", run)
	}
	if res.Action.Action != persistence.ActionRerun || res.Action.Step != "b" || res.Action.Actor != "carol" ||
		!cmp.Equal(res.Action.Steps, []string{"b", "c"}) {
		t.Errorf("action = %+v", res.Action)
	}
	claim(t, st, id, "b", "fb2", at(2*time.Minute))
	complete(t, st, id, "b", "fb2", "", at(3*time.Minute))
	claim(t, st, id, "c", "fc2", at(3*time.Minute))
	if r := complete(t, st, id, "c", "fc2", "", at(4*time.Minute)); !r.RunFinished {
		t.Error("the rerun did not finish")
	}
	// The rerun's attempts follow the first ones in the history.
	atts, _ := st.AttemptList(c, id)
	var bs int
	for _, a := range atts {
		if a.Step == "b" && a.Outcome == persistence.OutcomeSucceeded {
			bs++
		}
	}
	if bs != 2 {
		t.Errorf("b's successes in the history = %d, want 2 (the first run and the rerun)", bs)
	}
	// A skip of a step that is not dead is refused.
	_, err = st.StepSkip(c, persistence.StepSkipParams{RunID: id, Step: "a", Actor: "a", Now: at(time.Hour)})
	wantRefused(t, "skip of a succeeded step", err)
	// Cancelled runs are not retried.
	r2 := createRun(t, st, "wf", "", "a")
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: r2.Run.ID, From: []persistence.RunStatus{persistence.RunRunning},
		To: persistence.RunCancelled, CancelPendingSteps: true, Now: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	_, err = st.RunRetry(c, persistence.RunRetryParams{RunID: r2.Run.ID, Mode: persistence.RetryFromStep, Step: "a", Actor: "a", Now: at(time.Hour)})
	wantRefused(t, "rerun of a cancelled run", err)
}

func (s *suite) testStepSkip(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := deadRun(t, st, persistence.RunFailed)
	if _, err := st.StepSkip(c, persistence.StepSkipParams{RunID: id, Step: "b", Output: []byte(`{"x":`), Actor: "a", Now: at(time.Minute)}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("skip with invalid JSON = %v, want ErrInvalid", err)
	}
	res, err := st.StepSkip(c, persistence.StepSkipParams{RunID: id, Step: "b", Output: []byte(`{"x":1}`), Actor: "dave", Now: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"d"}, names(res.Queued)); diff != "" {
		t.Errorf("skip queued (-want +got):\n%s", diff)
	}
	if b := getStep(t, st, id, "b"); b.Status != persistence.StepSucceeded || string(b.Output) != `{"x":1}` || b.FinishedAt == nil {
		t.Errorf("skipped b = %+v", b)
	}
	want := persistence.RunAction{RunID: id, Seq: 1, At: at(time.Minute), Actor: "dave", Action: persistence.ActionSkip, Step: "b"}
	if diff := cmp.Diff(want, res.Action); diff != "" {
		t.Errorf("action (-want +got):\n%s", diff)
	}
	// A skip of the last step finishes the run.
	r2 := createRun(t, st, "wf", "", "a")
	claim(t, st, r2.Run.ID, "a", "f", at(time.Second))
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: r2.Run.ID, Step: "a", Fence: "f", DeadRunStatus: persistence.RunFailed, Now: at(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	res, err = st.StepSkip(c, persistence.StepSkipParams{RunID: r2.Run.ID, Step: "a", Actor: "dave", Now: at(time.Minute)})
	if err != nil || len(res.Queued) != 0 {
		t.Fatalf("skip of the last step = %+v, %v", res, err)
	}
	if run := getRun(t, st, r2.Run.ID); run.Status != persistence.RunSucceeded || run.FinishedAt == nil {
		t.Errorf("run after its last step was skipped = %+v, want succeeded", run)
	}
	// Retention deletes a run's actions with it.
	if res, err := st.RunDeleteFinished(c, persistence.RunDeleteFinishedParams{Before: at(time.Hour), Limit: 100}); err != nil || len(res.RunIDs) == 0 || res.Actions == 0 {
		t.Fatalf("RunDeleteFinished = %+v, %v", res, err)
	}
	if acts, err := st.RunActionList(c, r2.Run.ID); err != nil || len(acts) != 0 {
		t.Errorf("actions of a deleted run = %+v, %v", acts, err)
	}
}

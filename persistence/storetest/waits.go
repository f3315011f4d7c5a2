package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Parked steps: StepPark, the resolution of a parked step by an event
// (EventCreate with a Correlation), by a signal (StepCompleteMany with
// Parked) and its failure by a timeout (StepFail with Parked),
// StepListParkedDue and StepWaitGet.

// parkedRun creates a run pay -> ship, claims pay and parks it waiting
// for payment.captured of correlation corr, timing out at due.
func parkedRun(t *testing.T, st persistence.Store, corr string, due time.Time) string {
	t.Helper()
	run := createRun(t, st, "order", `{"order_id":"`+corr+`"}`, "pay", "ship:pay")
	claim(t, st, run.Run.ID, "pay", "f1", at(time.Second))
	res, err := st.StepPark(ctx(t), persistence.StepParkParams{RunID: run.Run.ID, Step: "pay", Fence: "f1",
		Kind: persistence.WaitEvent, Event: "payment.captured", Correlation: corr, DueAt: &due,
		EventsSince: at(-time.Hour), Now: at(2 * time.Second)})
	if err != nil {
		t.Fatalf("StepPark: %v", err)
	}
	if res.Matched != nil || res.Step.Status != persistence.StepParked || res.Step.LeaseExpiresAt != nil {
		t.Fatalf("StepPark = %+v, want parked without a lease", res)
	}
	return run.Run.ID
}

// captured publishes payment.captured for corr.
func captured(t *testing.T, st persistence.Store, id, corr, payload string, now time.Time) persistence.EventCreateResult {
	t.Helper()
	res, err := st.EventCreate(ctx(t), persistence.EventCreateParams{ID: id, Name: "payment.captured",
		Payload: []byte(payload), Correlation: corr, Dispatched: true, Now: now})
	if err != nil {
		t.Fatalf("EventCreate(%s): %v", id, err)
	}
	return res
}

// testParkEventMatch: an event resolves exactly the steps parked for its
// correlation, with its payload as their output, releasing their
// dependents in the same transaction; another correlation's event and a
// repeat change nothing.
func (s *suite) testParkEventMatch(t *testing.T, st persistence.Store) {
	runA := parkedRun(t, st, "A", at(time.Hour))
	runB := parkedRun(t, st, "B", at(time.Hour))
	if w, err := st.StepWaitGet(ctx(t), runA, "pay"); err != nil || w.Event != "payment.captured" || w.Correlation != "A" ||
		w.Kind != persistence.WaitEvent || w.DueAt == nil || !w.DueAt.Equal(at(time.Hour)) || w.Workflow != "order" {
		t.Fatalf("StepWaitGet = %+v, %v", w, err)
	}

	resB := captured(t, st, "cap-b", "B", `{"amount":2}`, at(time.Minute))
	if len(resB.Resolved) != 1 || resB.Resolved[0].Step.RunID != runB {
		t.Fatalf("event for B resolved %+v, want B's step only", resB.Resolved)
	}
	wantStatuses(t, st, runA, map[string]persistence.StepStatus{"pay": persistence.StepParked, "ship": persistence.StepWaiting})

	resA := captured(t, st, "cap-a", "A", `{"amount":1}`, at(2*time.Minute))
	if len(resA.Resolved) != 1 || resA.Resolved[0].Step.RunID != runA || names(resA.Resolved[0].Ready)[0] != "ship" {
		t.Fatalf("event for A resolved %+v, want A's pay with ship ready", resA.Resolved)
	}
	pay := getStep(t, st, runA, "pay")
	if pay.Status != persistence.StepSucceeded || string(pay.Output) != `{"amount":1}` || pay.Attempt != 1 {
		t.Errorf("pay after its event = %+v, want succeeded with the payload", pay)
	}
	wantStatuses(t, st, runA, map[string]persistence.StepStatus{"pay": persistence.StepSucceeded, "ship": persistence.StepQueued})
	if _, err := st.StepWaitGet(ctx(t), runA, "pay"); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("StepWaitGet after the match: %v, want ErrStepNotFound", err)
	}
	if ev, err := st.EventGet(ctx(t), "cap-a"); err != nil || ev.Correlation != "A" {
		t.Errorf("EventGet = %+v, %v; want correlation A", ev, err)
	}
	// A second event of A finds no waiter.
	if again := captured(t, st, "cap-a2", "A", `{"amount":9}`, at(3*time.Minute)); len(again.Resolved) != 0 {
		t.Errorf("second event of A resolved %+v", again.Resolved)
	}
	if pay := getStep(t, st, runA, "pay"); string(pay.Output) != `{"amount":1}` {
		t.Errorf("pay's output after a second event = %s", pay.Output)
	}
	// A bad correlation is refused.
	if _, err := st.EventCreate(ctx(t), persistence.EventCreateParams{ID: "bad", Name: "payment.captured",
		Correlation: "a\x00b", Now: t0}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("NUL correlation: %v, want ErrInvalidArgument", err)
	}
}

// testParkEventFirst: an event published before the step parks (within
// the lookback window) is matched by the park, which parks nothing; one
// older than the window is not.
func (s *suite) testParkEventFirst(t *testing.T, st persistence.Store) {
	captured(t, st, "early", "C", `{"amount":3}`, t0)
	run := createRun(t, st, "order", `{}`, "pay", "ship:pay")
	claim(t, st, run.Run.ID, "pay", "f1", at(time.Second))
	park := persistence.StepParkParams{RunID: run.Run.ID, Step: "pay", Fence: "f1", Kind: persistence.WaitEvent,
		Event: "payment.captured", Correlation: "C", EventsSince: at(-time.Hour), Now: at(2 * time.Second)}
	res, err := st.StepPark(ctx(t), park)
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched == nil || res.Matched.ID != "early" || string(res.Matched.Payload) != `{"amount":3}` || res.Step.Status != persistence.StepRunning {
		t.Fatalf("StepPark after the event = %+v, want the event matched and the step still running", res)
	}
	complete(t, st, run.Run.ID, "pay", "f1", string(res.Matched.Payload), at(3*time.Second))

	// Outside the window: parked.
	run2 := createRun(t, st, "order", `{}`, "pay", "ship:pay")
	claim(t, st, run2.Run.ID, "pay", "f2", at(time.Second))
	park.RunID, park.Fence, park.EventsSince = run2.Run.ID, "f2", at(time.Millisecond)
	if res, err := st.StepPark(ctx(t), park); err != nil || res.Matched != nil || res.Step.Status != persistence.StepParked {
		t.Fatalf("StepPark with the event out of the window = %+v, %v; want parked", res, err)
	}
	// A stale fence parks nothing.
	park.Fence = "other"
	if _, err := st.StepPark(ctx(t), park); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("StepPark with a stale fence: %v, want ErrFenceMismatch", err)
	}
	park.Kind, park.Event, park.Correlation = persistence.WaitSleep, "", ""
	if _, err := st.StepPark(ctx(t), park); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("sleep without a due time: %v, want ErrInvalidArgument", err)
	}
}

// testParkTimeoutAndSignal: due waits are listed by their due time (and
// the next one is told), a timeout fails a parked step once, a signal
// resolves one once, and a cancelled run's parked steps are cancelled.
func (s *suite) testParkTimeoutAndSignal(t *testing.T, st persistence.Store) {
	late := parkedRun(t, st, "D", at(2*time.Hour))
	soon := parkedRun(t, st, "E", at(time.Hour))
	signalled := parkedRun(t, st, "F", at(3*time.Hour))

	due, next, err := st.StepListParkedDue(ctx(t), persistence.ListDueParams{Before: at(30 * time.Minute)})
	if err != nil || len(due) != 0 || !next.Equal(at(time.Hour)) {
		t.Fatalf("StepListParkedDue before any is due = %+v, next %v, %v; want none, next in an hour", due, next, err)
	}
	due, next, err = st.StepListParkedDue(ctx(t), persistence.ListDueParams{Before: at(90 * time.Minute)})
	if err != nil || len(due) != 1 || due[0].RunID != soon || !next.Equal(at(2*time.Hour)) {
		t.Fatalf("StepListParkedDue = %+v, next %v, %v; want the soonest, next at two hours", due, next, err)
	}

	retry := at(2 * time.Hour)
	// A timeout before the wait's deadline (a stale timer's, whose wait
	// was parked again with a later one) changes nothing.
	if _, err := st.StepFail(ctx(t), persistence.StepFailParams{RunID: soon, Step: "pay", Parked: true, TimedOut: true,
		Error: "timed out", RetryAt: &retry, Now: at(59 * time.Minute)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("timeout before the deadline: %v, want ErrFenceMismatch", err)
	}
	if got, err := st.StepGet(ctx(t), soon, "pay"); err != nil || got.Status != persistence.StepParked {
		t.Errorf("after a timeout before the deadline, pay = %s, %v; want still parked", got.Status, err)
	}
	failed, err := st.StepFail(ctx(t), persistence.StepFailParams{RunID: soon, Step: "pay", Parked: true, TimedOut: true,
		Error: "timed out", RetryAt: &retry, Now: at(time.Hour)})
	if err != nil || failed.Status != persistence.StepRetrying {
		t.Fatalf("StepFail(parked) = %+v, %v; want retrying", failed, err)
	}
	if _, err := st.StepFail(ctx(t), persistence.StepFailParams{RunID: soon, Step: "pay", Parked: true,
		Error: "timed out", Now: at(time.Hour)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("second timeout: %v, want ErrFenceMismatch", err)
	}
	if _, err := st.StepWaitGet(ctx(t), soon, "pay"); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("the wait of a timed out step: %v, want gone", err)
	}

	sig := persistence.StepCompleteParams{RunID: signalled, Step: "pay", Parked: true, Output: []byte(`{"ok":true}`), Now: at(time.Minute)}
	outs, err := st.StepCompleteMany(ctx(t), persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{sig}})
	if err != nil || outs[0].Err != nil || outs[0].Result.Step.Status != persistence.StepSucceeded {
		t.Fatalf("signal = %+v, %v", outs, err)
	}
	outs, err = st.StepCompleteMany(ctx(t), persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{sig}})
	if err != nil || !errors.Is(outs[0].Err, persistence.ErrFenceMismatch) {
		t.Errorf("second signal = %+v, %v; want ErrFenceMismatch", outs, err)
	}

	res, err := st.RunTransition(ctx(t), persistence.RunTransitionParams{RunID: late, From: []persistence.RunStatus{persistence.RunRunning},
		To: persistence.RunCancelled, CancelPendingSteps: true, Now: at(time.Minute)})
	if err != nil || len(res.Cancelled) != 2 {
		t.Fatalf("cancel = %+v, %v; want pay and ship cancelled", res, err)
	}
	wantStatuses(t, st, late, map[string]persistence.StepStatus{"pay": persistence.StepCancelled, "ship": persistence.StepCancelled})
	if due, _, err := st.StepListParkedDue(ctx(t), persistence.ListDueParams{Before: at(10 * time.Hour)}); err != nil || len(due) != 0 {
		t.Errorf("due waits after everything ended = %+v, %v; want none", due, err)
	}
}

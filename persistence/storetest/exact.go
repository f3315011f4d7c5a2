package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Keys are compared byte-exact: a value that differs from a stored one
// only by a trailing space (which MySQL's PAD SPACE collations ignore), a
// trailing tab, its case or one more character is another key, or is
// refused where the key's rule has no room for it. nearMisses are the
// white space variants of v.
func nearMisses(v string) []string { return []string{v + " ", v + "\t", v + "  "} }

// testExactCorrelation: a wait for "D-4004" is completed only by an event
// of exactly that correlation, however many near misses are published
// first, and with that event's payload.
func (s *suite) testExactCorrelation(t *testing.T, st persistence.Store) {
	run := parkedRun(t, st, "D-4004", at(time.Hour))
	for i, decoy := range append(nearMisses("D-4004"), "d-4004", "D-40040") {
		res := captured(t, st, "decoy-"+string(rune('a'+i)), decoy, `{"decoy":true}`, at(time.Minute))
		if len(res.Resolved) != 0 {
			t.Fatalf("event of correlation %q resolved %+v, want nothing (the wait is for %q)", decoy, res.Resolved, "D-4004")
		}
		if ev, err := st.EventGet(ctx(t), res.Event.ID); err != nil || ev.Correlation != decoy {
			t.Errorf("EventGet(%s) = correlation %q, %v; want %q as published", res.Event.ID, ev.Correlation, err, decoy)
		}
	}
	wantStatuses(t, st, run, map[string]persistence.StepStatus{"pay": persistence.StepParked, "ship": persistence.StepWaiting})
	if w, err := st.StepWaitGet(ctx(t), run, "pay"); err != nil || w.Correlation != "D-4004" {
		t.Fatalf("StepWaitGet = %+v, %v; want the wait for D-4004", w, err)
	}
	res := captured(t, st, "real", "D-4004", `{"amount":4}`, at(2*time.Minute))
	if len(res.Resolved) != 1 || res.Resolved[0].Step.RunID != run {
		t.Fatalf("event of correlation D-4004 resolved %+v, want the waiting step", res.Resolved)
	}
	if pay := getStep(t, st, run, "pay"); pay.Status != persistence.StepSucceeded || string(pay.Output) != `{"amount":4}` {
		t.Errorf("pay = %s with output %s, want succeeded with the exact event's payload", pay.Status, pay.Output)
	}
}

// testExactCorrelationLookback: a step that parks after the events finds
// only the one of exactly its correlation in the lookback window, both
// ways round: a wait for "E-1" ignores "E-1 ", and a wait for "E-2 "
// ignores "E-2". The parks and publications of near misses share no
// correlation lock that refuses or loses either.
func (s *suite) testExactCorrelationLookback(t *testing.T, st persistence.Store) {
	park := func(corr string) persistence.StepParkResult {
		t.Helper()
		run := createRun(t, st, "order", `{}`, "pay", "ship:pay")
		claim(t, st, run.Run.ID, "pay", "f1", at(time.Second))
		res, err := st.StepPark(ctx(t), persistence.StepParkParams{RunID: run.Run.ID, Step: "pay", Fence: "f1",
			Kind: persistence.WaitEvent, Event: "payment.captured", Correlation: corr,
			EventsSince: at(-time.Hour), Now: at(2 * time.Second)})
		if err != nil {
			t.Fatalf("StepPark(%q): %v", corr, err)
		}
		return res
	}
	for i, decoy := range append(nearMisses("E-1"), "e-1", "E-10") {
		captured(t, st, "e1-decoy-"+string(rune('a'+i)), decoy, `{"decoy":true}`, t0)
	}
	if res := park("E-1"); res.Matched != nil || res.Step.Status != persistence.StepParked {
		t.Errorf("a wait for E-1 after near misses matched %+v, want parked", res.Matched)
	}
	captured(t, st, "e2", "E-2", `{"decoy":true}`, t0)
	for _, corr := range append(nearMisses("E-2"), "e-2", "E-20") {
		if res := park(corr); res.Matched != nil || res.Step.Status != persistence.StepParked {
			t.Errorf("a wait for %q after the event of E-2 matched %+v, want parked", corr, res.Matched)
		}
	}
	captured(t, st, "e2-spaced", "E-2 ", `{"amount":2}`, at(time.Second))
	if res := park("E-2 "); res.Matched == nil || res.Matched.ID != "e2-spaced" || string(res.Matched.Payload) != `{"amount":2}` {
		t.Errorf("a wait for %q matched %+v, want the event of exactly that correlation", "E-2 ", res.Matched)
	}
}

// testExactNames: schedule, queue and API key names and event ids allow
// no white space, so a near miss of a stored one is refused or names
// nothing; another case names another key.
func (s *suite) testExactNames(t *testing.T, st persistence.Store) {
	c := ctx(t)
	if _, err := st.ScheduleCreate(c, persistence.Schedule{Name: "nightly", Spec: "@daily", Workflow: "wf", UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(nearMisses("nightly"), "Nightly", "nightly2") {
		if sc, err := st.ScheduleGet(c, n); !errors.Is(err, persistence.ErrScheduleNotFound) {
			t.Errorf("ScheduleGet(%q) = %q, %v; want ErrScheduleNotFound", n, sc.Name, err)
		}
		if err := st.ScheduleDelete(c, persistence.ScheduleDeleteParams{Name: n, Now: t0}); !errors.Is(err, persistence.ErrScheduleNotFound) {
			t.Errorf("ScheduleDelete(%q) = %v; want ErrScheduleNotFound", n, err)
		}
	}
	if sc, err := st.ScheduleGet(c, "nightly"); err != nil || sc.Name != "nightly" {
		t.Errorf("ScheduleGet(nightly) after the near misses = %+v, %v", sc, err)
	}

	if ok, err := st.QueueSetPaused(c, persistence.QueueSetPausedParams{Queue: "bill", Paused: true, Now: t0}); err != nil || !ok {
		t.Fatalf("QueueSetPaused(bill) = %v, %v", ok, err)
	}
	for _, n := range nearMisses("bill") {
		if _, err := st.QueueSetPaused(c, persistence.QueueSetPausedParams{Queue: n, Paused: false, Now: t0}); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("QueueSetPaused(%q) = %v; want ErrInvalid", n, err)
		}
	}
	if ok, err := st.QueueSetPaused(c, persistence.QueueSetPausedParams{Queue: "Bill", Paused: false, Now: t0}); err != nil || ok {
		t.Errorf("resuming Bill = %v, %v; want no change (bill is another queue)", ok, err)
	}
	if ps, err := st.QueueListPaused(c); err != nil || len(ps) != 1 || ps[0].Queue != "bill" {
		t.Errorf("QueueListPaused = %+v, %v; want bill alone", ps, err)
	}

	if _, err := st.APIKeyCreate(c, key(t, "ci", persistence.ScopeRead, "secret", t0)); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(nearMisses("ci"), "CI", "ci2") {
		if k, err := st.APIKeyRevoke(c, persistence.APIKeyRevokeParams{Name: n, Now: t0}); !errors.Is(err, persistence.ErrAPIKeyNotFound) {
			t.Errorf("APIKeyRevoke(%q) = %q, %v; want ErrAPIKeyNotFound", n, k.Name, err)
		}
	}
	if ks, err := st.APIKeyList(c); err != nil || len(ks) != 1 || ks[0].RevokedAt != nil {
		t.Errorf("APIKeyList = %v, %v; want ci, valid", keyNames(ks), err)
	}

	captured(t, st, "ev-1", "", `{}`, t0)
	for _, id := range nearMisses("ev-1") {
		if _, err := st.EventCreate(c, persistence.EventCreateParams{ID: id, Name: "payment.captured", Now: t0}); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("EventCreate(%q) = %v; want ErrInvalid", id, err)
		}
		if ev, err := st.EventGet(c, id); !errors.Is(err, persistence.ErrEventNotFound) {
			t.Errorf("EventGet(%q) = %q, %v; want ErrEventNotFound", id, ev.ID, err)
		}
	}
	if res := captured(t, st, "EV-1", "", `{}`, t0); !res.Created || res.Event.ID != "EV-1" {
		t.Errorf("EventCreate(EV-1) = %+v; want a new event", res)
	}
}

// testExactIdempotencyKeys: a near miss of a run's idempotency key
// starts another run; the key itself finds the first.
func (s *suite) testExactIdempotencyKeys(t *testing.T, st persistence.Store) {
	create := func(key string) persistence.RunCreateResult {
		t.Helper()
		res, err := st.RunCreate(ctx(t), persistence.RunCreateParams{ID: newID(t), Workflow: "order", Version: 1,
			IdempotencyKey: key, Now: t0, Steps: specs("a")})
		if err != nil {
			t.Fatalf("RunCreate(key %q): %v", key, err)
		}
		return res
	}
	first := create("order-7")
	seen := map[string]string{first.Run.ID: "order-7"}
	for _, k := range append(nearMisses("order-7"), "Order-7", "order-70") {
		res := create(k)
		if !res.Created || seen[res.Run.ID] != "" {
			t.Errorf("key %q answered run %s of key %q, want a new run", k, res.Run.ID, seen[res.Run.ID])
		}
		seen[res.Run.ID] = k
	}
	if again := create("order-7"); again.Created || again.Run.ID != first.Run.ID {
		t.Errorf("key order-7 again = run %s (created %v), want the first run %s", again.Run.ID, again.Created, first.Run.ID)
	}
}

// testExactNodeTokens: node ids, lease holders and workers may not end
// (or begin) with white space, so two of them never differ by trailing
// spaces alone; a lease is held, renewed and released by its holder's
// exact name only, and a worker's leases are released by its exact name
// only.
func (s *suite) testExactNodeTokens(t *testing.T, st persistence.Store) {
	c := ctx(t)
	lease := func(holder string) (bool, error) {
		return st.LeaseAcquire(c, persistence.LeaseParams{Name: "retention", Holder: holder, Until: at(time.Minute), Now: t0})
	}
	if ok, err := lease("node-1"); err != nil || !ok {
		t.Fatalf("LeaseAcquire(node-1) = %v, %v", ok, err)
	}
	for _, h := range []string{"node-1 ", "node-1\t", " node-1"} {
		if ok, err := lease(h); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("LeaseAcquire(%q) = %v, %v; want ErrInvalid", h, ok, err)
		}
		if err := st.LeaseRelease(c, persistence.LeaseParams{Name: "retention", Holder: h}); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("LeaseRelease(%q) = %v; want ErrInvalid", h, err)
		}
		if err := st.NodeHeartbeat(c, persistence.Node{ID: h, HeartbeatAt: t0}); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("NodeHeartbeat(%q) = %v; want ErrInvalid", h, err)
		}
	}
	if ok, err := lease("Node-1"); err != nil || ok {
		t.Errorf("LeaseAcquire(Node-1) = %v, %v; want refused, node-1 holds it", ok, err)
	}
	if ok, err := lease("node-1"); err != nil || !ok {
		t.Errorf("LeaseAcquire(node-1) renewing = %v, %v", ok, err)
	}

	run := createRun(t, st, "wf", "", "a")
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: run.Run.ID, Step: "a", Fence: "f1", Worker: "w-1 ",
		LeaseUntil: at(time.Minute), Now: t0}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("StepClaim with worker %q = %v; want ErrInvalid", "w-1 ", err)
	}
	claim(t, st, run.Run.ID, "a", "1", t0) // worker w-1
	for _, w := range []string{"w-1 ", "w-1\t"} {
		if _, err := st.StepReleaseLeases(c, persistence.StepReleaseLeasesParams{Workers: []string{w}, Now: at(time.Second)}); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("StepReleaseLeases(%q) = %v; want ErrInvalid", w, err)
		}
	}
	if out, err := st.StepReleaseLeases(c, persistence.StepReleaseLeasesParams{Workers: []string{"W-1"}, Now: at(time.Second)}); err != nil || len(out) != 0 {
		t.Errorf("StepReleaseLeases(W-1) released %d, %v; want none of w-1's", len(out), err)
	}
	if out, err := st.StepReleaseLeases(c, persistence.StepReleaseLeasesParams{Workers: []string{"w-1"}, Now: at(time.Second)}); err != nil || len(out) != 1 {
		t.Errorf("StepReleaseLeases(w-1) released %d, %v; want its one lease", len(out), err)
	}
}

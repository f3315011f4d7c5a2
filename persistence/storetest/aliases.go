package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// testCorrelationAliases: a wait and an event match when one's stored
// correlation is the other's Correlation or one of its
// CorrelationAliases (a value hashed under two keys of a keyring), in
// either order; the aliases are not stored, and a value among neither
// matches nothing.
func (s *suite) testCorrelationAliases(t *testing.T, st persistence.Store) {
	// A wait stored under the old hash; the event stores the new one.
	runA := parkedRun(t, st, "h-old-A", at(time.Hour))
	res, err := st.EventCreate(ctx(t), persistence.EventCreateParams{ID: "cap-near", Name: "payment.captured",
		Payload: []byte(`{"amount":0}`), Correlation: "h-new-A", CorrelationAliases: []string{"h-old-A2", "h-older-A"},
		Dispatched: true, Now: at(time.Minute)})
	if err != nil || len(res.Resolved) != 0 {
		t.Fatalf("event with other aliases: resolved %+v, %v; want none", res.Resolved, err)
	}
	res, err = st.EventCreate(ctx(t), persistence.EventCreateParams{ID: "cap-a", Name: "payment.captured",
		Payload: []byte(`{"amount":1}`), Correlation: "h-new-A", CorrelationAliases: []string{"h-older-A", "h-old-A"},
		Dispatched: true, Now: at(2 * time.Minute)})
	if err != nil || len(res.Resolved) != 1 || res.Resolved[0].Step.RunID != runA {
		t.Fatalf("event whose alias is the wait's: resolved %+v, %v; want A's step", res.Resolved, err)
	}
	if ev, err := st.EventGet(ctx(t), "cap-a"); err != nil || ev.Correlation != "h-new-A" {
		t.Errorf("EventGet = %+v, %v; want the correlation stored, not an alias", ev, err)
	}

	// The event stored under the old hash; the park looks for the new one.
	captured(t, st, "early", "h-old-C", `{"amount":3}`, at(3*time.Minute))
	run := createRun(t, st, "order", `{}`, "pay", "ship:pay")
	claim(t, st, run.Run.ID, "pay", "f1", at(4*time.Minute))
	park := persistence.StepParkParams{RunID: run.Run.ID, Step: "pay", Fence: "f1", Kind: persistence.WaitEvent,
		Event: "payment.captured", Correlation: "h-new-C", CorrelationAliases: []string{"h-old-C2"},
		EventsSince: at(-time.Hour), Now: at(5 * time.Minute)}
	if pr, err := st.StepPark(ctx(t), park); err != nil || pr.Matched != nil {
		t.Fatalf("park with other aliases = %+v, %v; want parked", pr, err)
	}
	run2 := createRun(t, st, "order", `{}`, "pay", "ship:pay")
	claim(t, st, run2.Run.ID, "pay", "f2", at(4*time.Minute))
	park.RunID, park.Fence, park.CorrelationAliases = run2.Run.ID, "f2", []string{"h-old-C"}
	pr, err := st.StepPark(ctx(t), park)
	if err != nil || pr.Matched == nil || pr.Matched.ID != "early" {
		t.Fatalf("park whose alias is the event's = %+v, %v; want the event matched", pr, err)
	}
	if w, err := st.StepWaitGet(ctx(t), run.Run.ID, "pay"); err != nil || w.Correlation != "h-new-C" {
		t.Errorf("StepWaitGet = %+v, %v; want the correlation stored, not an alias", w, err)
	}

	// Bad aliases are refused.
	for name, p := range map[string]persistence.EventCreateParams{
		"empty alias":      {Correlation: "x", CorrelationAliases: []string{""}},
		"no correlation":   {CorrelationAliases: []string{"x"}},
		"NUL":              {Correlation: "x", CorrelationAliases: []string{"a\x00b"}},
		"too many aliases": {Correlation: "x", CorrelationAliases: make([]string, 17)},
		"alias too long":   {Correlation: "x", CorrelationAliases: []string{string(make([]byte, 256))}},
	} {
		p.ID, p.Name, p.Now = "bad", "payment.captured", t0
		if _, err := st.EventCreate(ctx(t), p); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

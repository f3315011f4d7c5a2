package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// Events: EventCreate (once per id, with its runs), EventCreateTx (commit
// and roll back), EventGet, EventList (filters, keyset pages),
// EventListPending and EventMarkDispatched.

// eventParams is an event that starts a run of each of workflows, keyed as
// the engine keys them.
func eventParams(t *testing.T, id, name string, now time.Time, workflows ...string) persistence.EventCreateParams {
	p := persistence.EventCreateParams{ID: id, Name: name, Payload: []byte(`{"total":150}`), Now: now}
	for _, wf := range workflows {
		p.Runs = append(p.Runs, persistence.RunCreateParams{ID: newID(t), Workflow: wf, Input: p.Payload,
			IdempotencyKey: "event:" + id + ":" + wf, Now: now, Steps: specs("a", "b:a")})
	}
	return p
}

func eventRunIDs(ev persistence.Event) map[string]string {
	out := map[string]string{}
	for _, r := range ev.Runs {
		out[r.Workflow] = r.RunID
	}
	return out
}

// testEventCreate: an event creates its runs, linked to it, once; a repeat
// (even with other runs asked for) returns the stored event and creates
// nothing; EventGet reads it back; invalid values are refused.
func (s *suite) testEventCreate(t *testing.T, st persistence.Store) {
	c := ctx(t)
	p := eventParams(t, "evt-1", "order.placed", t0, "ship", "bill")
	p.Dispatched = true
	res, err := st.EventCreate(c, p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || len(res.Runs) != 2 || !res.Runs[0].Created || !res.Runs[1].Created {
		t.Fatalf("EventCreate = %+v, want created with two created runs", res)
	}
	want := persistence.Event{ID: "evt-1", Name: "order.placed", Payload: []byte(`{"total":150}`), PublishedAt: t0,
		DispatchedAt: ptr(t0), Runs: []persistence.EventRun{{Workflow: "bill", RunID: p.Runs[1].ID}, {Workflow: "ship", RunID: p.Runs[0].ID}}}
	if diff := cmp.Diff(want, res.Event); diff != "" {
		t.Errorf("created event (-want +got):\n%s", diff)
	}
	got, err := st.EventGet(c, "evt-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EventGet (-want +got):\n%s", diff)
	}
	for _, r := range p.Runs {
		run := getRun(t, st, r.ID)
		if run.IdempotencyKey != r.IdempotencyKey || string(run.Input) != `{"total":150}` || run.Status != persistence.RunRunning {
			t.Errorf("run of %s = %+v", r.Workflow, run)
		}
	}

	// A repeat, with other run ids and one more workflow: nothing new.
	again := eventParams(t, "evt-1", "order.placed", at(time.Minute), "ship", "bill", "audit")
	res2, err := st.EventCreate(c, again)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Created || len(res2.Runs) != 0 {
		t.Errorf("repeat: Created %v, %d runs; want the stored event only", res2.Created, len(res2.Runs))
	}
	if diff := cmp.Diff(want, res2.Event); diff != "" {
		t.Errorf("repeat returns (-want +got):\n%s", diff)
	}
	if _, err := st.RunGet(c, again.Runs[2].ID); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("a repeat created the run of a new workflow: RunGet = %v", err)
	}

	// An event without subscribers is stored, with no runs.
	lone, err := st.EventCreate(c, eventParams(t, "evt-2", "order.placed", t0))
	if err != nil || !lone.Created || len(lone.Event.Runs) != 0 {
		t.Errorf("event without runs: %+v, %v", lone, err)
	}

	if _, err := st.EventGet(c, "nope"); !errors.Is(err, persistence.ErrEventNotFound) {
		t.Errorf("EventGet(unknown) = %v, want ErrEventNotFound", err)
	}
	if _, err := st.EventGet(c, "bad id"); !errors.Is(err, persistence.ErrEventNotFound) {
		t.Errorf("EventGet(bad id) = %v, want ErrEventNotFound", err)
	}
	bad := []persistence.EventCreateParams{
		{ID: "", Name: "a.b", Now: t0},
		{ID: "has space", Name: "a.b", Now: t0},
		{ID: string(make([]byte, 129)), Name: "a.b", Now: t0},
		{ID: "ok", Name: "", Now: t0},
		{ID: "ok", Name: "a b", Now: t0},
		{ID: "ok", Name: "a.b", Payload: []byte(`{`), Now: t0},
		{ID: "ok", Name: "a.b", Now: t0, Runs: []persistence.RunCreateParams{{ID: newID(t), Workflow: "w", Now: t0, Steps: specs("a")}}},
	}
	dup := eventParams(t, "ok", "a.b", t0, "w")
	dup.Runs = append(dup.Runs, dup.Runs[0])
	bad = append(bad, dup)
	for _, b := range bad {
		if _, err := st.EventCreate(c, b); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("EventCreate(id %q, name %q, %d runs) = %v, want ErrInvalid", b.ID, b.Name, len(b.Runs), err)
		}
	}
	if _, err := st.EventGet(c, "ok"); !errors.Is(err, persistence.ErrEventNotFound) {
		t.Errorf("a refused event was stored: %v", err)
	}
}

// testEventCreateConcurrent: many concurrent creates of one id make one
// event and one run per workflow; every caller sees the same runs.
func (s *suite) testEventCreateConcurrent(t *testing.T, st persistence.Store) {
	c := ctx(t)
	const n = 16
	var wg sync.WaitGroup
	results := make([]persistence.EventCreateResult, n)
	errs := make([]error, n)
	for i := range n {
		p := eventParams(t, "evt-race", "order.placed", t0, "ship", "bill")
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = st.EventCreate(c, p)
		}()
	}
	wg.Wait()
	created := 0
	var first map[string]string
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("EventCreate %d: %v", i, errs[i])
		}
		if results[i].Created {
			created++
		}
		ids := eventRunIDs(results[i].Event)
		if first == nil {
			first = ids
		} else if diff := cmp.Diff(first, ids); diff != "" {
			t.Errorf("caller %d sees other runs (-first +got):\n%s", i, diff)
		}
	}
	if created != 1 || len(first) != 2 {
		t.Errorf("%d creates won, runs %v; want 1 and two runs", created, first)
	}
	for _, wf := range []string{"ship", "bill"} {
		page, err := st.RunList(c, persistence.RunListParams{Workflow: wf})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) != 1 {
			t.Errorf("workflow %s has %d runs, want 1", wf, len(page.Runs))
		}
	}
}

// testEventCreateTx: an event recorded in a rolled-back transaction
// leaves nothing; a committed one is stored with its runs, pending until
// marked dispatched.
func (s *suite) testEventCreateTx(t *testing.T, st persistence.Store) {
	txs, ok := st.(persistence.TxStore)
	if !ok || s.opts.beginTx == nil {
		t.Skip("store is not a TxStore or the suite has no WithBeginTx hook")
	}
	c := ctx(t)
	p := eventParams(t, "evt-tx", "order.placed", t0, "ship")
	p.Dispatched = true // ignored in a transaction
	tx, err := s.opts.beginTx(c, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txs.EventCreateTx(c, tx, p); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EventGet(c, "evt-tx"); !errors.Is(err, persistence.ErrEventNotFound) {
		t.Errorf("rolled back event: EventGet = %v", err)
	}
	if _, err := st.RunGet(c, p.Runs[0].ID); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("rolled back event's run: RunGet = %v", err)
	}

	tx, err = s.opts.beginTx(c, st)
	if err != nil {
		t.Fatal(err)
	}
	res, err := txs.EventCreateTx(c, tx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Event.DispatchedAt != nil {
		t.Errorf("EventCreateTx = %+v, want created, not dispatched", res)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	pending, err := st.EventListPending(c, persistence.EventListPendingParams{Before: at(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].ID != "evt-tx" || eventRunIDs(pending[0])["ship"] != p.Runs[0].ID {
		t.Fatalf("pending after commit = %+v", pending)
	}
	wantStatuses(t, st, p.Runs[0].ID, map[string]persistence.StepStatus{"a": persistence.StepQueued, "b": persistence.StepWaiting})
}

// testEventPending: EventListPending lists the undispatched events due by
// Before, oldest first, limited; EventMarkDispatched takes them off once.
func (s *suite) testEventPending(t *testing.T, st persistence.Store) {
	txs, ok := st.(persistence.TxStore)
	if !ok || s.opts.beginTx == nil {
		t.Skip("store is not a TxStore or the suite has no WithBeginTx hook")
	}
	c := ctx(t)
	for i := range 4 {
		tx, err := s.opts.beginTx(c, st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := txs.EventCreateTx(c, tx, eventParams(t, fmt.Sprintf("p%d", i), "x.y", at(time.Duration(3-i)*time.Second), "w")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.EventCreate(c, persistence.EventCreateParams{ID: "done", Name: "x.y", Now: t0, Dispatched: true}); err != nil {
		t.Fatal(err)
	}
	ids := func(p persistence.EventListPendingParams) []string {
		t.Helper()
		evs, err := st.EventListPending(c, p)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"p3", "p2", "p1"}, ids(persistence.EventListPendingParams{Before: at(2 * time.Second)})); diff != "" {
		t.Errorf("pending by 2s (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p3", "p2"}, ids(persistence.EventListPendingParams{Before: at(time.Hour), Limit: 2})); diff != "" {
		t.Errorf("pending, limit 2 (-want +got):\n%s", diff)
	}
	n, err := st.EventMarkDispatched(c, persistence.EventMarkDispatchedParams{IDs: []string{"p3", "p2", "done", "unknown", "bad id"}, Now: at(time.Hour)})
	if err != nil || n != 2 {
		t.Errorf("EventMarkDispatched = %d, %v; want 2", n, err)
	}
	if n, err := st.EventMarkDispatched(c, persistence.EventMarkDispatchedParams{IDs: []string{"p3"}, Now: at(2 * time.Hour)}); err != nil || n != 0 {
		t.Errorf("EventMarkDispatched again = %d, %v; want 0", n, err)
	}
	if diff := cmp.Diff([]string{"p1", "p0"}, ids(persistence.EventListPendingParams{Before: at(time.Hour)})); diff != "" {
		t.Errorf("pending after marking (-want +got):\n%s", diff)
	}
	ev, err := st.EventGet(c, "p3")
	if err != nil || ev.DispatchedAt == nil || !ev.DispatchedAt.Equal(at(time.Hour)) {
		t.Errorf("marked event = %+v, %v; want dispatched at 1h", ev, err)
	}
}

// testEventList: newest first, by name and time window, in keyset pages
// that neither skip nor repeat an event, with each event's runs.
func (s *suite) testEventList(t *testing.T, st persistence.Store) {
	c := ctx(t)
	var all, placed []string
	for i := range 12 {
		name := "order.placed"
		if i%3 == 0 {
			name = "order.cancelled"
		}
		id := fmt.Sprintf("e%02d", i)
		// Two events per second: ties broken by id.
		if _, err := st.EventCreate(c, eventParams(t, id, name, at(time.Duration(i/2)*time.Second), "w"+fmt.Sprint(i%2))); err != nil {
			t.Fatal(err)
		}
		all = append([]string{id}, all...)
		if name == "order.placed" {
			placed = append([]string{id}, placed...)
		}
	}
	pages := func(p persistence.EventListParams) []string {
		t.Helper()
		out := []string{}
		for range 20 {
			page, err := st.EventList(c, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Events {
				if len(e.Runs) != 1 || e.Runs[0].RunID == "" {
					t.Errorf("event %s listed with runs %v", e.ID, e.Runs)
				}
				out = append(out, e.ID)
			}
			if page.NextCursor == "" {
				return out
			}
			p.Cursor = page.NextCursor
		}
		t.Fatal("paging does not end")
		return nil
	}
	if diff := cmp.Diff(all, pages(persistence.EventListParams{Limit: 5})); diff != "" {
		t.Errorf("all events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(placed, pages(persistence.EventListParams{Name: "order.placed", Limit: 3})); diff != "" {
		t.Errorf("by name (-want +got):\n%s", diff)
	}
	// [1s, 3s): e02..e05, newest first.
	if diff := cmp.Diff([]string{"e05", "e04", "e03", "e02"}, pages(persistence.EventListParams{PublishedAfter: at(time.Second),
		PublishedBefore: at(3 * time.Second), Limit: 3})); diff != "" {
		t.Errorf("window (-want +got):\n%s", diff)
	}
	if _, err := st.EventList(c, persistence.EventListParams{Cursor: "garbage!"}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("bad cursor: %v, want ErrInvalid", err)
	}
	if _, err := st.EventList(c, persistence.EventListParams{Name: "bad name"}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("bad name: %v, want ErrInvalid", err)
	}
}

package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

func (s *suite) testSchedules(t *testing.T, st persistence.Store) {
	c := ctx(t)
	sc := persistence.Schedule{
		Name: "nightly", Spec: "0 3 * * *", TimeZone: "Europe/Paris", Workflow: "report", Input: []byte(`{"full":true}`),
		Overlap: persistence.OverlapSkip, CatchUp: persistence.CatchUpLatest, CatchUpWindow: 90 * time.Minute,
		CreatedAt: t0, UpdatedAt: t0,
	}
	got, err := st.ScheduleUpsert(c, sc)
	if err != nil {
		t.Fatal(err)
	}
	sc.Owner, sc.ChangedAt = persistence.OwnerCode, t0
	if diff := cmp.Diff(sc, got); diff != "" {
		t.Errorf("ScheduleUpsert (-want +got):\n%s", diff)
	}
	if _, err := st.ScheduleUpsert(c, persistence.Schedule{Name: "hourly", Spec: "@hourly", Workflow: "ping", UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	// Defaults for the policies.
	h, err := st.ScheduleGet(c, "hourly")
	if err != nil || h.Overlap != persistence.OverlapAllow || h.CatchUp != persistence.CatchUpNone || h.Input != nil {
		t.Errorf("hourly = %+v, %v", h, err)
	}

	// Advance: from never to t1, then a stale advance loses.
	t1, t2 := at(time.Hour), at(2*time.Hour)
	if ok, err := st.ScheduleAdvance(c, persistence.ScheduleAdvanceParams{Name: "nightly", To: t1, Now: t1}); err != nil || !ok {
		t.Fatalf("first advance = %v, %v", ok, err)
	}
	if ok, err := st.ScheduleAdvance(c, persistence.ScheduleAdvanceParams{Name: "nightly", To: t1, Now: t1}); err != nil || ok {
		t.Errorf("second advance from nil = %v, %v; want false", ok, err)
	}
	if ok, err := st.ScheduleAdvance(c, persistence.ScheduleAdvanceParams{Name: "nightly", From: &t2, To: at(3 * time.Hour), Now: t2}); err != nil || ok {
		t.Errorf("advance from a wrong tick = %v, %v; want false", ok, err)
	}
	if ok, err := st.ScheduleAdvance(c, persistence.ScheduleAdvanceParams{Name: "nightly", From: &t1, To: t2, Now: t2}); err != nil || !ok {
		t.Errorf("advance t1 -> t2 = %v, %v; want true", ok, err)
	}
	if _, err := st.ScheduleAdvance(c, persistence.ScheduleAdvanceParams{Name: "nope", To: t1, Now: t1}); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("advance of unknown schedule = %v, want ErrScheduleNotFound", err)
	}

	// Pause and disable.
	upd, err := st.ScheduleUpdate(c, persistence.ScheduleUpdateParams{Name: "nightly", Paused: ptr(true), Disabled: ptr(true), Now: at(3 * time.Hour)})
	if err != nil || !upd.Paused || !upd.Disabled || !upd.UpdatedAt.Equal(at(3*time.Hour)) {
		t.Errorf("ScheduleUpdate = %+v, %v", upd, err)
	}
	upd, err = st.ScheduleUpdate(c, persistence.ScheduleUpdateParams{Name: "nightly", Now: at(3 * time.Hour)})
	if err != nil || !upd.Paused || !upd.Disabled {
		t.Errorf("ScheduleUpdate with no fields changed flags: %+v, %v", upd, err)
	}
	if _, err := st.ScheduleUpdate(c, persistence.ScheduleUpdateParams{Name: "nope", Paused: ptr(true)}); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("update of unknown schedule = %v, want ErrScheduleNotFound", err)
	}

	// A re-upsert (the schedule declared again, changed) keeps LastTick,
	// Paused and CreatedAt, and clears Disabled.
	sc2 := sc
	sc2.Spec = "0 4 * * *"
	sc2.Input = nil
	sc2.CreatedAt = time.Time{}
	sc2.UpdatedAt = at(4 * time.Hour)
	got, err = st.ScheduleUpsert(c, sc2)
	if err != nil {
		t.Fatal(err)
	}
	want := sc2
	want.CreatedAt = t0
	want.Paused = true
	want.LastTick = &t2
	want.ChangedAt = at(4 * time.Hour)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("re-upsert (-want +got):\n%s", diff)
	}

	list, err := st.ScheduleList(c)
	if err != nil || len(list) != 2 || list[0].Name != "hourly" || list[1].Name != "nightly" {
		t.Errorf("ScheduleList = %+v, %v", list, err)
	}
	if _, err := st.ScheduleGet(c, "nope"); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("ScheduleGet(unknown) = %v, want ErrScheduleNotFound", err)
	}

	// History: duplicates ignored, newest first, limited.
	runID := newID(t)
	ticks := []persistence.ScheduleTick{
		{Schedule: "nightly", Tick: t1, Outcome: persistence.TickFired, RunID: runID, CreatedAt: t1},
		{Schedule: "nightly", Tick: t2, Outcome: persistence.TickSkipped, Reason: "previous run still running", CreatedAt: t2},
		{Schedule: "nightly", Tick: t1, Outcome: persistence.TickSkipped, Reason: "duplicate", CreatedAt: t2},
		{Schedule: "hourly", Tick: t1, Outcome: persistence.TickBuffered, CreatedAt: t1},
	}
	for _, tk := range ticks {
		if err := st.ScheduleTickRecord(c, tk); err != nil {
			t.Fatalf("ScheduleTickRecord(%+v): %v", tk, err)
		}
	}
	hist, err := st.ScheduleTickList(c, persistence.ScheduleTickListParams{Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]persistence.ScheduleTick{ticks[1], ticks[0]}, hist); diff != "" {
		t.Errorf("ScheduleTickList (-want +got):\n%s", diff)
	}
	if hist, _ := st.ScheduleTickList(c, persistence.ScheduleTickListParams{Name: "nightly", Limit: 1}); len(hist) != 1 || !hist[0].Tick.Equal(t2) {
		t.Errorf("ScheduleTickList limit 1 = %+v", hist)
	}
	if err := st.ScheduleTickRecord(c, persistence.ScheduleTick{Schedule: "nightly", Tick: t1, Outcome: "exploded"}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("bad tick outcome = %v, want ErrInvalid", err)
	}
}

func (s *suite) testScheduleValidation(t *testing.T, st persistence.Store) {
	c := ctx(t)
	ok := func() persistence.Schedule {
		return persistence.Schedule{Name: "s", Spec: "* * * * *", Workflow: "wf"}
	}
	for name, mutate := range map[string]func(*persistence.Schedule){
		"bad name":        func(s *persistence.Schedule) { s.Name = "'; DROP TABLE schedules; --" },
		"bad workflow":    func(s *persistence.Schedule) { s.Workflow = "" },
		"empty spec":      func(s *persistence.Schedule) { s.Spec = "" },
		"bad overlap":     func(s *persistence.Schedule) { s.Overlap = "sometimes" },
		"bad catch-up":    func(s *persistence.Schedule) { s.CatchUp = "maybe" },
		"bad input":       func(s *persistence.Schedule) { s.Input = []byte("{") },
		"negative window": func(s *persistence.Schedule) { s.CatchUpWindow = -time.Second },
	} {
		sc := ok()
		mutate(&sc)
		if _, err := st.ScheduleUpsert(c, sc); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("%s: ScheduleUpsert = %v, want ErrInvalid", name, err)
		}
	}
	if list, _ := st.ScheduleList(c); len(list) != 0 {
		t.Errorf("refused schedules were stored: %+v", list)
	}
}

// testScheduleRuntime: schedules an operator creates, edits and deletes,
// the change read every node polls, and a node's declaration that never
// overwrites an operator's version.
func (s *suite) testScheduleRuntime(t *testing.T, st persistence.Store) {
	c := ctx(t)
	base := persistence.Schedule{Name: "tenant-1", Spec: "*/5 * * * *", Workflow: "report", Input: []byte(`{"tenant":1}`), UpdatedAt: t0}
	got, err := st.ScheduleCreate(c, base)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != persistence.OwnerOperator || got.Deleted || !got.CreatedAt.Equal(t0) || !got.ChangedAt.Equal(t0) ||
		got.LastTick != nil || got.Overlap != persistence.OverlapAllow || string(got.Input) != `{"tenant":1}` {
		t.Errorf("ScheduleCreate = %+v", got)
	}
	if _, err := st.ScheduleCreate(c, base); !errors.Is(err, persistence.ErrScheduleExists) {
		t.Errorf("second ScheduleCreate = %v, want ErrScheduleExists", err)
	}
	bad := base
	bad.Name, bad.Input = "tenant-bad", []byte("{")
	if _, err := st.ScheduleCreate(c, bad); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("ScheduleCreate with bad input = %v, want ErrInvalid", err)
	}
	if _, err := st.ScheduleGet(c, "tenant-bad"); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("a refused schedule was stored: %v", err)
	}

	// Edit: the definition changes, the cursor moves to the edit time
	// when asked.
	edit := base
	edit.Spec, edit.Overlap, edit.Input = "0 * * * *", persistence.OverlapSkip, nil
	got, err = st.ScheduleEdit(c, persistence.ScheduleEditParams{Schedule: edit, ResetCursor: true, Now: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec != "0 * * * *" || got.Overlap != persistence.OverlapSkip || got.Input != nil || got.LastTick == nil ||
		!got.LastTick.Equal(at(time.Minute)) || !got.ChangedAt.Equal(at(time.Minute)) || !got.CreatedAt.Equal(t0) {
		t.Errorf("ScheduleEdit = %+v", got)
	}
	missing := edit
	missing.Name = "nope"
	if _, err := st.ScheduleEdit(c, persistence.ScheduleEditParams{Schedule: missing, Now: at(time.Minute)}); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("ScheduleEdit(unknown) = %v, want ErrScheduleNotFound", err)
	}
	edit.Spec = ""
	if _, err := st.ScheduleEdit(c, persistence.ScheduleEditParams{Schedule: edit, Now: at(2 * time.Minute)}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("ScheduleEdit with no spec = %v, want ErrInvalid", err)
	}
	if g, _ := st.ScheduleGet(c, "tenant-1"); g.Spec != "0 * * * *" {
		t.Errorf("a refused edit changed the schedule: %+v", g)
	}

	// A node declaring a schedule an operator owns leaves it as it is.
	if _, err := st.ScheduleUpsert(c, persistence.Schedule{Name: "code-1", Spec: "@daily", Workflow: "report", UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	decl := persistence.Schedule{Name: "tenant-1", Spec: "@daily", Workflow: "other", UpdatedAt: at(3 * time.Minute)}
	got, err = st.ScheduleUpsert(c, decl)
	if err != nil || got.Owner != persistence.OwnerOperator || got.Spec != "0 * * * *" || got.Workflow != "report" {
		t.Errorf("ScheduleUpsert over an operator's schedule = %+v, %v; want the operator's version", got, err)
	}

	// Changes, oldest first, with a keyset cursor; a tick (advance)
	// is not a change.
	if ok, err := st.ScheduleAdvance(c, persistence.ScheduleAdvanceParams{Name: "code-1", To: at(time.Hour), Now: at(time.Hour)}); err != nil || !ok {
		t.Fatalf("advance = %v, %v", ok, err)
	}
	names := func(list []persistence.Schedule) []string {
		var out []string
		for _, sc := range list {
			out = append(out, sc.Name)
		}
		return out
	}
	ch, err := st.ScheduleListChanged(c, persistence.ScheduleListChangedParams{After: t0.Add(-time.Second)})
	if diff := cmp.Diff([]string{"code-1", "tenant-1"}, names(ch)); err != nil || diff != "" {
		t.Errorf("ScheduleListChanged (-want +got):\n%s%v", diff, err)
	}
	ch, err = st.ScheduleListChanged(c, persistence.ScheduleListChangedParams{After: t0.Add(-time.Second), Limit: 1})
	if err != nil || len(ch) != 1 || ch[0].Name != "code-1" {
		t.Fatalf("ScheduleListChanged limit 1 = %v, %v", names(ch), err)
	}
	ch, err = st.ScheduleListChanged(c, persistence.ScheduleListChangedParams{After: ch[0].ChangedAt, AfterName: ch[0].Name})
	if err != nil || len(ch) != 1 || ch[0].Name != "tenant-1" {
		t.Errorf("ScheduleListChanged page 2 = %v, %v", names(ch), err)
	}

	// Delete leaves a tombstone that only the change read lists.
	if err := st.ScheduleDelete(c, persistence.ScheduleDeleteParams{Name: "tenant-1", Now: at(5 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := st.ScheduleDelete(c, persistence.ScheduleDeleteParams{Name: "tenant-1", Now: at(5 * time.Minute)}); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("second delete = %v, want ErrScheduleNotFound", err)
	}
	if _, err := st.ScheduleGet(c, "tenant-1"); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("ScheduleGet(deleted) = %v, want ErrScheduleNotFound", err)
	}
	if list, _ := st.ScheduleList(c); len(list) != 1 || list[0].Name != "code-1" {
		t.Errorf("ScheduleList after delete = %v", names(list))
	}
	if ok, err := st.ScheduleAdvance(c, persistence.ScheduleAdvanceParams{Name: "tenant-1", From: ptr(at(time.Minute)), To: at(time.Hour), Now: at(time.Hour)}); ok || !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("advance of a deleted schedule = %v, %v; want ErrScheduleNotFound", ok, err)
	}
	if _, err := st.ScheduleUpdate(c, persistence.ScheduleUpdateParams{Name: "tenant-1", Paused: ptr(true), Now: at(6 * time.Minute)}); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("pause of a deleted schedule = %v, want ErrScheduleNotFound", err)
	}
	ch, err = st.ScheduleListChanged(c, persistence.ScheduleListChangedParams{After: at(4 * time.Minute)})
	if err != nil || len(ch) != 1 || ch[0].Name != "tenant-1" || !ch[0].Deleted {
		t.Errorf("ScheduleListChanged after delete = %+v, %v", ch, err)
	}
	// A node's declaration does not bring back what an operator deleted.
	if got, err := st.ScheduleUpsert(c, decl); err != nil || !got.Deleted || got.Owner != persistence.OwnerOperator {
		t.Errorf("ScheduleUpsert over a deleted schedule = %+v, %v; want it left deleted", got, err)
	}
	if _, err := st.ScheduleGet(c, "tenant-1"); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("a declaration revived a deleted schedule: %v", err)
	}
	// Creating it again starts afresh.
	again := base
	again.UpdatedAt = at(10 * time.Minute)
	got, err = st.ScheduleCreate(c, again)
	if err != nil || got.Deleted || got.LastTick != nil || !got.CreatedAt.Equal(at(10*time.Minute)) || got.Spec != base.Spec {
		t.Errorf("ScheduleCreate over a deleted schedule = %+v, %v", got, err)
	}
}

package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

func (s *suite) testRunCreateGet(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := newID(t)
	tick := at(-time.Hour)
	res, err := st.RunCreate(c, persistence.RunCreateParams{
		ID: id, Workflow: "order", Version: 7, Input: []byte(`{"order":42}`), IdempotencyKey: "k-1",
		Metadata: map[string]string{"tenant": "acme", "trace": "x"}, Schedule: "nightly", ScheduledTick: &tick,
		Now: t0, Steps: []persistence.StepSpec{
			{Name: "a", Queue: "fast", MaxAttempts: 5},
			{Name: "b", Deps: []string{"a"}, MaxAttempts: 1},
			{Name: "c", Deps: []string{"a"}, Queue: "slow"},
			{Name: "d", Deps: []string{"b", "c"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created {
		t.Error("Created = false for a new run")
	}
	want := persistence.Run{
		ID: id, Workflow: "order", Version: 7, Status: persistence.RunRunning, Input: []byte(`{"order":42}`),
		IdempotencyKey: "k-1", Metadata: map[string]string{"tenant": "acme", "trace": "x"}, Schedule: "nightly",
		ScheduledTick: &tick, StartAt: t0, CreatedAt: t0, StartedAt: ptr(t0), UpdatedAt: t0,
	}
	if diff := cmp.Diff(want, res.Run); diff != "" {
		t.Errorf("RunCreate run (-want +got):\n%s", diff)
	}
	got, err := st.RunGet(c, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RunGet (-want +got):\n%s", diff)
	}
	wantSteps := []persistence.StepRun{
		{RunID: id, Step: "a", Queue: "fast", Status: persistence.StepQueued, MaxAttempts: 5, QueuedAt: ptr(t0), UpdatedAt: t0},
		{RunID: id, Step: "b", Queue: "default", Status: persistence.StepWaiting, Deps: []string{"a"}, MaxAttempts: 1, PendingDeps: 1, UpdatedAt: t0},
		{RunID: id, Step: "c", Queue: "slow", Status: persistence.StepWaiting, Deps: []string{"a"}, PendingDeps: 1, UpdatedAt: t0},
		{RunID: id, Step: "d", Queue: "default", Status: persistence.StepWaiting, Deps: []string{"b", "c"}, PendingDeps: 2, UpdatedAt: t0},
	}
	if diff := cmp.Diff(wantSteps, res.Steps); diff != "" {
		t.Errorf("RunCreate steps (-want +got):\n%s", diff)
	}
	list, err := st.StepList(c, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantSteps, list); diff != "" {
		t.Errorf("StepList (-want +got):\n%s", diff)
	}
	one, err := st.StepGet(c, id, "d")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantSteps[3], one); diff != "" {
		t.Errorf("StepGet (-want +got):\n%s", diff)
	}

	// A run without input, key or metadata.
	bare := createRun(t, st, "order", "", "x")
	if r := getRun(t, st, bare.Run.ID); r.Input != nil || r.Metadata != nil || r.IdempotencyKey != "" || r.ScheduledTick != nil {
		t.Errorf("bare run = %+v, want no input, metadata, key or tick", r)
	}

	if _, err := st.RunGet(c, newID(t)); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("RunGet(unknown) = %v, want ErrRunNotFound", err)
	}
	if _, err := st.StepGet(c, id, "nope"); !errors.Is(err, persistence.ErrStepNotFound) {
		t.Errorf("StepGet(unknown) = %v, want ErrStepNotFound", err)
	}
	if _, err := st.StepList(c, newID(t)); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("StepList(unknown run) = %v, want ErrRunNotFound", err)
	}
	if atts, err := st.AttemptList(c, id); err != nil || len(atts) != 0 {
		t.Errorf("AttemptList(new run) = %v, %v; want none", atts, err)
	}
}

func (s *suite) testRunCreateDelayed(t *testing.T, st persistence.Store) {
	c := ctx(t)
	id := newID(t)
	res, err := st.RunCreate(c, persistence.RunCreateParams{
		ID: id, Workflow: "later", StartAt: at(time.Hour), Now: t0, Steps: specs("a", "b:a"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Run.Status != persistence.RunPending || res.Run.StartedAt != nil || !res.Run.StartAt.Equal(at(time.Hour)) {
		t.Errorf("delayed run = %+v, want pending, not started, StartAt +1h", res.Run)
	}
	wantStatuses(t, st, id, map[string]persistence.StepStatus{"a": persistence.StepWaiting, "b": persistence.StepWaiting})
	// Not claimable while pending.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "f", Worker: "w", LeaseUntil: at(time.Minute), Now: t0}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("claim in pending run = %v, want ErrNotClaimable", err)
	}

	due, err := st.RunListDue(c, persistence.ListDueParams{Before: at(30 * time.Minute)})
	if err != nil || len(due) != 0 {
		t.Errorf("RunListDue(before start) = %v, %v; want none", due, err)
	}
	due, err = st.RunListDue(c, persistence.ListDueParams{Before: at(time.Hour), Limit: 10})
	if err != nil || len(due) != 1 || due[0].ID != id {
		t.Errorf("RunListDue(at start) = %v, %v; want the run", due, err)
	}
	if q, err := st.RunStart(c, persistence.RunStartParams{RunID: id, Now: at(time.Minute)}); err != nil || len(q) != 0 {
		t.Errorf("RunStart(too early) = %v, %v; want nothing", q, err)
	}
	q, err := st.RunStart(c, persistence.RunStartParams{RunID: id, Now: at(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a"}, names(q)); diff != "" {
		t.Errorf("RunStart queued (-want +got):\n%s", diff)
	}
	if q[0].Status != persistence.StepQueued || q[0].QueuedAt == nil || !q[0].QueuedAt.Equal(at(time.Hour)) {
		t.Errorf("started root = %+v", q[0])
	}
	r := getRun(t, st, id)
	if r.Status != persistence.RunRunning || r.StartedAt == nil || !r.StartedAt.Equal(at(time.Hour)) {
		t.Errorf("started run = %+v", r)
	}
	wantStatuses(t, st, id, map[string]persistence.StepStatus{"a": persistence.StepQueued, "b": persistence.StepWaiting})
	if q, err := st.RunStart(c, persistence.RunStartParams{RunID: id, Now: at(2 * time.Hour)}); err != nil || len(q) != 0 {
		t.Errorf("RunStart(again) = %v, %v; want nothing", q, err)
	}
	if _, err := st.RunStart(c, persistence.RunStartParams{RunID: newID(t), Now: t0}); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("RunStart(unknown) = %v, want ErrRunNotFound", err)
	}
	if due, _ := st.RunListDue(c, persistence.ListDueParams{Before: at(3 * time.Hour)}); len(due) != 0 {
		t.Errorf("RunListDue after start = %v, want none", due)
	}
}

func (s *suite) testRunCreateIdempotent(t *testing.T, st persistence.Store) {
	c := ctx(t)
	p := persistence.RunCreateParams{ID: newID(t), Workflow: "pay", Input: []byte(`{"n":1}`), IdempotencyKey: "order-1", Now: t0, Steps: specs("a", "b:a")}
	first, err := st.RunCreate(c, p)
	if err != nil {
		t.Fatal(err)
	}
	claim(t, st, first.Run.ID, "a", "f1", at(time.Second))

	p2 := p
	p2.ID = newID(t)
	p2.Now = at(time.Minute)
	again, err := st.RunCreate(c, p2)
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Run.ID != first.Run.ID {
		t.Errorf("repeat = created %v id %s; want existing %s", again.Created, again.Run.ID, first.Run.ID)
	}
	if diff := cmp.Diff(first.Run, again.Run); diff != "" {
		t.Errorf("repeat returned a different run (-first +repeat):\n%s", diff)
	}
	if len(again.Steps) != 2 || again.Steps[0].Status != persistence.StepRunning {
		t.Errorf("repeat steps = %+v, want the steps as they are now", again.Steps)
	}

	p3 := p2
	p3.Input = []byte(`{"n":2}`)
	_, err = st.RunCreate(c, p3)
	var ice *persistence.IdempotencyConflictError
	if !errors.As(err, &ice) || !errors.Is(err, persistence.ErrIdempotencyConflict) {
		t.Fatalf("different input = %v, want *IdempotencyConflictError", err)
	}
	if ice.RunID != first.Run.ID || ice.Key != "order-1" || ice.Workflow != "pay" {
		t.Errorf("conflict error = %+v", ice)
	}

	// The key is per workflow.
	p4 := p2
	p4.Workflow = "refund"
	other, err := st.RunCreate(c, p4)
	if err != nil || !other.Created {
		t.Errorf("same key, other workflow = %+v, %v; want a new run", other.Run, err)
	}

	// Reusing a run id is refused.
	p5 := persistence.RunCreateParams{ID: first.Run.ID, Workflow: "pay", Now: t0}
	if _, err := st.RunCreate(c, p5); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("duplicate run id = %v, want ErrInvalid", err)
	}
}

func (s *suite) testRunCreateValidation(t *testing.T, st persistence.Store) {
	c := ctx(t)
	big := []byte(`"` + strings.Repeat("x", 1<<20) + `"`)
	ok := func() persistence.RunCreateParams {
		return persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Now: t0, Steps: specs("a", "b:a")}
	}
	cases := []struct {
		name   string
		mutate func(p *persistence.RunCreateParams)
		want   error
	}{
		{"empty id", func(p *persistence.RunCreateParams) { p.ID = "" }, persistence.ErrInvalid},
		{"id with quote", func(p *persistence.RunCreateParams) { p.ID = "a'b" }, persistence.ErrInvalid},
		{"empty workflow", func(p *persistence.RunCreateParams) { p.Workflow = "" }, persistence.ErrInvalid},
		{"workflow injection", func(p *persistence.RunCreateParams) { p.Workflow = "'; DROP TABLE workflow_runs; --" }, persistence.ErrInvalid},
		{"workflow too long", func(p *persistence.RunCreateParams) { p.Workflow = "w" + strings.Repeat("x", 64) }, persistence.ErrInvalid},
		{"workflow starting with digit", func(p *persistence.RunCreateParams) { p.Workflow = "1wf" }, persistence.ErrInvalid},
		{"workflow 4-byte utf8", func(p *persistence.RunCreateParams) { p.Workflow = "wf😀" }, persistence.ErrInvalid},
		{"step name with NUL", func(p *persistence.RunCreateParams) { p.Steps[0].Name = "a\x00" }, persistence.ErrInvalid},
		{"duplicate step", func(p *persistence.RunCreateParams) { p.Steps[1].Name = "a"; p.Steps[1].Deps = nil }, persistence.ErrInvalid},
		{"unknown dep", func(p *persistence.RunCreateParams) { p.Steps[1].Deps = []string{"zz"} }, persistence.ErrInvalid},
		{"self dep", func(p *persistence.RunCreateParams) { p.Steps[1].Deps = []string{"b"} }, persistence.ErrInvalid},
		{"repeated dep", func(p *persistence.RunCreateParams) { p.Steps[1].Deps = []string{"a", "a"} }, persistence.ErrInvalid},
		{"cycle", func(p *persistence.RunCreateParams) { p.Steps = specs("a:c", "b:a", "c:b") }, persistence.ErrInvalid},
		{"bad queue", func(p *persistence.RunCreateParams) { p.Steps[0].Queue = "q\\1" }, persistence.ErrInvalid},
		{"negative attempts", func(p *persistence.RunCreateParams) { p.Steps[0].MaxAttempts = -1 }, persistence.ErrInvalid},
		{"bad schedule", func(p *persistence.RunCreateParams) { p.Schedule = "a b" }, persistence.ErrInvalid},
		{"input not json", func(p *persistence.RunCreateParams) { p.Input = []byte(`{"a":`) }, persistence.ErrInvalid},
		{"input sql", func(p *persistence.RunCreateParams) { p.Input = []byte(`'; DROP TABLE workflow_runs; --`) }, persistence.ErrInvalid},
		{"input too large", func(p *persistence.RunCreateParams) { p.Input = big }, persistence.ErrTooLarge},
		{"metadata too large", func(p *persistence.RunCreateParams) { p.Metadata = map[string]string{"k": string(big)} }, persistence.ErrTooLarge},
		{"metadata NUL", func(p *persistence.RunCreateParams) { p.Metadata = map[string]string{"k": "a\x00b"} }, persistence.ErrInvalid},
		{"key NUL", func(p *persistence.RunCreateParams) { p.IdempotencyKey = "k\x00" }, persistence.ErrInvalid},
		{"key bad utf8", func(p *persistence.RunCreateParams) { p.IdempotencyKey = "k\xff" }, persistence.ErrInvalid},
		{"key too long", func(p *persistence.RunCreateParams) { p.IdempotencyKey = strings.Repeat("k", 256) }, persistence.ErrInvalid},
	}
	for _, tc := range cases {
		p := ok()
		tc.mutate(&p)
		_, err := st.RunCreate(c, p)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: RunCreate = %v, want %v", tc.name, err, tc.want)
			continue
		}
		if _, err := st.RunGet(c, p.ID); p.ID != "" && !errors.Is(err, persistence.ErrRunNotFound) {
			t.Errorf("%s: a refused run exists (%v)", tc.name, err)
		}
	}
	var le *persistence.LimitError
	p := ok()
	p.Input = big
	if _, err := st.RunCreate(c, p); !errors.As(err, &le) || le.Field != "input" || le.Limit != 1<<20 {
		t.Errorf("too large input = %v, want *LimitError on input with limit 1 MiB", err)
	}
	var ve *persistence.ValidationError
	p = ok()
	p.Workflow = "no spaces"
	if _, err := st.RunCreate(c, p); !errors.As(err, &ve) || ve.Field != "workflow name" {
		t.Errorf("bad workflow = %v, want *ValidationError on workflow name", err)
	}
	// Limits are inclusive: a 64-character name and a 255-byte key pass.
	p = ok()
	p.Workflow = "w" + strings.Repeat("x", 63)
	p.IdempotencyKey = strings.Repeat("é", 127) + "k"
	if _, err := st.RunCreate(c, p); err != nil {
		t.Errorf("longest name and key: %v", err)
	}
}

func (s *suite) testRunList(t *testing.T, st persistence.Store) {
	c := ctx(t)
	var ids []string // oldest first
	for i := range 7 {
		wf := "alpha"
		if i%2 == 1 {
			wf = "beta"
		}
		id := newID(t)
		// Two runs share a creation time, so the cursor must break ties by id.
		created := at(time.Duration(i/2*2) * time.Second)
		if _, err := st.RunCreate(c, persistence.RunCreateParams{ID: id, Workflow: wf, Now: created, Steps: specs("a")}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: ids[2], To: persistence.RunFailed, Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: ids[5], To: persistence.RunCancelled, Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// Newest first: by creation time, then id, both descending.
	want := []string{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}

	page := func(p persistence.RunListParams) []string {
		t.Helper()
		var got []string
		for pages := 0; ; pages++ {
			res, err := st.RunList(c, p)
			if err != nil {
				t.Fatalf("RunList(%+v): %v", p, err)
			}
			if len(res.Runs) > max(p.Limit, 0) && p.Limit > 0 {
				t.Fatalf("page of %d runs, limit %d", len(res.Runs), p.Limit)
			}
			for _, r := range res.Runs {
				got = append(got, r.ID)
			}
			if res.NextCursor == "" || pages > 20 {
				return got
			}
			p.Cursor = res.NextCursor
		}
	}
	if diff := cmp.Diff(want, page(persistence.RunListParams{})); diff != "" {
		t.Errorf("RunList all (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, page(persistence.RunListParams{Limit: 2})); diff != "" {
		t.Errorf("RunList paged by 2 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[6], ids[4], ids[2], ids[0]}, page(persistence.RunListParams{Workflow: "alpha", Limit: 3})); diff != "" {
		t.Errorf("RunList alpha (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[5], ids[2]}, page(persistence.RunListParams{Status: []persistence.RunStatus{persistence.RunFailed, persistence.RunCancelled}, Limit: 1})); diff != "" {
		t.Errorf("RunList failed|cancelled (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[2]}, page(persistence.RunListParams{Workflow: "alpha", Status: []persistence.RunStatus{persistence.RunFailed}})); diff != "" {
		t.Errorf("RunList alpha failed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[3], ids[2]}, page(persistence.RunListParams{CreatedAfter: at(2 * time.Second), CreatedBefore: at(4 * time.Second), Limit: 1})); diff != "" {
		t.Errorf("RunList time window (-want +got):\n%s", diff)
	}
	if got := page(persistence.RunListParams{Workflow: "gamma"}); len(got) != 0 {
		t.Errorf("RunList gamma = %v, want none", got)
	}
	for _, bad := range []persistence.RunListParams{
		{Cursor: "!!!"}, {Cursor: "eHl6"}, {Status: []persistence.RunStatus{"nope"}}, {Workflow: "a'b"},
		{Schedule: "a b"}, {Status: []persistence.RunStatus{persistence.RunFailed, "Failed"}},
		// base64 of "123|a'b" (an id the store never writes) and of a time
		// beyond year 9999.
		{Cursor: "MTIzfGEnYg"}, {Cursor: "OTk5OTk5OTk5OTk5OTk5OTk5fGE"},
	} {
		_, err := st.RunList(c, bad)
		var ve *persistence.ValidationError
		if !errors.Is(err, persistence.ErrInvalid) || !errors.As(err, &ve) {
			t.Errorf("RunList(%+v) = %v, want a *ValidationError (ErrInvalid)", bad, err)
			continue
		}
		if bad.Cursor != "" && (ve.Field != "cursor" || ve.Value != bad.Cursor) {
			t.Errorf("RunList(cursor %q) = %v, want an error naming the cursor", bad.Cursor, err)
		}
	}
	t.Run("Paging", func(t *testing.T) { s.testRunListPaging(t, s.newStore(t)) })
}

// testRunListPaging pages through runs of several workflows, statuses,
// schedules and idempotency keys, with runs that share a creation time,
// under every filter combination and several page sizes, and checks that
// each filter's runs come once each, newest first, whatever the page
// size.
func (s *suite) testRunListPaging(t *testing.T, st persistence.Store) {
	c := ctx(t)
	type made struct {
		run    persistence.Run
		status persistence.RunStatus
	}
	var runs []made
	for i := range 90 {
		p := persistence.RunCreateParams{
			ID: newID(t), Workflow: []string{"alpha", "beta", "gamma"}[i%3],
			// Six runs per creation time, two of each workflow.
			Now: at(time.Duration(i/6) * time.Second), Steps: specs("a"),
		}
		if i%5 == 1 {
			p.Schedule = "nightly"
		}
		// Runs of every workflow share a key (unique per workflow): runs
		// 3j, 3j+1 and 3j+2 for even j.
		if j := i / 3; j%2 == 0 {
			p.IdempotencyKey = fmt.Sprintf("k%d", j)
		}
		status := []persistence.RunStatus{persistence.RunRunning, persistence.RunSucceeded, persistence.RunFailed,
			persistence.RunCancelled, persistence.RunSucceeded, persistence.RunPending}[(i/3)%6]
		if status == persistence.RunPending {
			p.StartAt = p.Now.Add(time.Hour)
		}
		res, err := st.RunCreate(c, p)
		if err != nil {
			t.Fatal(err)
		}
		if status != persistence.RunRunning && status != persistence.RunPending {
			if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: res.Run.ID, To: status, Now: p.Now}); err != nil {
				t.Fatal(err)
			}
		}
		runs = append(runs, made{res.Run, status})
	}
	// Newest first: creation time, then id, both descending.
	slices.SortFunc(runs, func(a, b made) int {
		if c := b.run.CreatedAt.Compare(a.run.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.run.ID, a.run.ID)
	})
	statusSets := [][]persistence.RunStatus{
		nil,
		{persistence.RunFailed},
		{persistence.RunPending},
		{persistence.RunFailed, persistence.RunCancelled},
		// A repeated status lists its runs once.
		{persistence.RunSucceeded, persistence.RunRunning, persistence.RunSucceeded},
	}
	windows := [][2]time.Time{{}, {at(3 * time.Second), at(11 * time.Second)}}
	for _, wf := range []string{"", "alpha"} {
		for _, sched := range []string{"", "nightly"} {
			for _, sts := range statusSets {
				for _, win := range windows {
					for _, key := range []string{"", "k2", "k16"} {
						p := persistence.RunListParams{Workflow: wf, Schedule: sched, Status: sts, CreatedAfter: win[0], CreatedBefore: win[1], IdempotencyKey: key}
						var want []string
						for _, r := range runs {
							if (wf == "" || r.run.Workflow == wf) && (sched == "" || r.run.Schedule == sched) &&
								(key == "" || r.run.IdempotencyKey == key) &&
								(len(sts) == 0 || slices.Contains(sts, r.status)) &&
								(win[0].IsZero() || !r.run.CreatedAt.Before(win[0])) && (win[1].IsZero() || r.run.CreatedAt.Before(win[1])) {
								want = append(want, r.run.ID)
							}
						}
						if len(want) == 0 && key == "" && (wf == "" || sched == "") {
							t.Fatalf("no runs for %+v: the data should give every filter but the narrowest some", p)
						}
						for _, limit := range []int{1, 4, 0} {
							p.Limit = limit
							got := pageAll(t, st, p)
							if diff := cmp.Diff(want, got); diff != "" {
								t.Errorf("RunList(%+v) paged (-want +got):\n%s", p, diff)
							}
						}
					}
				}
			}
		}
	}
}

// pageAll returns the ids of every run p lists, following NextCursor,
// and checks each page's size and the runs' statuses.
func pageAll(t *testing.T, st persistence.Store, p persistence.RunListParams) []string {
	t.Helper()
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	var got []string
	for pages := 0; ; pages++ {
		if pages > 200 {
			t.Fatalf("RunList(%+v): more than 200 pages", p)
		}
		res, err := st.RunList(ctx(t), p)
		if err != nil {
			t.Fatalf("RunList(%+v): %v", p, err)
		}
		if len(res.Runs) > limit || (res.NextCursor != "" && len(res.Runs) != limit) {
			t.Fatalf("RunList(%+v): page of %d runs (limit %d), next cursor %q", p, len(res.Runs), limit, res.NextCursor)
		}
		for _, r := range res.Runs {
			if len(p.Status) > 0 && !slices.Contains(p.Status, r.Status) {
				t.Errorf("RunList(%+v) listed run %s, %s", p, r.ID, r.Status)
			}
			got = append(got, r.ID)
		}
		if res.NextCursor == "" {
			return got
		}
		p.Cursor = res.NextCursor
	}
}

func (s *suite) testRunTransition(t *testing.T, st persistence.Store) {
	c := ctx(t)
	res := createRun(t, st, "wf", `{}`, "a", "b:a", "c", "d:c")
	id := res.Run.ID
	claim(t, st, id, "c", "fc", at(time.Second))

	// From mismatch.
	_, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: id, From: []persistence.RunStatus{persistence.RunPending}, To: persistence.RunCancelled, Now: at(time.Minute)})
	var te *persistence.TransitionError
	if !errors.As(err, &te) || !errors.Is(err, persistence.ErrInvalidTransition) || te.From != "running" || te.To != "cancelled" || te.RunID != id {
		t.Errorf("From mismatch = %v, want *TransitionError running -> cancelled", err)
	}
	if getRun(t, st, id).Status != persistence.RunRunning {
		t.Error("a refused transition changed the run")
	}

	tr, err := st.RunTransition(c, persistence.RunTransitionParams{
		RunID: id, From: []persistence.RunStatus{persistence.RunRunning}, To: persistence.RunCompensating,
		Error: "step c is dead", Now: at(time.Minute), CancelPendingSteps: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Run.Status != persistence.RunCompensating || tr.Run.Error != "step c is dead" || tr.Run.FinishedAt != nil || !tr.Run.UpdatedAt.Equal(at(time.Minute)) {
		t.Errorf("transitioned run = %+v", tr.Run)
	}
	if diff := cmp.Diff([]string{"a", "b", "d"}, names(tr.Cancelled)); diff != "" {
		t.Errorf("cancelled steps (-want +got):\n%s", diff)
	}
	for _, sr := range tr.Cancelled {
		if sr.Status != persistence.StepCancelled || sr.FinishedAt == nil {
			t.Errorf("cancelled step = %+v", sr)
		}
	}
	wantStatuses(t, st, id, map[string]persistence.StepStatus{"a": persistence.StepCancelled, "b": persistence.StepCancelled,
		"c": persistence.StepRunning, "d": persistence.StepCancelled})
	if diff := cmp.Diff(tr.Run, getRun(t, st, id)); diff != "" {
		t.Errorf("RunGet after transition (-returned +stored):\n%s", diff)
	}

	// To a terminal status: finished_at is set; then nothing changes it.
	tr, err = st.RunTransition(c, persistence.RunTransitionParams{RunID: id, To: persistence.RunCompensated, Now: at(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Run.FinishedAt == nil || !tr.Run.FinishedAt.Equal(at(2*time.Minute)) || tr.Run.Error != "step c is dead" {
		t.Errorf("compensated run = %+v", tr.Run)
	}
	for _, to := range []persistence.RunStatus{persistence.RunRunning, persistence.RunCancelled, persistence.RunCompensated} {
		if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: id, To: to, Now: at(3 * time.Minute)}); !errors.Is(err, persistence.ErrRunFinished) {
			t.Errorf("finished run -> %s = %v, want ErrRunFinished", to, err)
		}
	}

	// Succeeded stores the output.
	r2 := createRun(t, st, "wf", "", "a")
	tr, err = st.RunTransition(c, persistence.RunTransitionParams{RunID: r2.Run.ID, From: []persistence.RunStatus{persistence.RunRunning}, To: persistence.RunSucceeded, Output: []byte(`{"ok":true}`), Now: at(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, r2.Run.ID); string(got.Output) != `{"ok":true}` || got.Status != persistence.RunSucceeded {
		t.Errorf("succeeded run = %+v", got)
	}

	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: newID(t), To: persistence.RunCancelled, Now: t0}); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("unknown run = %v, want ErrRunNotFound", err)
	}
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: id, To: "bogus", Now: t0}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("bogus status = %v, want ErrInvalid", err)
	}
	r3 := createRun(t, st, "wf", "", "a")
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: r3.Run.ID, To: persistence.RunSucceeded, Output: []byte("nope"), Now: t0}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("invalid output = %v, want ErrInvalid", err)
	}
}

func (s *suite) testRunCreateTx(t *testing.T, st persistence.Store) {
	txs, ok := st.(persistence.TxStore)
	if !ok || s.opts.beginTx == nil {
		t.Skip("store is not a TxStore or the suite has no WithBeginTx hook")
	}
	c := ctx(t)
	p := persistence.RunCreateParams{ID: newID(t), Workflow: "outbox", Input: []byte(`{"a":1}`), Now: t0, Steps: specs("a", "b", "c:a,b")}

	tx, err := s.opts.beginTx(c, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txs.RunCreateTx(c, tx, p); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunGet(c, p.ID); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("rolled back run: RunGet = %v, want ErrRunNotFound", err)
	}

	tx, err = s.opts.beginTx(c, st)
	if err != nil {
		t.Fatal(err)
	}
	res, err := txs.RunCreateTx(c, tx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created {
		t.Error("Created = false")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, p.ID); got.Status != persistence.RunRunning || string(got.Input) != `{"a":1}` {
		t.Errorf("committed run = %+v", got)
	}
	wantStatuses(t, st, p.ID, map[string]persistence.StepStatus{"a": persistence.StepQueued, "b": persistence.StepQueued, "c": persistence.StepWaiting})
	queued, err := st.StepListQueued(c, persistence.ListDueParams{Before: at(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names(queued)); diff != "" {
		t.Errorf("queued roots after commit (-want +got):\n%s", diff)
	}
}

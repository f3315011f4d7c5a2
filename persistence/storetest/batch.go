package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// testClaimMany: one batch claims what is claimable and refuses the rest,
// item by item, without one refusal spoiling the others.
func (s *suite) testClaimMany(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r1 := createRun(t, st, "wf", `{"n":1}`, "a", "b", "c:a,b")
	r2 := createRun(t, st, "wf", `{"n":2}`, "a", "b:a")
	id1, id2 := r1.Run.ID, r2.Run.ID
	complete(t, st, id1, "a", claim(t, st, id1, "a", "f0", t0).Step.Fence, `{"a":1}`, at(time.Second))

	outs, err := st.StepClaimMany(c, persistence.StepClaimManyParams{
		Items: []persistence.StepClaimItem{
			{RunID: id1, Step: "b"},  // queued: claimed
			{RunID: id2, Step: "a"},  // queued: claimed
			{RunID: id2, Step: "b"},  // waiting: refused
			{RunID: id1, Step: "zz"}, // unknown
			{RunID: id1, Step: "b"},  // twice in one batch: the second loses
			{RunID: id1, Step: "a"},  // succeeded: refused
		},
		Fence: "batch1", Worker: "w", LeaseUntil: at(time.Minute), Now: at(2 * time.Second),
	})
	if err != nil {
		t.Fatalf("StepClaimMany: %v", err)
	}
	if len(outs) != 6 {
		t.Fatalf("%d outcomes, want 6", len(outs))
	}
	for i, want := range []error{nil, nil, persistence.ErrNotClaimable, persistence.ErrStepNotFound, persistence.ErrNotClaimable, persistence.ErrNotClaimable} {
		if want == nil && outs[i].Err != nil || want != nil && !errors.Is(outs[i].Err, want) {
			t.Errorf("item %d: err = %v, want %v", i, outs[i].Err, want)
		}
	}
	if got := outs[0].Result; got.Step.Status != persistence.StepRunning || got.Step.Fence != "batch1" || got.Step.Attempt != 1 ||
		string(got.Run.Input) != `{"n":1}` || got.Run.ID != id1 {
		t.Errorf("claimed b = %+v", got)
	}
	if got := outs[1].Result; got.Run.ID != id2 || string(got.Run.Input) != `{"n":2}` {
		t.Errorf("claimed run2 a = %+v", got)
	}
	// c depends on a and b: its claim (once b is done) carries a's output.
	complete(t, st, id1, "b", "batch1", `{"b":2}`, at(3*time.Second))
	outs, err = st.StepClaimMany(c, persistence.StepClaimManyParams{
		Items: []persistence.StepClaimItem{{RunID: id1, Step: "c"}},
		Fence: "batch2", Worker: "w", LeaseUntil: at(time.Minute), Now: at(4 * time.Second),
	})
	if err != nil || outs[0].Err != nil {
		t.Fatalf("claim c: %v %v", err, outs[0].Err)
	}
	if diff := cmp.Diff(map[string][]byte{"a": []byte(`{"a":1}`), "b": []byte(`{"b":2}`)}, outs[0].Result.Outputs); diff != "" {
		t.Errorf("dependency outputs (-want +got):\n%s", diff)
	}
	atts, err := st.AttemptList(c, id1)
	if err != nil {
		t.Fatal(err)
	}
	var running int
	for _, a := range atts {
		if a.Outcome == persistence.OutcomeRunning {
			running++
			if a.Step != "c" || a.Worker != "w" {
				t.Errorf("running attempt %+v", a)
			}
		}
	}
	if running != 1 {
		t.Errorf("%d running attempts in run 1, want 1 (c)", running)
	}
	// Upstream is transitive: c after b after a sees a's output too.
	id4 := createRun(t, st, "wf", "", "a", "b:a", "c:b", "x").Run.ID
	complete(t, st, id4, "a", claim(t, st, id4, "a", "fa4", t0).Step.Fence, `{"a":4}`, at(time.Second))
	complete(t, st, id4, "b", claim(t, st, id4, "b", "fb4", t0).Step.Fence, "", at(time.Second))
	complete(t, st, id4, "x", claim(t, st, id4, "x", "fx4", t0).Step.Fence, `{"x":4}`, at(time.Second))
	outs, err = st.StepClaimMany(c, persistence.StepClaimManyParams{
		Items: []persistence.StepClaimItem{{RunID: id4, Step: "c"}},
		Fence: "batch4", Worker: "w", LeaseUntil: at(time.Minute), Now: at(2 * time.Second),
	})
	if err != nil || outs[0].Err != nil {
		t.Fatalf("claim c: %v %v", err, outs[0].Err)
	}
	if diff := cmp.Diff(map[string][]byte{"a": []byte(`{"a":4}`)}, outs[0].Result.Outputs); diff != "" {
		t.Errorf("upstream outputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]persistence.StepStatus{"a": persistence.StepSucceeded, "b": persistence.StepSucceeded}, outs[0].Result.Upstream); diff != "" {
		t.Errorf("upstream statuses (-want +got):\n%s", diff)
	}

	// A batch claim of a step of a run that is not running is refused.
	id3 := createRun(t, st, "wf", "", "a", "b").Run.ID
	claim(t, st, id3, "a", "f3", t0)
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: id3, From: []persistence.RunStatus{persistence.RunRunning},
		To: persistence.RunCompensating, Now: at(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	outs, err = st.StepClaimMany(c, persistence.StepClaimManyParams{
		Items: []persistence.StepClaimItem{{RunID: id3, Step: "b"}},
		Fence: "batch3", Worker: "w", LeaseUntil: at(time.Minute), Now: at(6 * time.Second),
	})
	if err != nil || !errors.Is(outs[0].Err, persistence.ErrNotClaimable) {
		t.Errorf("claim in a compensating run: %v / %v, want ErrNotClaimable", err, outs[0].Err)
	}
	if got := getStep(t, st, id3, "b"); got.Status != persistence.StepQueued {
		t.Errorf("refused claim changed b: %+v", got)
	}
}

// testCompleteMany: completions in one batch release a join step once,
// finish the run once, and refuse stale fences item by item.
func (s *suite) testCompleteMany(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", "", "a", "b", "c", "d:a,b,c")
	id := r.Run.ID
	other := createRun(t, st, "wf", "", "x").Run.ID
	for _, step := range []string{"a", "b", "c"} {
		claim(t, st, id, step, "f"+step, t0)
	}
	claim(t, st, other, "x", "fx", t0)
	outs, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{
		{RunID: id, Step: "a", Fence: "fa", Output: []byte(`{"a":1}`), Now: at(time.Second)},
		{RunID: id, Step: "b", Fence: "stale", Now: at(time.Second)},
		{RunID: id, Step: "c", Fence: "fc", Skipped: true, Now: at(time.Second)},
		{RunID: other, Step: "x", Fence: "fx", Output: []byte(`{"x":1}`), Now: at(time.Second)},
		{RunID: id, Step: "b", Fence: "fb", Output: []byte(`not json`), Now: at(time.Second)},
	}})
	if err != nil {
		t.Fatalf("StepCompleteMany: %v", err)
	}
	if outs[0].Err != nil || outs[2].Err != nil || outs[3].Err != nil {
		t.Fatalf("outcomes: %v / %v / %v", outs[0].Err, outs[2].Err, outs[3].Err)
	}
	if !errors.Is(outs[1].Err, persistence.ErrFenceMismatch) {
		t.Errorf("stale fence: err = %v, want ErrFenceMismatch", outs[1].Err)
	}
	if !errors.Is(outs[4].Err, persistence.ErrInvalid) {
		t.Errorf("invalid output: err = %v, want ErrInvalid", outs[4].Err)
	}
	if !outs[3].Result.RunFinished || outs[3].Result.RunStatus != persistence.RunSucceeded {
		t.Errorf("last step of the other run: %+v, want the run finished", outs[3].Result)
	}
	if outs[0].Result.RunFinished || outs[0].Result.RunStatus != persistence.RunRunning {
		t.Errorf("a: %+v, want the run still running", outs[0].Result)
	}
	if got := getStep(t, st, id, "b"); got.Status != persistence.StepRunning || got.Fence != "fb" {
		t.Errorf("refused items changed b: %+v", got)
	}
	if got := getStep(t, st, id, "c"); got.Status != persistence.StepSkipped {
		t.Errorf("c = %s, want skipped", got.Status)
	}
	if got := getStep(t, st, id, "d"); got.Status != persistence.StepWaiting || got.PendingDeps != 1 {
		t.Errorf("d = %s with %d pending, want waiting with 1", got.Status, got.PendingDeps)
	}
	outs, err = st.StepCompleteMany(c, persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{
		{RunID: id, Step: "b", Fence: "fb", Now: at(2 * time.Second)},
	}})
	if err != nil || outs[0].Err != nil {
		t.Fatalf("complete b: %v %v", err, outs[0].Err)
	}
	if diff := cmp.Diff([]string{"d"}, names(outs[0].Result.Ready)); diff != "" {
		t.Errorf("ready after b (-want +got):\n%s", diff)
	}
	outs, err = st.StepCompleteMany(c, persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{{RunID: id, Step: "d", Fence: "f", Compensation: true}}})
	if err != nil || outs[0].Err == nil || !strings.Contains(outs[0].Err.Error(), "compensation") {
		t.Errorf("compensation in a batch: %v / %v, want an error naming it", err, outs[0].Err)
	}
}

// testCompleteManyRows: one batch writes every row it changes as it says
// it did, whether the rows share their new values (completions at one
// instant, the dependents it claims or queues) or not (outputs that
// differ, alike or empty; a skip), and leaves a refused item's row alone.
func (s *suite) testCompleteManyRows(t *testing.T, st persistence.Store) {
	c := ctx(t)
	// In key order (version 7 ids grow): two empty outputs, 80 that
	// differ, 150 alike but one, a skip and a refusal. Rows with differing
	// outputs are written in bounded pieces, and the alike ones in one.
	var outputs []string
	outputs = append(outputs, "", "")
	for i := range 80 {
		outputs = append(outputs, fmt.Sprintf(`{"n":%d}`, i))
	}
	for i := range 150 {
		if i == 70 {
			outputs = append(outputs, `{"odd":1}`) // among alike ones
			continue
		}
		outputs = append(outputs, `{"same":1}`)
	}
	outputs = append(outputs, "", "")
	n := len(outputs)
	skipped, stale := n-2, n-1
	cps := make([]persistence.RunCreateParams, n)
	for i := range cps {
		cps[i] = persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Version: 1, Now: t0, Steps: specs("a", "b:a", "c:a")}
	}
	created, err := st.RunCreateMany(c, persistence.RunCreateManyParams{Items: cps})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	items := make([]persistence.StepClaimItem, n)
	for i, o := range created {
		if o.Err != nil {
			t.Fatalf("create run %d: %v", i, o.Err)
		}
		ids[i] = o.Result.Run.ID
		items[i] = persistence.StepClaimItem{RunID: ids[i], Step: "a"}
	}
	// Every third run's a is claimed by another worker, later: the batch
	// changes those rows as it does the others, and each keeps its own
	// claim (start, worker).
	fence := func(i int) string { return []string{"fa", "fa", "fb"}[i%3] }
	for _, f := range []string{"fa", "fb"} {
		var its []persistence.StepClaimItem
		for i, it := range items {
			if fence(i) == f {
				its = append(its, it)
			}
		}
		worker, now := "w1", t0
		if f == "fb" {
			worker, now = "w3", at(500*time.Millisecond)
		}
		claimed, err := st.StepClaimMany(c, persistence.StepClaimManyParams{Items: its, Fence: f, Worker: worker, LeaseUntil: now.Add(time.Minute), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range claimed {
			if o.Err != nil {
				t.Fatalf("claim a of run %s: %v", its[i].RunID, o.Err)
			}
		}
	}
	ps := make([]persistence.StepCompleteParams, n)
	for i := range ps {
		ps[i] = persistence.StepCompleteParams{RunID: ids[i], Step: "a", Fence: fence(i), Now: at(time.Second)}
		if outputs[i] != "" {
			ps[i].Output = []byte(outputs[i])
		}
	}
	ps[skipped].Skipped = true
	ps[stale].Fence = "stale"
	before := getStep(t, st, ids[stale], "a")
	rc := &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 5, Fence: "eager", Worker: "w2", LeaseUntil: at(2 * time.Minute)}
	outs, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{Items: ps, ClaimReleased: rc})
	if err != nil {
		t.Fatalf("StepCompleteMany: %v", err)
	}
	var nClaimed, nReady int
	for i, o := range outs {
		if i == stale {
			if !errors.Is(o.Err, persistence.ErrFenceMismatch) {
				t.Errorf("stale fence: err = %v, want ErrFenceMismatch", o.Err)
			}
			continue
		}
		if o.Err != nil {
			t.Fatalf("complete a of run %d: %v", i, o.Err)
		}
		got := getStep(t, st, ids[i], "a")
		if diff := cmp.Diff(o.Result.Step, got); diff != "" {
			t.Errorf("run %d: stored a differs from the result (-result +stored):\n%s", i, diff)
		}
		if string(got.Output) != outputs[i] {
			t.Errorf("run %d: output %q, want %q", i, got.Output, outputs[i])
		}
		wantStart := t0
		if fence(i) == "fb" {
			wantStart = at(500 * time.Millisecond)
		}
		if got.StartedAt == nil || !got.StartedAt.Equal(wantStart) {
			t.Errorf("run %d: a started at %v, want %v (its own claim)", i, got.StartedAt, wantStart)
		}
		if i < 3 || i == skipped {
			all, err := st.AttemptList(c, ids[i])
			if err != nil {
				t.Fatal(err)
			}
			var atts []persistence.Attempt
			for _, a := range all {
				if a.Step == "a" {
					atts = append(atts, a)
				}
			}
			wantWorker := map[string]string{"fa": "w1", "fb": "w3"}[fence(i)]
			if len(atts) != 1 || atts[0].Worker != wantWorker || !atts[0].StartedAt.Equal(wantStart) || atts[0].FinishedAt == nil {
				t.Errorf("run %d: attempts of a %+v, want one by %s started at %v, finished", i, atts, wantWorker, wantStart)
			}
		}
		if want := persistence.StepSucceeded; i == skipped {
			if got.Status != persistence.StepSkipped {
				t.Errorf("run %d: a is %s, want skipped", i, got.Status)
			}
		} else if got.Status != want {
			t.Errorf("run %d: a is %s, want %s", i, got.Status, want)
		}
		for _, cl := range o.Result.Claimed {
			nClaimed++
			got := getStep(t, st, ids[i], cl.Step.Step)
			if diff := cmp.Diff(cl.Step, got); diff != "" {
				t.Errorf("run %d: stored claimed %s differs from the result (-result +stored):\n%s", i, cl.Step.Step, diff)
			}
			if got.Status != persistence.StepRunning || got.Fence != "eager" || got.Attempt != 1 || got.PendingDeps != 0 {
				t.Errorf("run %d: claimed %s stored as %+v", i, cl.Step.Step, got)
			}
		}
		for _, r := range o.Result.Ready {
			nReady++
			got := getStep(t, st, ids[i], r.Step)
			if diff := cmp.Diff(r, got); diff != "" {
				t.Errorf("run %d: stored ready %s differs from the result (-result +stored):\n%s", i, r.Step, diff)
			}
			if got.Status != persistence.StepQueued || got.Fence != "" || got.QueuedAt == nil || !got.QueuedAt.Equal(at(time.Second)) {
				t.Errorf("run %d: ready %s stored as %+v", i, r.Step, got)
			}
		}
	}
	if nClaimed != 5 || nReady != 2*(n-1)-5 {
		t.Errorf("%d dependents claimed and %d queued, want 5 and %d", nClaimed, nReady, 2*(n-1)-5)
	}
	if diff := cmp.Diff(before, getStep(t, st, ids[stale], "a")); diff != "" {
		t.Errorf("the refused item's row changed (-before +after):\n%s", diff)
	}
	for _, step := range []string{"b", "c"} {
		if got := getStep(t, st, ids[stale], step); got.Status != persistence.StepWaiting || got.PendingDeps != 1 {
			t.Errorf("refused run's %s = %s with %d pending, want waiting with 1", step, got.Status, got.PendingDeps)
		}
	}
}

// testConcurrentCompleteMany: siblings completed by concurrent batches
// (each also carrying other runs' steps) release their join exactly once.
func (s *suite) testConcurrentCompleteMany(t *testing.T, st persistence.Store) {
	reps := 40
	if testing.Short() {
		reps = 5
	}
	for rep := range reps {
		var ids []string
		for range 4 {
			r := createRun(t, st, "wf", "", "a", "b", "c:a,b")
			for _, step := range []string{"a", "b"} {
				claim(t, st, r.Run.ID, step, "f"+step, t0)
			}
			ids = append(ids, r.Run.ID)
		}
		var mu sync.Mutex
		released := map[string]int{}
		parallel(2, func(i int) {
			step := string(rune('a' + i))
			var ps []persistence.StepCompleteParams
			for _, id := range ids {
				ps = append(ps, persistence.StepCompleteParams{RunID: id, Step: step, Fence: "f" + step, Now: at(time.Second)})
			}
			outs, err := st.StepCompleteMany(ctx(t), persistence.StepCompleteManyParams{Items: ps})
			if err != nil {
				t.Errorf("rep %d: %v", rep, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range outs {
				if o.Err != nil {
					t.Errorf("rep %d: %v", rep, o.Err)
				}
				for _, rd := range o.Result.Ready {
					released[rd.RunID+"/"+rd.Step]++
				}
			}
		})
		for _, id := range ids {
			if released[id+"/c"] != 1 {
				t.Fatalf("rep %d: run %s join released %d times, want 1", rep, id, released[id+"/c"])
			}
		}
	}
}

// testCompleteClaimsReleased: a completion batch claims the steps it
// releases for the caller (ReleaseClaim), within the budget and the
// queues, and queues the rest.
func (s *suite) testCompleteClaimsReleased(t *testing.T, st persistence.Store) {
	c := ctx(t)
	r := createRun(t, st, "wf", `{"in":1}`, "a", "b:a", "c:a", "d:b,c")
	id := r.Run.ID
	claim(t, st, id, "a", "fa", t0)
	rc := &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 1, Fence: "eager", Worker: "w2", LeaseUntil: at(time.Minute)}
	outs, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{
		Items:         []persistence.StepCompleteParams{{RunID: id, Step: "a", Fence: "fa", Output: []byte(`{"a":1}`), Now: at(time.Second)}},
		ClaimReleased: rc,
	})
	if err != nil || outs[0].Err != nil {
		t.Fatalf("complete a: %v %v", err, outs[0].Err)
	}
	res := outs[0].Result
	if len(res.Claimed) != 1 || len(res.Ready) != 1 {
		t.Fatalf("claimed %d, ready %d; want 1 and 1 (budget 1)", len(res.Claimed), len(res.Ready))
	}
	cl := res.Claimed[0]
	if cl.Step.Status != persistence.StepRunning || cl.Step.Fence != "eager" || cl.Step.Attempt != 1 ||
		string(cl.Run.Input) != `{"in":1}` || string(cl.Outputs["a"]) != `{"a":1}` || cl.Upstream["a"] != persistence.StepSucceeded {
		t.Errorf("claimed = %+v", cl)
	}
	if got := getStep(t, st, id, cl.Step.Step); got.Status != persistence.StepRunning || got.Fence != "eager" ||
		got.Attempt != 1 || got.StartedAt == nil || got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(at(time.Minute)) {
		t.Errorf("stored claimed step = %+v, want running, attempt 1, started, with the claim's lease", got)
	}
	if res.Ready[0].Status != persistence.StepQueued {
		t.Errorf("ready = %+v, want queued", res.Ready[0])
	}
	atts, err := st.AttemptList(c, id)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range atts {
		if a.Step == cl.Step.Step && a.Worker == "w2" && a.Outcome == persistence.OutcomeRunning && a.Attempt == 1 {
			found = true
		}
	}
	if !found {
		t.Errorf("no running attempt row for the claimed step: %+v", atts)
	}
	// The claimed step completes with the claim's fence; a queue the
	// caller does not work gets nothing claimed.
	other := claim(t, st, id, res.Ready[0].Step, "fo", at(2*time.Second))
	outs, err = st.StepCompleteMany(c, persistence.StepCompleteManyParams{
		Items: []persistence.StepCompleteParams{
			{RunID: id, Step: cl.Step.Step, Fence: "eager", Now: at(3 * time.Second)},
			{RunID: id, Step: other.Step.Step, Fence: "fo", Now: at(3 * time.Second)},
		},
		ClaimReleased: &persistence.ReleaseClaim{Queues: []string{"elsewhere"}, Max: 10, Fence: "eager2", Worker: "w2", LeaseUntil: at(time.Minute)},
	})
	if err != nil || outs[0].Err != nil || outs[1].Err != nil {
		t.Fatalf("complete b, c: %v %v %v", err, outs[0].Err, outs[1].Err)
	}
	var ready []string
	for _, o := range outs {
		if len(o.Result.Claimed) != 0 {
			t.Errorf("claimed %+v for a queue the caller does not work", o.Result.Claimed)
		}
		ready = append(ready, names(o.Result.Ready)...)
	}
	if diff := cmp.Diff([]string{"d"}, ready); diff != "" {
		t.Errorf("ready (-want +got):\n%s", diff)
	}
	if _, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{ClaimReleased: &persistence.ReleaseClaim{Fence: ""}}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("empty claim fence: err = %v, want ErrInvalid", err)
	}
}

// testRunCreateMany: one batch creates runs with and without keys,
// refuses invalid ones item by item, and returns existing runs for
// repeated keys.
func (s *suite) testRunCreateMany(t *testing.T, st persistence.Store) {
	c := ctx(t)
	existing, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Version: 1, Input: []byte(`{"k":1}`),
		IdempotencyKey: "key-1", Now: t0, Steps: specs("a")})
	if err != nil {
		t.Fatal(err)
	}
	ps := []persistence.RunCreateParams{
		{ID: newID(t), Workflow: "wf", Version: 1, Input: []byte(`{"n":1}`), Now: t0, Steps: specs("a", "b:a")},
		{ID: newID(t), Workflow: "wf", Version: 1, Now: t0, Steps: specs("a", "b", "c:a,b")},
		{ID: newID(t), Workflow: "bad name!", Version: 1, Now: t0, Steps: specs("a")},
		{ID: newID(t), Workflow: "wf", Version: 1, Input: []byte(`{"k":1}`), IdempotencyKey: "key-1", Now: t0, Steps: specs("a")},
		{ID: newID(t), Workflow: "wf", Version: 1, Input: []byte(`{"k":2}`), IdempotencyKey: "key-2", Now: t0, Steps: specs("a")},
		{ID: newID(t), Workflow: "wf", Version: 1, Input: []byte(`{"k":9}`), IdempotencyKey: "key-1", Now: t0, Steps: specs("a")},
	}
	outs, err := st.RunCreateMany(c, persistence.RunCreateManyParams{Items: ps})
	if err != nil {
		t.Fatalf("RunCreateMany: %v", err)
	}
	for _, i := range []int{0, 1, 4} {
		o := outs[i]
		if o.Err != nil || !o.Result.Created || o.Result.Run.ID != ps[i].ID {
			t.Errorf("item %d: %+v / %v, want created", i, o.Result.Run, o.Err)
			continue
		}
		got, err := st.RunGet(c, ps[i].ID)
		if err != nil || string(got.Input) != string(ps[i].Input) || got.Status != persistence.RunRunning {
			t.Errorf("item %d stored as %+v (%v)", i, got, err)
		}
		sts, err := st.StepList(c, ps[i].ID)
		if err != nil || len(sts) != len(ps[i].Steps) {
			t.Errorf("item %d: %d steps stored (%v), want %d", i, len(sts), err, len(ps[i].Steps))
		}
	}
	if diff := cmp.Diff([]string{"a", "b"}, queuedNames(outs[1].Result.Steps)); diff != "" {
		t.Errorf("queued roots of item 1 (-want +got):\n%s", diff)
	}
	if !errors.Is(outs[2].Err, persistence.ErrInvalid) {
		t.Errorf("invalid workflow name: err = %v, want ErrInvalid", outs[2].Err)
	}
	if outs[3].Err != nil || outs[3].Result.Created || outs[3].Result.Run.ID != existing.Run.ID {
		t.Errorf("repeated key: %+v / %v, want the existing run", outs[3].Result.Run, outs[3].Err)
	}
	if !errors.Is(outs[5].Err, persistence.ErrIdempotencyConflict) {
		t.Errorf("repeated key, other input: err = %v, want ErrIdempotencyConflict", outs[5].Err)
	}
	if _, err := st.RunGet(c, ps[2].ID); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("the invalid item was stored: %v", err)
	}
}

// testRunCreateClaimsRoots: RunCreateMany claims root steps of the runs
// it creates for the caller (ClaimRoots), within the budget and the
// queues, never for a run that starts later or one that already existed
// for its key; a claimed root is running with a running attempt and
// completes with the claim's fence.
func (s *suite) testRunCreateClaimsRoots(t *testing.T, st persistence.Store) {
	c := ctx(t)
	existing, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Version: 1,
		IdempotencyKey: "k", Now: t0, Steps: specs("a")})
	if err != nil {
		t.Fatal(err)
	}
	other := specs("x")
	other[0].Queue = "elsewhere"
	ps := []persistence.RunCreateParams{
		{ID: newID(t), Workflow: "wf", Version: 1, Input: []byte(`{"n":1}`), Now: t0, Steps: specs("a", "b", "c:a,b")},
		{ID: newID(t), Workflow: "wf", Version: 1, Now: t0, StartAt: at(time.Hour), Steps: specs("a")},
		{ID: newID(t), Workflow: "wf", Version: 1, IdempotencyKey: "k", Now: t0, Steps: specs("a")},
		{ID: newID(t), Workflow: "wf", Version: 1, Now: t0, Steps: other},
		{ID: newID(t), Workflow: "wf", Version: 1, Now: t0, Steps: specs("a")},
	}
	rc := &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 2, Fence: "boot", Worker: "w9", LeaseUntil: at(time.Minute)}
	outs, err := st.RunCreateMany(c, persistence.RunCreateManyParams{Items: ps, ClaimRoots: rc})
	if err != nil {
		t.Fatalf("RunCreateMany: %v", err)
	}
	for i, o := range outs {
		if o.Err != nil {
			t.Fatalf("item %d: %v", i, o.Err)
		}
	}
	// Budget 2: both roots of the first run; none for the pending run, the
	// existing run, the other queue, or the last run (budget spent).
	if len(outs[0].Claimed) != 2 {
		t.Fatalf("claimed %d roots of run 0, want 2: %+v", len(outs[0].Claimed), outs[0].Claimed)
	}
	for i := 1; i < len(outs); i++ {
		if len(outs[i].Claimed) != 0 {
			t.Errorf("item %d: claimed %+v, want none", i, outs[i].Claimed)
		}
	}
	if outs[2].Result.Created || outs[2].Result.Run.ID != existing.Run.ID {
		t.Errorf("repeated key: %+v, want the existing run", outs[2].Result.Run)
	}
	if got := getStep(t, st, existing.Run.ID, "a"); got.Status != persistence.StepQueued || got.Fence != "" {
		t.Errorf("existing run's root = %+v, want still queued", got)
	}
	if diff := cmp.Diff([]string{"a"}, queuedNames(outs[4].Result.Steps)); diff != "" {
		t.Errorf("queued roots of run 4 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x"}, queuedNames(outs[3].Result.Steps)); diff != "" {
		t.Errorf("queued roots of run 3 (-want +got):\n%s", diff)
	}
	if got := getStep(t, st, ps[1].ID, "a"); got.Status == persistence.StepRunning || got.Fence != "" || got.Attempt != 0 {
		t.Errorf("root of a run that starts later = %+v, want unclaimed", got)
	}
	id := ps[0].ID
	for _, cl := range outs[0].Claimed {
		if cl.Step.Status != persistence.StepRunning || cl.Step.Fence != "boot" || cl.Step.Attempt != 1 ||
			cl.Run.ID != id || string(cl.Run.Input) != `{"n":1}` || len(cl.Upstream) != 0 {
			t.Errorf("claimed = %+v", cl)
		}
		got := getStep(t, st, id, cl.Step.Step)
		if got.Status != persistence.StepRunning || got.Fence != "boot" || got.Attempt != 1 || got.StartedAt == nil ||
			!got.StartedAt.Equal(t0) || got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(at(time.Minute)) {
			t.Errorf("stored claimed step = %+v, want running, attempt 1, started at t0, with the claim's lease", got)
		}
	}
	for _, sr := range outs[0].Result.Steps {
		if sr.Step != "c" && sr.Status != persistence.StepRunning {
			t.Errorf("result step %s is %s, want running", sr.Step, sr.Status)
		}
	}
	atts, err := st.AttemptList(c, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 {
		t.Fatalf("attempts = %+v, want one running attempt per claimed root", atts)
	}
	for _, a := range atts {
		if a.Worker != "w9" || a.Outcome != persistence.OutcomeRunning || a.Attempt != 1 || a.Kind != persistence.AttemptForward || !a.StartedAt.Equal(t0) {
			t.Errorf("attempt = %+v", a)
		}
	}
	// A claimed root cannot be claimed again; it completes with the fence,
	// and releases its dependent.
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: "f2", Worker: "w", LeaseUntil: at(time.Minute), Now: at(time.Second)}); !errors.Is(err, persistence.ErrNotClaimable) {
		t.Errorf("claim of a claimed root: err = %v, want ErrNotClaimable", err)
	}
	done, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{Items: []persistence.StepCompleteParams{
		{RunID: id, Step: "a", Fence: "boot", Now: at(time.Second)},
		{RunID: id, Step: "b", Fence: "boot", Now: at(time.Second)},
	}})
	if err != nil || done[0].Err != nil || done[1].Err != nil {
		t.Fatalf("complete claimed roots: %v %v %v", err, done[0].Err, done[1].Err)
	}
	var ready []string
	for _, o := range done {
		ready = append(ready, names(o.Result.Ready)...)
	}
	if diff := cmp.Diff([]string{"c"}, ready); diff != "" {
		t.Errorf("ready (-want +got):\n%s", diff)
	}
	if _, err := st.RunCreateMany(c, persistence.RunCreateManyParams{Items: ps[:1], ClaimRoots: &persistence.ReleaseClaim{Max: 1, Fence: ""}}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("empty claim fence: err = %v, want ErrInvalid", err)
	}
	// Over the batch limit: refused whole, nothing stored.
	over := make([]persistence.RunCreateParams, 513)
	for i := range over {
		over[i] = persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Version: 1, Now: t0, Steps: specs("a")}
	}
	if _, err := st.RunCreateMany(c, persistence.RunCreateManyParams{Items: over, ClaimRoots: rc}); err == nil || !strings.Contains(err.Error(), "batch limit") {
		t.Errorf("513 runs in one batch: err = %v, want the batch limit named", err)
	}
	if _, err := st.RunGet(c, over[0].ID); !errors.Is(err, persistence.ErrRunNotFound) {
		t.Errorf("a run of the refused batch was stored: %v", err)
	}
}

func queuedNames(sts []persistence.StepRun) []string {
	var out []string
	for _, s := range sts {
		if s.Status == persistence.StepQueued {
			out = append(out, s.Step)
		}
	}
	return out
}

// testLargeBatches: batches whose payloads add up to more than a server
// takes in one packet (MySQL's default max_allowed_packet is 16 MiB) are
// stored whole: 24 runs with inputs of 900 KB, their steps claimed at
// create and completed with outputs of 900 KB, in one call each.
func (s *suite) testLargeBatches(t *testing.T, st persistence.Store) {
	if testing.Short() {
		t.Skip("large payloads")
	}
	// 43 MB written and read back: the suite's one-minute context ran
	// out reading it under -race on two loaded cores (it ends a hung
	// call; it does not time one).
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n, size = 24, 900 << 10
	payload := func(i int) []byte {
		b := make([]byte, 0, size)
		b = append(b, `{"pad":"`...)
		for len(b) < size-16 {
			b = append(b, byte('a'+(i+len(b))%26))
		}
		return append(b, `"}`...)
	}
	ps := make([]persistence.RunCreateParams, n)
	for i := range ps {
		ps[i] = persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Version: 1, Input: payload(i), Now: t0, Steps: specs("a")}
	}
	rc := &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: n, Fence: "big", Worker: "w", LeaseUntil: at(time.Minute)}
	outs, err := st.RunCreateMany(c, persistence.RunCreateManyParams{Items: ps, ClaimRoots: rc})
	if err != nil {
		t.Fatalf("RunCreateMany of %d runs with %d-byte inputs: %v", n, size, err)
	}
	items := make([]persistence.StepCompleteParams, n)
	for i, o := range outs {
		if o.Err != nil || len(o.Claimed) != 1 {
			t.Fatalf("run %d: %v, claimed %d", i, o.Err, len(o.Claimed))
		}
		items[i] = persistence.StepCompleteParams{RunID: ps[i].ID, Step: "a", Fence: "big", Output: payload(n + i), Now: at(time.Second)}
	}
	done, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{Items: items})
	if err != nil {
		t.Fatalf("StepCompleteMany of %d steps with %d-byte outputs: %v", n, size, err)
	}
	for i, o := range done {
		if o.Err != nil || !o.Result.RunFinished {
			t.Fatalf("item %d: %v, finished %v", i, o.Err, o.Result.RunFinished)
		}
	}
	for i := range n {
		got, err := st.RunGet(c, ps[i].ID)
		if err != nil || string(got.Input) != string(ps[i].Input) || got.Status != persistence.RunSucceeded {
			t.Errorf("run %d: status %s, input intact %v (%v)", i, got.Status, string(got.Input) == string(ps[i].Input), err)
		}
		if sr := getStep(t, st, ps[i].ID, "a"); string(sr.Output) != string(items[i].Output) {
			t.Errorf("run %d: stored output (%d bytes) is not the %d bytes completed", i, len(sr.Output), len(items[i].Output))
		}
	}
}

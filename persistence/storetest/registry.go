package storetest

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// Reconciling by workflow, the store's identity and the node registry.

// stepKeys returns "workflow/step" of each step, by the runs' workflows.
func stepKeys(steps []persistence.StepRun, wfOf map[string]string) []string {
	out := []string{}
	for _, s := range steps {
		out = append(out, wfOf[s.RunID]+"/"+s.Step)
	}
	return out
}

// testListDueByWorkflow: with Workflows, the reconciler's lists return
// only those workflows' runs and steps, merged in due order and limited
// as a whole; without, every workflow's. A bad workflow name is refused.
func (s *suite) testListDueByWorkflow(t *testing.T, st persistence.Store) {
	c := ctx(t)
	wfOf := map[string]string{}
	// One run per workflow and second: wf "a" at 0s and 3s, "b" at 1s and
	// 4s, "c" at 2s and 5s; each has a queued root "x" and a waiting "y".
	var runs []string
	for i := range 6 {
		wf := string(rune('a' + i%3))
		res, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: wf, Now: at(time.Duration(i) * time.Second),
			Steps: specs("x", "y:x")})
		if err != nil {
			t.Fatal(err)
		}
		wfOf[res.Run.ID] = wf
		runs = append(runs, res.Run.ID)
	}
	list := func(name string, fn func(persistence.ListDueParams) ([]persistence.StepRun, error), p persistence.ListDueParams, want ...string) {
		t.Helper()
		got, err := fn(p)
		if err != nil {
			t.Fatalf("%s(%v): %v", name, p.Workflows, err)
		}
		if want == nil {
			want = []string{}
		}
		if diff := cmp.Diff(want, stepKeys(got, wfOf)); diff != "" {
			t.Errorf("%s(workflows %v, limit %d) (-want +got):\n%s", name, p.Workflows, p.Limit, diff)
		}
	}
	queued := func(p persistence.ListDueParams) ([]persistence.StepRun, error) { return st.StepListQueued(c, p) }
	late := at(time.Hour)
	list("StepListQueued", queued, persistence.ListDueParams{Before: late}, "a/x", "b/x", "c/x", "a/x", "b/x", "c/x")
	list("StepListQueued", queued, persistence.ListDueParams{Before: late, Workflows: []string{"c", "a"}}, "a/x", "c/x", "a/x", "c/x")
	list("StepListQueued", queued, persistence.ListDueParams{Before: late, Workflows: []string{"a", "c", "a"}, Limit: 3}, "a/x", "c/x", "a/x")
	list("StepListQueued", queued, persistence.ListDueParams{Before: late, Workflows: []string{"nobody"}})

	// Leases of a's and b's first runs expire; b's second run retries.
	for _, id := range runs[:2] {
		claim(t, st, id, "x", "f", at(10*time.Second))
	}
	claim(t, st, runs[4], "x", "r", at(10*time.Second))
	retry := at(20 * time.Second)
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: runs[4], Step: "x", Fence: "r", RetryAt: &retry, Now: at(11 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	expired := func(p persistence.ListDueParams) ([]persistence.StepRun, error) { return st.StepListLeaseExpired(c, p) }
	list("StepListLeaseExpired", expired, persistence.ListDueParams{Before: late}, "a/x", "b/x")
	list("StepListLeaseExpired", expired, persistence.ListDueParams{Before: late, Workflows: []string{"b"}}, "b/x")
	list("StepListLeaseExpired", expired, persistence.ListDueParams{Before: late, Workflows: []string{"c"}})
	retries := func(p persistence.ListDueParams) ([]persistence.StepRun, error) { return st.StepListRetryDue(c, p) }
	list("StepListRetryDue", retries, persistence.ListDueParams{Before: late, Workflows: []string{"b"}}, "b/x")
	list("StepListRetryDue", retries, persistence.ListDueParams{Before: late, Workflows: []string{"a", "c"}})

	// Delayed runs: the due ones of the workflows asked for, by start.
	for i, wf := range []string{"c", "a", "b", "a"} {
		res, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: wf, Now: t0,
			StartAt: at(time.Duration(10-i) * time.Minute), Steps: specs("x")})
		if err != nil {
			t.Fatal(err)
		}
		wfOf[res.Run.ID] = wf
	}
	due := func(p persistence.ListDueParams) []string {
		t.Helper()
		got, err := st.RunListDue(c, p)
		if err != nil {
			t.Fatalf("RunListDue(%v): %v", p.Workflows, err)
		}
		out := []string{}
		for _, r := range got {
			out = append(out, r.Workflow+"@"+r.StartAt.Sub(t0).String())
		}
		return out
	}
	for _, tc := range []struct {
		p    persistence.ListDueParams
		want []string
	}{
		{persistence.ListDueParams{Before: late}, []string{"a@7m0s", "b@8m0s", "a@9m0s", "c@10m0s"}},
		{persistence.ListDueParams{Before: late, Workflows: []string{"a", "c"}}, []string{"a@7m0s", "a@9m0s", "c@10m0s"}},
		{persistence.ListDueParams{Before: late, Workflows: []string{"c", "b"}, Limit: 1}, []string{"b@8m0s"}},
		{persistence.ListDueParams{Before: at(9 * time.Minute), Workflows: []string{"a"}}, []string{"a@7m0s", "a@9m0s"}},
		{persistence.ListDueParams{Before: late, Workflows: []string{"nobody"}}, []string{}},
	} {
		if diff := cmp.Diff(tc.want, due(tc.p)); diff != "" {
			t.Errorf("RunListDue(workflows %v, limit %d) (-want +got):\n%s", tc.p.Workflows, tc.p.Limit, diff)
		}
	}

	// A workflow name the store could not hold is refused, naming it.
	for _, bad := range []string{"", "bad name", strings.Repeat("w", 200)} {
		p := persistence.ListDueParams{Before: late, Workflows: []string{"a", bad}}
		if _, err := st.StepListQueued(c, p); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("StepListQueued with workflow %q = %v, want ErrInvalid", bad, err)
		}
		if _, err := st.RunListDue(c, p); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("RunListDue with workflow %q = %v, want ErrInvalid", bad, err)
		}
	}
}

// testStoreID: the store has an id, the same at every call.
func (s *suite) testStoreID(t *testing.T, st persistence.Store) {
	id, err := st.StoreID(ctx(t))
	if err != nil || id == "" {
		t.Fatalf("StoreID = %q, %v; want an id", id, err)
	}
	if again, err := st.StoreID(ctx(t)); err != nil || again != id {
		t.Errorf("StoreID again = %q, %v; want %q", again, err, id)
	}
}

// testNodes: the node registry keeps each node's first start and its last
// heartbeat and info, lists the nodes alive since a time by id, deletes
// the stale ones, and refuses bad ids and info with a clear error.
func (s *suite) testNodes(t *testing.T, st persistence.Store) {
	c := ctx(t)
	beat := func(n persistence.Node) {
		t.Helper()
		if err := st.NodeHeartbeat(c, n); err != nil {
			t.Fatalf("NodeHeartbeat(%s): %v", n.ID, err)
		}
	}
	beat(persistence.Node{ID: "n2", StartedAt: t0, HeartbeatAt: t0, Info: []byte(`{"workflows":["a"]}`)})
	beat(persistence.Node{ID: "n1", StartedAt: at(time.Second), HeartbeatAt: at(time.Second)})
	// A later heartbeat of n2, with a start time of its own: the first
	// start stays.
	beat(persistence.Node{ID: "n2", StartedAt: at(time.Minute), HeartbeatAt: at(time.Minute), Info: []byte(`{"workflows":["a","b"]}`)})
	list := func(since time.Time) []persistence.Node {
		t.Helper()
		got, err := st.NodeList(c, persistence.NodeListParams{AliveSince: since})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := []persistence.Node{
		{ID: "n1", StartedAt: at(time.Second), HeartbeatAt: at(time.Second)},
		{ID: "n2", StartedAt: t0, HeartbeatAt: at(time.Minute), Info: []byte(`{"workflows":["a","b"]}`)},
	}
	if diff := cmp.Diff(want, list(t0)); diff != "" {
		t.Errorf("NodeList (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], list(at(time.Second+time.Microsecond))); diff != "" {
		t.Errorf("NodeList alive since 1s+1µs (-want +got):\n%s", diff)
	}
	if n, err := st.NodeDeleteStale(c, at(time.Minute)); err != nil || n != 1 {
		t.Errorf("NodeDeleteStale = %d, %v; want 1", n, err)
	}
	if diff := cmp.Diff(want[1:], list(time.Time{})); diff != "" {
		t.Errorf("NodeList after deleting the stale (-want +got):\n%s", diff)
	}
	if _, err := st.NodeDeleteStale(c, time.Time{}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("NodeDeleteStale(zero time) = %v, want ErrInvalid", err)
	}

	for _, bad := range []struct {
		name string
		n    persistence.Node
		is   error
	}{
		{"empty id", persistence.Node{HeartbeatAt: t0}, persistence.ErrInvalid},
		{"long id", persistence.Node{ID: strings.Repeat("n", 129), HeartbeatAt: t0}, persistence.ErrInvalid},
		{"NUL in id", persistence.Node{ID: "n\x00", HeartbeatAt: t0}, persistence.ErrInvalid},
		{"no heartbeat time", persistence.Node{ID: "n3"}, persistence.ErrInvalid},
		{"info not JSON", persistence.Node{ID: "n3", HeartbeatAt: t0, Info: []byte(`{"a":`)}, persistence.ErrInvalid},
		{"info too large", persistence.Node{ID: "n3", HeartbeatAt: t0,
			Info: append(append([]byte(`"`), bytes.Repeat([]byte("x"), 64<<10)...), '"')}, persistence.ErrTooLarge},
	} {
		err := st.NodeHeartbeat(c, bad.n)
		if !errors.Is(err, bad.is) {
			t.Errorf("NodeHeartbeat with %s = %v, want %v", bad.name, err, bad.is)
		}
	}
	// The largest id and info are kept.
	big := persistence.Node{ID: strings.Repeat("é", 64), HeartbeatAt: t0, StartedAt: t0,
		Info: append(append([]byte(`"`), bytes.Repeat([]byte("x"), 64<<10-2)...), '"')}
	beat(big)
	got := list(t0)
	if len(got) != 2 || got[1].ID != big.ID || !bytes.Equal(got[1].Info, big.Info) {
		t.Errorf("the largest node id and info were not kept as given")
	}
}

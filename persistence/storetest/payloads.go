package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// testRunListNoPayloads: RunList with NoPayloads lists the same runs, in
// the same order and pages, as without, with their Input and Output nil
// and every other field as stored; without it they carry their payloads.
func (s *suite) testRunListNoPayloads(t *testing.T, st persistence.Store) {
	c := ctx(t)
	var ids []string
	for i := range 4 {
		id := newID(t)
		p := persistence.RunCreateParams{ID: id, Workflow: "alpha", Input: []byte(`{"big":"` + id + `"}`),
			IdempotencyKey: "k" + string(rune('0'+i/2)), Now: at(time.Duration(i) * time.Second), Steps: specs("a")}
		if i%2 == 1 {
			p.Workflow = "beta"
		}
		if _, err := st.RunCreate(c, p); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: ids[1], To: persistence.RunSucceeded, Output: []byte(`{"done":1}`), Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: ids[2], To: persistence.RunFailed, Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// One filter of each query shape: a seek of one index, of several
	// statuses merged, and of the idempotency key's index.
	for _, p := range []persistence.RunListParams{
		{},
		{Limit: 1},
		{Status: []persistence.RunStatus{persistence.RunSucceeded, persistence.RunFailed}},
		{IdempotencyKey: "k1"},
	} {
		with, err := st.RunList(c, p)
		if err != nil {
			t.Fatalf("RunList(%+v): %v", p, err)
		}
		light := p
		light.NoPayloads = true
		without, err := st.RunList(c, light)
		if err != nil {
			t.Fatalf("RunList(%+v): %v", light, err)
		}
		if len(with.Runs) == 0 || with.NextCursor != without.NextCursor {
			t.Fatalf("RunList(%+v): %d runs, cursor %q; with NoPayloads cursor %q", p, len(with.Runs), with.NextCursor, without.NextCursor)
		}
		for i := range with.Runs {
			if with.Runs[i].Input == nil {
				t.Errorf("RunList(%+v): run %s has no input", p, with.Runs[i].ID)
			}
			want := with.Runs[i]
			want.Input, want.Output = nil, nil
			if diff := cmp.Diff(want, without.Runs[i]); diff != "" {
				t.Errorf("RunList(%+v) with NoPayloads, run %d (-want +got):\n%s", p, i, diff)
			}
		}
		if len(with.Runs) != len(without.Runs) {
			t.Errorf("RunList(%+v): %d runs, with NoPayloads %d", p, len(with.Runs), len(without.Runs))
		}
	}
}

package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// testChangeFeed: a store that is a persistence.ChangeFeed lists the runs
// whose steps changed after a time, each once, with the newest change
// read, and says when its limit cut the list short.
func (s *suite) testChangeFeed(t *testing.T, st persistence.Store) {
	feed, ok := st.(persistence.ChangeFeed)
	if !ok {
		t.Skip("the store is not a persistence.ChangeFeed")
	}
	c := ctx(t)
	list := func(after time.Time, limit int) persistence.StepChanges {
		t.Helper()
		got, err := feed.StepListChanged(c, persistence.StepListChangedParams{After: after, Limit: limit})
		if err != nil {
			t.Fatalf("StepListChanged(after %v, limit %d): %v", after, limit, err)
		}
		return got
	}
	a := createRun(t, st, "wf", "", "a", "b:a")
	b := createRun(t, st, "wf", "", "x")
	if got := list(time.Time{}, 0); !got.Latest.Equal(t0) || len(got.RunIDs) != 0 {
		t.Errorf("StepListChanged(zero) = %+v; want Latest %v and no runs", got, t0)
	}
	got := list(t0.Add(-time.Second), 0)
	if diff := cmp.Diff(sortedCopy([]string{a.Run.ID, b.Run.ID}), sortedCopy(got.RunIDs)); diff != "" || got.More || !got.Latest.Equal(t0) {
		t.Errorf("StepListChanged(t0-1s) = %+v (-want +got runs):\n%s", got, diff)
	}
	if got := list(t0, 0); len(got.RunIDs) != 0 || !got.Latest.Equal(t0) {
		t.Errorf("StepListChanged(t0) = %+v; want nothing, Latest t0", got)
	}
	// A claim of b's step at t0+1s is a change of b alone.
	claim(t, st, b.Run.ID, "x", "f1", at(time.Second))
	if got := list(t0, 0); !cmp.Equal(got.RunIDs, []string{b.Run.ID}) || !got.Latest.Equal(at(time.Second)) {
		t.Errorf("StepListChanged(t0) after b's claim = %+v; want [%s] at %v", got, b.Run.ID, at(time.Second))
	}
	if got := list(t0.Add(-time.Second), 1); !got.More || len(got.RunIDs) != 1 {
		t.Errorf("StepListChanged(limit 1) = %+v; want one run and More", got)
	}
}

func sortedCopy(ids []string) []string {
	out := append([]string(nil), ids...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// testRunResolve checks RunResolve: a unique prefix names its run, a
// shared one every run that has it (in id order, within the limit), a
// prefix typed without dashes or in capitals the same runs, one of no
// run none, and a prefix under MinRunIDPrefix characters is refused
// with a message that says so. Runs whose ids sort just before and
// after the prefix's range are never returned.
func (s *suite) testRunResolve(t *testing.T, st persistence.Store) {
	c := ctx(t)
	ids := []string{
		"0190a1b2-c3d4-7000-8000-000000000001",
		"0190a1b2-c3d4-7000-8000-000000000002",
		"0190a1b2-c3d5-7000-8000-000000000003",
		"0190a1b2-c3d5-7fff-8000-000000000004",
		"0190a1b3-0000-7000-8000-000000000005", // just after 0190a1b2...
		"0190a1b1-ffff-7000-8000-000000000006", // just before it
		"order-2026-0001",                      // not a UUID
	}
	for _, id := range ids {
		if _, err := st.RunCreate(c, persistence.RunCreateParams{ID: id, Workflow: "wf", Version: 1, Now: t0, Steps: specs("a")}); err != nil {
			t.Fatalf("RunCreate %s: %v", id, err)
		}
	}
	for _, tc := range []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"0190a1b2-c3d4-7000-8000-000000000002", 0, ids[1:2]}, // a whole id
		{"0190a1b2-c3d5-7f", 0, ids[3:4]},                     // unique
		{"0190a1b2c3d57f", 0, ids[3:4]},                       // without dashes
		{"0190A1B2-C3D5-7F", 0, ids[3:4]},                     // in capitals
		{"0190a1b2-c3d4", 0, ids[0:2]},                        // shared
		{"0190a1b2", 0, ids[0:4]},                             // shared by four
		{"0190a1b2", 3, ids[0:3]},                             // within the limit
		{"0190a1b2c3d", 0, ids[0:4]},                          // dashless, shorter than a group
		{"0190a1b4", 0, nil},                                  // no run
		{"order-2026", 0, ids[6:7]},                           // a run id that is no UUID
		{"ORDER-2026", 0, nil},                                // ... kept as typed
	} {
		got, err := st.RunResolve(c, tc.prefix, tc.limit)
		if err != nil {
			t.Errorf("RunResolve(%q, %d): %v", tc.prefix, tc.limit, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("RunResolve(%q, %d) (-want +got):\n%s", tc.prefix, tc.limit, diff)
		}
	}
	for _, bad := range []string{"", "0190a1b", "0190-a1", "-0190a1b2", "0190a1b2 c3", "0190a1b2'--", strings.Repeat("a", 65)} {
		got, err := st.RunResolve(c, bad, 0)
		var ve *persistence.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, persistence.ErrInvalid) || len(got) != 0 {
			t.Errorf("RunResolve(%q) = %v, %v; want a *ValidationError", bad, got, err)
		}
	}
	if _, err := st.RunResolve(c, "0190a1b", 0); err == nil || !strings.Contains(err.Error(), "at least 8 characters") {
		t.Errorf("a 7-character prefix: %v; want an error saying a prefix needs at least 8 characters", err)
	}
	// The limit is bounded: many runs of one prefix give at most 100.
	for i := range 105 {
		id := fmt.Sprintf("0190a1c0-0000-7000-8000-%012d", i)
		if _, err := st.RunCreate(c, persistence.RunCreateParams{ID: id, Workflow: "wf", Version: 1, Now: t0, Steps: specs("a")}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := st.RunResolve(c, "0190a1c0", 1000); err != nil || len(got) != 100 {
		t.Errorf("RunResolve with limit 1000: %d ids, %v; want 100", len(got), err)
	}
	if got, err := st.RunResolve(c, "0190a1c0", 0); err != nil || len(got) != 10 {
		t.Errorf("RunResolve with limit 0: %d ids, %v; want 10", len(got), err)
	}
}

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// TestResolveRunID names runs by a prefix of their id: a unique prefix
// (with or without dashes) gives the run's id, a shared one an
// *AmbiguousIDError listing the matches (at most ten, saying when there
// are more), a prefix of no run ErrRunNotFound, one under eight
// characters an error that says so; a whole id, and an id that is no
// UUID prefix, pass through unread.
func TestResolveRunID(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		env := enginetest.New(t, b.opts(t))
		e := env.Engine
		run := func(id string) {
			t.Helper()
			if _, err := env.Store.RunCreate(ctx, persistence.RunCreateParams{ID: id, Workflow: "wf", Version: 1, Now: env.Clock.Now(),
				Steps: []persistence.StepSpec{{Name: "a"}}}); err != nil {
				t.Fatal(err)
			}
		}
		one := "0190a1b2-c3d4-7000-8000-00000000000a"
		run(one)
		for i := range 12 {
			run(fmt.Sprintf("0190a1b9-0000-7000-8000-%012d", i))
		}
		for _, in := range []string{"0190a1b2", "0190A1B2C3D4", "0190a1b2-c3d4-7000", one} {
			if got, err := e.ResolveRunID(ctx, in); err != nil || got != one {
				t.Errorf("ResolveRunID(%q) = %q, %v; want %s", in, got, err, one)
			}
		}
		// A whole id is not looked up, even of no run: the read that
		// follows says not found.
		missing := "0190ffff-0000-7000-8000-000000000000"
		if got, err := e.ResolveRunID(ctx, missing); err != nil || got != missing {
			t.Errorf("ResolveRunID(a whole id of no run) = %q, %v; want it back", got, err)
		}
		if got, err := e.ResolveRunID(ctx, "order-1"); err != nil || got != "order-1" {
			t.Errorf("ResolveRunID(order-1) = %q, %v; want it back (no UUID prefix)", got, err)
		}
		if _, err := e.ResolveRunID(ctx, "0190ffff"); !errors.Is(err, persistence.ErrRunNotFound) || !strings.Contains(err.Error(), "0190ffff") {
			t.Errorf("a prefix of no run: %v; want ErrRunNotFound naming the prefix", err)
		}
		if _, err := e.ResolveRunID(ctx, "0190a1b"); err == nil || !strings.Contains(err.Error(), "a run id prefix needs at least 8 characters") {
			t.Errorf("a 7-character prefix: %v", err)
		}
		_, err := e.ResolveRunID(ctx, "0190a1b9")
		var amb *engine.AmbiguousIDError
		if !errors.As(err, &amb) {
			t.Fatalf("a prefix of 12 runs: %v; want *AmbiguousIDError", err)
		}
		var want []string
		for i := range engine.MaxAmbiguousMatches {
			want = append(want, fmt.Sprintf("0190a1b9-0000-7000-8000-%012d", i))
		}
		if diff := cmp.Diff(want, amb.Matches); diff != "" || !amb.More || amb.Prefix != "0190a1b9" {
			t.Errorf("matches (-want +got):\n%s more %v prefix %q", diff, amb.More, amb.Prefix)
		}
		if msg := err.Error(); !strings.Contains(msg, "0190a1b9") || !strings.Contains(msg, want[0]) || !strings.Contains(msg, "more") {
			t.Errorf("message %q: want the prefix, the matches and that there are more", msg)
		}
		// An id and longer ones that start with it: the id itself.
		run("0190a1b9-0000-7000-8000-00000000000")
		if got, err := e.ResolveRunID(ctx, "0190a1b9-0000-7000-8000-00000000000"); err != nil || got != "0190a1b9-0000-7000-8000-00000000000" {
			t.Errorf("an exact id that prefixes others: %q, %v", got, err)
		}
	})
}

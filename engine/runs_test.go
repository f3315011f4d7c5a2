package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// TestRunsPagesThroughFilters triggers runs of two workflows (some
// finished, some failed, some waiting for a delayed start, some
// cancelled; two per creation time) and pages through Engine.Runs with
// small limits under workflow, status and time filters: every run the
// filter selects comes exactly once, newest first, and no other.
func TestRunsPagesThroughFilters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ok := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
		refuse := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			if strings.Contains(string(sc.Input), `"fail":true`) {
				return nil, steps.Permanent(errors.New("refused"))
			}
			return json.RawMessage(`{}`), nil
		})
		alpha, err := dag.New("alpha").Step("one", ok).Build()
		if err != nil {
			t.Fatal(err)
		}
		beta, err := dag.New("beta").Step("one", refuse).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{alpha, beta}
		env := enginetest.New(t, o)
		start := env.Clock.Now()
		var ids []string
		for i := range 24 {
			if i > 0 && i%2 == 0 {
				env.Clock.Advance(time.Second) // two runs per creation time
			}
			wf := []string{"alpha", "beta"}[i%2]
			var opts []engine.TriggerOption
			if i%6 == 4 {
				opts = append(opts, engine.Delay(time.Hour)) // stays pending
			}
			id := env.Trigger(t, wf, map[string]any{"fail": i%4 == 3}, opts...)
			if i%12 == 4 {
				if err := env.Engine.Cancel(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			ids = append(ids, id)
		}
		// The truth, from Get: every started run finishes.
		runs := map[string]persistence.Run{}
		for i, id := range ids {
			if i%6 == 4 {
				runs[id] = mustGet(t, env.Engine, id).Run
			} else {
				runs[id] = env.Wait(t, id).Run
			}
		}
		seen := map[persistence.RunStatus]int{}
		for _, r := range runs {
			seen[r.Status]++
		}
		if diff := cmp.Diff(map[persistence.RunStatus]int{persistence.RunSucceeded: 14, persistence.RunFailed: 6,
			persistence.RunPending: 2, persistence.RunCancelled: 2}, seen); diff != "" {
			t.Fatalf("run statuses (-want +got):\n%s", diff)
		}

		filters := []engine.RunFilter{
			{},
			{Workflow: "alpha"},
			{Status: []persistence.RunStatus{persistence.RunFailed}},
			{Status: []persistence.RunStatus{persistence.RunSucceeded, persistence.RunPending}},
			{Workflow: "beta", Status: []persistence.RunStatus{persistence.RunFailed, persistence.RunSucceeded}},
			{CreatedAfter: start.Add(3 * time.Second), CreatedBefore: start.Add(9 * time.Second)},
			{Workflow: "alpha", Status: []persistence.RunStatus{persistence.RunSucceeded}, CreatedAfter: start.Add(5 * time.Second)},
			{Workflow: "gamma"},
		}
		for _, f := range filters {
			var want []persistence.Run
			for _, r := range runs {
				if (f.Workflow == "" || r.Workflow == f.Workflow) &&
					(len(f.Status) == 0 || slices.Contains(f.Status, r.Status)) &&
					(f.CreatedAfter.IsZero() || !r.CreatedAt.Before(f.CreatedAfter)) &&
					(f.CreatedBefore.IsZero() || r.CreatedAt.Before(f.CreatedBefore)) {
					want = append(want, r)
				}
			}
			// Newest first: creation time, then id, both descending.
			slices.SortFunc(want, func(a, b persistence.Run) int {
				if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
					return c
				}
				return strings.Compare(b.ID, a.ID)
			})
			wantIDs := []string{}
			for _, r := range want {
				wantIDs = append(wantIDs, r.ID)
			}
			for _, limit := range []int{1, 2, 5} {
				f.Limit = limit
				got := []string{}
				pages := 0
				for {
					page, err := env.Engine.Runs(ctx, f)
					if err != nil {
						t.Fatalf("Runs(%+v): %v", f, err)
					}
					if pages++; len(page.Runs) > limit || pages > len(runs)+1 {
						t.Fatalf("Runs(%+v): page %d has %d runs", f, pages, len(page.Runs))
					}
					for _, r := range page.Runs {
						got = append(got, r.ID)
					}
					if page.NextCursor == "" {
						break
					}
					f.Cursor = page.NextCursor
				}
				f.Cursor = ""
				if diff := cmp.Diff(wantIDs, got); diff != "" {
					t.Errorf("Runs(%+v) paged (-want +got):\n%s", f, diff)
				}
			}
		}
	})
}

// TestRunsRefusesBadFilters: a filter the store cannot take gives an error
// from the engine that names the bad value and is errors.Is-compatible
// with persistence.ErrInvalid.
func TestRunsRefusesBadFilters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := enginetest.New(t, b.opts(t))
		for _, tc := range []struct {
			name string
			f    engine.RunFilter
			bad  string // the value the message must name
		}{
			{"unknown status", engine.RunFilter{Status: []persistence.RunStatus{persistence.RunFailed, "finished"}}, `"finished"`},
			{"malformed cursor", engine.RunFilter{Cursor: "not-a-cursor!"}, `"not-a-cursor!"`},
			{"cursor of another list", engine.RunFilter{Cursor: "MTIzfHh8eQ"}, `"MTIzfHh8eQ"`},
			{"bad workflow name", engine.RunFilter{Workflow: "no spaces"}, `"no spaces"`},
		} {
			_, err := env.Engine.Runs(context.Background(), tc.f)
			var ve *persistence.ValidationError
			switch {
			case err == nil:
				t.Errorf("%s: Runs succeeded", tc.name)
			case !errors.Is(err, persistence.ErrInvalid) || !errors.As(err, &ve):
				t.Errorf("%s: %v, want a *persistence.ValidationError", tc.name, err)
			case !strings.HasPrefix(err.Error(), "engine: ") || !strings.Contains(err.Error(), tc.bad):
				t.Errorf("%s: %q, want an engine error naming %s", tc.name, err, tc.bad)
			}
		}
	})
}

// TestGetListsAttemptsInPlanOrder: RunInfo.Attempts reads as the plan
// does: step by step in the workflow's order, each step's attempts by
// number, then its compensation's, though the steps ran in parallel, one
// was retried while the others finished, and the compensations ran in
// reverse order.
func TestGetListsAttemptsInPlanOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := &recorder{}
		fail := func(sc steps.Context) error {
			switch {
			case sc.Compensation:
				return nil
			case sc.Step == "notify" && sc.Attempt <= 2:
				return fmt.Errorf("mail service down (attempt %d)", sc.Attempt)
			case sc.Step == "ship":
				return steps.Permanent(errors.New("carrier refused the parcel"))
			}
			return nil
		}
		// reserve -> (notify, points) -> ship; notify fails twice, ship
		// dies, and reserve, notify and points are undone.
		wf := orderWorkflow(t, r, "order", 0, fail, true, nil)
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{wf}
		env := enginetest.New(t, o)
		info := env.Wait(t, env.Trigger(t, "order", nil))
		env.AssertRun(t, info, persistence.RunCompensated)
		var got []string
		for _, a := range info.Attempts {
			got = append(got, fmt.Sprintf("%s %s %d %s", a.Step, a.Kind, a.Attempt, a.Outcome))
		}
		want := []string{
			"reserve step 1 succeeded",
			"reserve compensation 1 succeeded",
			"notify step 1 failed",
			"notify step 2 failed",
			"notify step 3 succeeded",
			"notify compensation 1 succeeded",
			"points step 1 succeeded",
			"points compensation 1 succeeded",
			"ship step 1 failed",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("RunInfo.Attempts (-want +got):\n%s", diff)
		}
	})
}

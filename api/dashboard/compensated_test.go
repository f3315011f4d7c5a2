package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// TestCompensatedRunOffersOnlyRerun: a compensated run's completed steps
// were undone, so its run page offers no "Retry failed steps", no retry
// or skip of its dead step, and the dead-letters page no Retry for it:
// both say why and offer the rerun from a step, the one way to resume
// it. A stale form that posts anyway gets the refusal; the rerun works.
func TestCompensatedRunOffersOnlyRerun(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		var broken atomic.Bool
		broken.Store(true)
		h := steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			if sc.Step == "b" && !sc.Compensation && broken.Load() {
				return nil, steps.Permanent(errors.New("b is broken"))
			}
			return nil, nil
		})
		wf, err := dag.New("saga").Step("a", h, dag.Compensate(h)).Step("b", h, dag.Needs("a")).Build()
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, envOptions{real: real, wfs: []*dag.Workflow{wf}})
		b := e.browser(t)
		id := e.Trigger(t, "saga", map[string]any{})
		if ri := e.waitRun(t, id); ri.Run.Status != persistence.RunCompensated {
			t.Fatalf("the run is %s, want compensated", ri.Run.Status)
		}
		broken.Store(false)

		page := b.get("/runs/" + id + "?step=b")
		for _, bad := range []string{`id="retry-run"`, "Retry failed steps", `id="retry-step"`, `id="skip-step"`} {
			if strings.Contains(page.body, bad) {
				t.Errorf("the compensated run's page offers %q", bad)
			}
		}
		for _, want := range []string{`id="rerun-step"`, `id="retry-refused"`, "were undone", "rerun it from a step"} {
			if !strings.Contains(page.body, want) {
				t.Errorf("the compensated run's page has no %q", want)
			}
		}
		dl := b.get("/dead-letters")
		if strings.Contains(dl.body, "only="+id+"/b\" class=\"act small\" data-action=\"retry\"") ||
			strings.Contains(dl.body, "action=retry&amp;only="+url.QueryEscape(id)+"/b") {
			t.Errorf("the dead-letters page offers a retry of the compensated run's step:\n%s", dl.body)
		}
		if !strings.Contains(dl.body, `href="/runs/`+id+`?step=b#step" class="small" data-action="rerun"`) || !strings.Contains(dl.body, "were undone") {
			t.Errorf("the dead-letters page does not point the compensated run's step to its rerun:\n%s", dl.body)
		}
		tok := csrf(t, page)

		// Stale forms: each refusal is shown, saying to rerun from a step.
		for path, form := range map[string]url.Values{
			"/runs/" + id + "/retry":         {"csrf": {tok}},
			"/runs/" + id + "/steps/b/retry": {"csrf": {tok}},
			"/runs/" + id + "/steps/b/skip":  {"csrf": {tok}, "output": {`{}`}},
		} {
			a := b.do("POST", path, form, nil)
			if a.status != http.StatusConflict || !strings.Contains(a.body, `id="action-error"`) || !strings.Contains(a.body, "rerun it from a step") {
				t.Errorf("POST %s: %d, want 409 with the refusal on the run page:\n%s", path, a.status, a.body)
			}
		}
		a := b.do("POST", "/dead-letters/bulk?action=retry&only="+url.QueryEscape(id)+"/b", url.Values{"csrf": {tok}}, nil)
		if msg := b.flash(a); !strings.Contains(msg, "Retried: 0 of 1") || !strings.Contains(msg, "rerun it from a step") {
			t.Errorf("a stale dead-letter retry: flash %q, want the refusal", msg)
		}
		if ri, _ := e.Engine.Get(context.Background(), id); ri.Run.Status != persistence.RunCompensated || len(ri.Actions) != 0 {
			t.Fatalf("the refusals changed the run: %s, actions %+v", ri.Run.Status, ri.Actions)
		}

		if msg := b.flash(b.do("POST", "/runs/"+id+"/steps/b/rerun", url.Values{"csrf": {tok}}, nil)); !strings.Contains(msg, "Rerunning a, b") {
			t.Errorf("rerun: flash %q", msg)
		}
		if ri := e.waitRun(t, id); ri.Run.Status != persistence.RunSucceeded {
			t.Fatalf("after the rerun the run is %s, want succeeded", ri.Run.Status)
		}
	})
}

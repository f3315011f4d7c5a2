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
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// fixableWorkflow is a -> b -> c (needs); b fails for good while broken
// is set, and c echoes b's output.
func fixableWorkflow(t testing.TB, broken *atomic.Bool) *dag.Workflow {
	t.Helper()
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		if sc.Step == "b" && broken.Load() {
			return nil, steps.Permanent(errors.New("b is broken"))
		}
		if sc.Step == "c" {
			return json.RawMessage(`{"from_b":` + string(sc.Outputs["b"]) + `}`), nil
		}
		return json.RawMessage(`{"step":"` + sc.Step + `"}`), nil
	})
	w, err := dag.New("fixable").
		Step("a", h).
		Step("b", h, dag.Needs("a")).
		Step("c", h, dag.Needs("b")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestRunControls: on a failed run the run page offers retry-failed,
// rerun-from-step and skip-with-output; bad JSON for skip is refused on
// the page with nothing changed; the engine's refusals are shown on the
// run page; each action lands in the run's history with the session's
// key name.
func TestRunControls(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		var broken atomic.Bool
		broken.Store(true)
		e := newEnv(t, envOptions{real: real, wfs: []*dag.Workflow{fixableWorkflow(t, &broken)}})
		b := e.browser(t)

		id := e.Trigger(t, "fixable", map[string]any{})
		if ri := e.waitRun(t, id); ri.Run.Status != persistence.RunFailed {
			t.Fatalf("the run is %s, want failed", ri.Run.Status)
		}
		page := b.get("/runs/" + id + "?step=b")
		for _, want := range []string{`id="retry-run"`, "Retry failed steps", `id="rerun-step"`, `id="skip-step"`, `id="skip-output"`, "No operator action yet."} {
			if !strings.Contains(page.body, want) {
				t.Errorf("the failed run's page has no %q", want)
			}
		}
		tok := csrf(t, page)

		// Bad JSON: 422 on the run page, the output kept, nothing changed.
		a := b.do("POST", "/runs/"+id+"/steps/b/skip", url.Values{"csrf": {tok}, "output": {`{"x":`}}, nil)
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `id="action-error"`) ||
			!strings.Contains(a.body, "is not valid JSON") || !strings.Contains(a.body, `{&#34;x&#34;:</textarea>`) {
			t.Fatalf("skip with bad JSON: %d, want 422 with the error and the output kept:\n%s", a.status, a.body)
		}
		if ri, _ := e.Engine.Get(context.Background(), id); ri.Run.Status != persistence.RunFailed || len(ri.Actions) != 0 {
			t.Fatalf("skip with bad JSON changed the run: %s, %d actions", ri.Run.Status, len(ri.Actions))
		}
		// The engine's refusal: a succeeded step cannot be skipped.
		a = b.do("POST", "/runs/"+id+"/steps/a/skip", url.Values{"csrf": {tok}, "output": {`{}`}}, nil)
		if a.status != http.StatusConflict || !strings.Contains(a.body, "not dead: only a dead step can be skipped") {
			t.Fatalf("skip of a succeeded step: %d, want 409 with the engine's reason on the run page:\n%s", a.status, a.body)
		}

		// Skip with output: the run goes on and c reads it.
		if msg := b.flash(b.do("POST", "/runs/"+id+"/steps/b/skip", url.Values{"csrf": {tok}, "output": {`{"manual":true}`}}, nil)); !strings.Contains(msg, "Skipped b") {
			t.Errorf("skip: flash %q", msg)
		}
		ri := e.waitRun(t, id)
		if ri.Run.Status != persistence.RunSucceeded {
			t.Fatalf("after skip the run is %s, want succeeded", ri.Run.Status)
		}
		if c, _ := ri.Step("c"); !strings.Contains(string(c.Output), `"manual":true`) {
			t.Errorf("c's output %s does not carry the skip's output", c.Output)
		}

		// Rerun from b on the succeeded run, with b fixed.
		broken.Store(false)
		if msg := b.flash(b.do("POST", "/runs/"+id+"/steps/b/rerun", url.Values{"csrf": {tok}}, nil)); !strings.Contains(msg, "Rerunning b, c") {
			t.Errorf("rerun: flash %q", msg)
		}
		ri = e.waitRun(t, id)
		if c, _ := ri.Step("c"); ri.Run.Status != persistence.RunSucceeded || !strings.Contains(string(c.Output), `"step":"b"`) {
			t.Fatalf("after the rerun: %s, c's output %s", ri.Run.Status, c.Output)
		}
		// Retry-failed on a succeeded run is refused on the page.
		a = b.do("POST", "/runs/"+id+"/retry", url.Values{"csrf": {tok}}, nil)
		if a.status != http.StatusConflict || !strings.Contains(a.body, "retry refused: run succeeded: nothing failed") || !strings.Contains(a.body, `id="action-error"`) {
			t.Fatalf("retry of a succeeded run: %d, want 409 with the engine's reason:\n%s", a.status, a.body)
		}

		// Retry failed steps on a second run.
		broken.Store(true)
		id2 := e.Trigger(t, "fixable", map[string]any{})
		e.waitRun(t, id2)
		broken.Store(false)
		if msg := b.flash(b.do("POST", "/runs/"+id2+"/retry", url.Values{"csrf": {tok}}, nil)); !strings.Contains(msg, "Retrying b") {
			t.Errorf("retry: flash %q", msg)
		}
		if ri := e.waitRun(t, id2); ri.Run.Status != persistence.RunSucceeded {
			t.Fatalf("after retry-failed the run is %s", ri.Run.Status)
		}

		page = b.get("/runs/" + id)
		hist := page.body[strings.Index(page.body, `id="history"`):]
		hist = hist[:strings.Index(hist, "</section>")]
		for _, want := range []string{"<td>anonymous</td><td>skip</td><td><code>b</code></td>", "<td>anonymous</td><td>rerun from step</td><td><code>b</code></td><td>b, c</td>"} {
			if !strings.Contains(hist, want) {
				t.Errorf("the history has no %q:\n%s", want, hist)
			}
		}
		if h := b.get("/runs/" + id2).body; !strings.Contains(h, "<td>retry failed</td>") {
			t.Error("the retried run's history has no retry")
		}
	})
}

// TestPauseControls: a queue paused from the queues page shows as paused
// with its depth and holds its tasks; a run paused from its page shows
// as paused in its header; both resume.
func TestPauseControls(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		e := newEnv(t, envOptions{real: real})
		b := e.browser(t)
		page := b.get("/queues")
		tok := csrf(t, page)
		if !strings.Contains(page.body, `data-queue="default"`) || !strings.Contains(page.body, `data-queue-state="active"`) {
			t.Fatalf("the queues page offers no pause for the default queue:\n%s", page.body)
		}
		if msg := b.flash(b.do("POST", "/queues/default/pause", url.Values{"csrf": {tok}}, nil)); !strings.Contains(msg, "Queue default paused") {
			t.Errorf("pause: flash %q", msg)
		}
		id := e.Trigger(t, "shop", map[string]any{})
		deadline := time.Now().Add(10 * time.Second)
		for {
			page = b.get("/queues")
			if strings.Contains(page.body, `data-queue-state="paused"`) && strings.Contains(page.body, ">Resume</button>") &&
				strings.Contains(page.body, `<td>default</td><td class="num">1</td>`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the paused queue does not show as paused with its one ready task:\n%s", page.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second)
		if ri, _ := e.Engine.Get(context.Background(), id); ri.Run.Status.Terminal() {
			t.Fatalf("a run of a paused queue finished: %s", ri.Run.Status)
		}
		// Pause the run, then resume the queue: the run still waits.
		run := b.get("/runs/" + id)
		if !strings.Contains(run.body, `id="pause-run"`) {
			t.Fatalf("an unfinished run's page has no pause:\n%s", run.body)
		}
		b.flash(b.do("POST", "/runs/"+id+"/pause", url.Values{"csrf": {tok}}, nil))
		run = b.get("/runs/" + id)
		if !strings.Contains(run.body, `id="run-paused"`) || !strings.Contains(run.body, `id="resume-run"`) {
			t.Fatalf("a paused run's header does not say it is paused:\n%s", run.body)
		}
		b.flash(b.do("POST", "/queues/default/resume", url.Values{"csrf": {tok}}, nil))
		if page := b.get("/queues"); strings.Contains(page.body, `data-queue-state="paused"`) {
			t.Error("the resumed queue still shows as paused")
		}
		b.flash(b.do("POST", "/runs/"+id+"/resume", url.Values{"csrf": {tok}}, nil))
		if ri := e.waitRun(t, id); ri.Run.Status != persistence.RunSucceeded {
			t.Fatalf("after both resumes the run is %s", ri.Run.Status)
		}
		if a := b.do("POST", "/queues/default/explode", url.Values{"csrf": {tok}}, nil); a.status != http.StatusNotFound {
			t.Errorf("an unknown queue action: %d, want 404", a.status)
		}
		if a := b.do("POST", "/queues/bad%20name/pause", url.Values{"csrf": {tok}}, nil); a.status != http.StatusBadRequest {
			t.Errorf("pausing a queue with an invalid name: %d, want 400", a.status)
		}
		if a := b.do("POST", "/runs/"+id+"/pause", url.Values{"csrf": {tok}}, nil); a.status != http.StatusConflict || !strings.Contains(a.body, `id="action-error"`) {
			t.Errorf("pausing a finished run: %d, want 409 on the run page", a.status)
		}
	})
}

// TestScheduleForm: an admin creates a schedule through the form, sees
// the API's validation errors next to the form with what was typed, and
// edits it, which makes it the operator's.
func TestScheduleForm(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		e := newEnv(t, envOptions{real: real})
		ctx := context.Background()
		b := e.browser(t)
		form := b.get("/schedules/new")
		if form.status != http.StatusOK || !strings.Contains(form.body, `id="sf-spec"`) || !strings.Contains(form.body, `<option value="shop">`) {
			t.Fatalf("GET /schedules/new: %d\n%s", form.status, form.body)
		}
		tok := csrf(t, form)
		fields := func(kv ...string) url.Values {
			v := url.Values{"csrf": {tok}, "name": {"hourly"}, "workflow": {"shop"}, "spec": {"0 * * * *"}, "zone": {"Europe/Paris"},
				"input": {`{"secret":"s"}`}, "overlap": {"skip"}, "catch_up": {"none"}, "window": {""}}
			for i := 0; i < len(kv); i += 2 {
				v.Set(kv[i], kv[i+1])
			}
			return v
		}
		for _, c := range []struct {
			kv   []string
			want string
		}{
			{[]string{"spec", "not a spec"}, "not a spec"},
			{[]string{"zone", "Mars/Olympus"}, "Mars/Olympus"},
			{[]string{"input", `{"a":`}, "The input is not valid JSON"},
			{[]string{"workflow", "nope"}, "nope"},
			{[]string{"window", "soon"}, "is not a duration"},
			{[]string{"overlap", "sometimes"}, "sometimes"},
		} {
			a := b.do("POST", "/schedules", fields(c.kv...), nil)
			if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `id="sf-error"`) || !strings.Contains(a.body, c.want) ||
				!strings.Contains(a.body, `value="hourly"`) {
				t.Errorf("create with %v: %d, want 422 with the error (%q) next to the form as typed:\n%s", c.kv, a.status, c.want, a.body)
			}
		}
		if _, err := e.Store.ScheduleGet(ctx, "hourly"); !errors.Is(err, persistence.ErrScheduleNotFound) {
			t.Fatalf("a refused form stored a schedule: %v", err)
		}
		if msg := b.flash(b.do("POST", "/schedules", fields("window", "6h"), nil)); !strings.Contains(msg, "Schedule hourly created.") {
			t.Errorf("create: flash %q", msg)
		}
		sc, err := e.Store.ScheduleGet(ctx, "hourly")
		if err != nil || sc.Spec != "0 * * * *" || sc.TimeZone != "Europe/Paris" || sc.Overlap != "skip" || sc.CatchUp != "none" ||
			sc.CatchUpWindow != 6*time.Hour || string(sc.Input) != `{"secret":"s"}` || sc.Owner != persistence.OwnerOperator {
			t.Fatalf("stored: %+v, %v", sc, err)
		}
		if a := b.do("POST", "/schedules", fields(), nil); a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "already exists") {
			t.Errorf("a second create of the name: %d, want 422 saying it exists", a.status)
		}
		list := b.get("/schedules")
		if !strings.Contains(list.body, `id="s-hourly"`) || !strings.Contains(list.body, `data-owner="operator"`) || !strings.Contains(list.body, "/schedules/hourly/edit") {
			t.Fatalf("the list does not show the new operator-owned schedule with an edit link:\n%s", list.body)
		}

		edit := b.get("/schedules/hourly/edit")
		if !strings.Contains(edit.body, `value="0 * * * *"`) || !strings.Contains(edit.body, `value="6h0m0s"`) || !strings.Contains(edit.body, `<option value="skip" selected>`) {
			t.Fatalf("the edit form does not hold the stored fields:\n%s", edit.body)
		}
		a := b.do("POST", "/schedules/hourly/edit", fields("spec", "61 * * * *"), nil)
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "61 * * * *") || !strings.Contains(a.body, `id="sf-error"`) {
			t.Errorf("an edit with a bad spec: %d, want 422 next to the form", a.status)
		}
		if msg := b.flash(b.do("POST", "/schedules/hourly/edit", fields("spec", "*/5 * * * *", "zone", "", "input", ""), nil)); !strings.Contains(msg, "Schedule hourly saved.") {
			t.Errorf("edit: flash %q", msg)
		}
		if sc, err := e.Store.ScheduleGet(ctx, "hourly"); err != nil || sc.Spec != "*/5 * * * *" || sc.TimeZone != "" || sc.Input != nil {
			t.Errorf("after the edit: %+v, %v", sc, err)
		}
		if a := b.get("/schedules/nope/edit"); a.status != http.StatusNotFound {
			t.Errorf("editing an unknown schedule: %d, want 404", a.status)
		}

		// A code-owned schedule is shown as such, and its form says saving
		// makes it the operator's.
		now := time.Now()
		if _, err := e.Store.ScheduleUpsert(ctx, persistence.Schedule{Name: "coded", Spec: "0 3 * * *", Workflow: "shop",
			Overlap: persistence.OverlapAllow, CatchUp: persistence.CatchUpNone, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.get("/schedules").body, `data-owner="code"`) {
			t.Error("a schedule declared in code is not shown as code-owned")
		}
		if !strings.Contains(b.get("/schedules/coded/edit").body, "saving makes it an operator") {
			t.Error("the edit form of a code-owned schedule does not say what saving does")
		}
	})
}

// TestNewControlsNeedScopeAndToken: a read session sees none of the new
// controls and gets 403 on each new POST (and an operate session on the
// schedule form's, which need admin); a POST without the CSRF token is
// 403.
func TestNewControlsNeedScopeAndToken(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	e := newEnv(t, envOptions{keys: true, wfs: []*dag.Workflow{fixableWorkflow(t, &broken)}})
	ctx := context.Background()
	keys := map[string]string{}
	for _, scope := range []string{"read", "operate", "admin"} {
		k, _, err := api.CreateKey(ctx, e.Store, scope+"-key", scope, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[scope] = k
	}
	failed := e.Trigger(t, "fixable", map[string]any{})
	e.waitRun(t, failed)
	now := time.Now()
	if _, err := e.Store.ScheduleUpsert(ctx, persistence.Schedule{Name: "nightly", Spec: "0 3 * * *", Workflow: "fixable",
		Overlap: persistence.OverlapAllow, CatchUp: persistence.CatchUpNone, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	operatePosts := []string{"/queues/default/pause", "/queues/default/resume", "/runs/" + failed + "/pause", "/runs/" + failed + "/resume",
		"/runs/" + failed + "/steps/b/rerun", "/runs/" + failed + "/steps/b/skip"}
	adminPosts := []string{"/schedules", "/schedules/nightly/edit"}

	reader := e.browser(t)
	reader.login(keys["read"])
	for _, p := range []string{"/queues", "/runs/" + failed + "?step=b", "/schedules"} {
		a := reader.get(p)
		for _, bad := range []string{`data-queue="`, `id="pause-run"`, `id="rerun-step"`, `id="skip-step"`, `id="new-schedule"`, "/edit\""} {
			if strings.Contains(a.body, bad) {
				t.Errorf("GET %s as read shows %q", p, bad)
			}
		}
	}
	tok := csrf(t, reader.get("/queues"))
	for _, p := range append(append([]string{}, operatePosts...), adminPosts...) {
		if a := reader.do("POST", p, url.Values{"csrf": {tok}, "output": {"{}"}, "name": {"x"}}, nil); a.status != http.StatusForbidden {
			t.Errorf("POST %s as read: %d, want 403", p, a.status)
		}
	}
	for _, p := range []string{"/schedules/new", "/schedules/nightly/edit"} {
		if a := reader.get(p); a.status != http.StatusForbidden {
			t.Errorf("GET %s as read: %d, want 403", p, a.status)
		}
	}

	op := e.browser(t)
	op.login(keys["operate"])
	otok := csrf(t, op.get("/queues"))
	for _, p := range adminPosts {
		if a := op.do("POST", p, url.Values{"csrf": {otok}, "name": {"x"}}, nil); a.status != http.StatusForbidden {
			t.Errorf("POST %s as operate: %d, want 403", p, a.status)
		}
	}
	for _, p := range operatePosts {
		if a := op.do("POST", p, url.Values{"output": {"{}"}}, nil); a.status != http.StatusForbidden {
			t.Errorf("POST %s without a CSRF token: %d, want 403", p, a.status)
		}
	}
	admin := e.browser(t)
	admin.login(keys["admin"])
	for _, p := range adminPosts {
		if a := admin.do("POST", p, url.Values{"name": {"x"}}, nil); a.status != http.StatusForbidden {
			t.Errorf("POST %s without a CSRF token: %d, want 403", p, a.status)
		}
	}
	// The operate key's name is the actor in the run's history.
	broken.Store(false)
	op.flash(op.do("POST", "/runs/"+failed+"/retry", url.Values{"csrf": {otok}}, nil))
	e.waitRun(t, failed)
	if h := op.get("/runs/" + failed).body; !strings.Contains(h, "<td>operate-key</td><td>retry failed</td>") {
		t.Error("the history does not name the operate key as who retried")
	}
}

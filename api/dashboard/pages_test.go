package dashboard_test

import (
	"context"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// TestBulkActionsShowTheCountFirst: bulk retry by filter and bulk
// cancel and discard by selection show how many they would act on, act
// only on confirmation, and report what they did.
func TestBulkActionsShowTheCountFirst(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	var failed []string
	for range 3 {
		id := e.Trigger(t, "shop", map[string]string{"fail": "a"})
		e.waitRun(t, id)
		failed = append(failed, id)
	}
	ok := e.Trigger(t, "shop", map[string]string{})
	e.waitRun(t, ok)
	b := e.browser(t)
	tok := csrf(t, b.get("/runs"))

	form := url.Values{"csrf": {tok}, "action": {"retry"}, "status": {"failed"}}
	a := b.do("POST", "/runs/bulk?scope=filter", form, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, "Retry 3 runs?") {
		t.Fatalf("bulk retry by filter: %d, want a page asking to retry 3 runs:\n%s", a.status, a.body)
	}
	for _, id := range failed {
		if ri, _ := e.Engine.Get(ctx, id); ri.Run.Status != persistence.RunFailed {
			t.Fatalf("run %s is %s before the confirmation", id, ri.Run.Status)
		}
	}
	confirm, err := url.ParseQuery(hiddenFields(a.body))
	if err != nil {
		t.Fatal(err)
	}
	a = b.do("POST", "/runs/bulk?scope=filter", confirm, nil)
	if msg := b.flash(a); msg != "Retried: 3 of 3 runs." {
		t.Fatalf("confirmed: the page says %q", msg)
	}
	for _, id := range failed {
		e.waitRun(t, id) // fails again: the input still says so
	}

	// Dead letters: discard two by selection.
	items := []string{failed[0] + "/a", failed[1] + "/a"}
	a = b.do("POST", "/dead-letters/bulk", url.Values{"csrf": {tok}, "action": {"discard"}, "item": items}, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, "Discard 2 dead letters?") {
		t.Fatalf("bulk discard: %d\n%s", a.status, a.body)
	}
	a = b.do("POST", "/dead-letters/bulk", url.Values{"csrf": {tok}, "action": {"discard"}, "item": items, "confirm": {"yes"}}, nil)
	if a.status != http.StatusSeeOther {
		t.Fatalf("bulk discard confirmed: %d\n%s", a.status, a.body)
	}
	page, err := e.Engine.DeadLetters(ctx, persistence.StepListDeadParams{})
	if err != nil || len(page.Steps) != 1 || page.Steps[0].RunID != failed[2] {
		t.Errorf("dead letters after discarding two: %+v, %v; want only run %s's", page.Steps, err, failed[2])
	}

	// Cancel by selection: a finished run is refused, and said so.
	a = b.do("POST", "/runs/bulk", url.Values{"csrf": {tok}, "action": {"cancel"}, "id": {ok}, "confirm": {"yes"}}, nil)
	if msg := b.flash(a); !strings.Contains(msg, "Cancelled: 0 of 1 runs. Refused 1") {
		t.Errorf("cancel a finished run: the page says %q", msg)
	}
}

// TestRunsSearchAndTrigger: the runs page finds a run by its id and by
// its idempotency key; the trigger form starts a run with a key and
// refuses input that is not JSON, keeping what was typed.
func TestRunsSearchAndTrigger(t *testing.T) {
	e := newEnv(t, envOptions{})
	b := e.browser(t)
	tok := csrf(t, b.get("/workflows/shop"))
	a := b.do("POST", "/workflows/shop/trigger", url.Values{"csrf": {tok}, "input": {`{"secret": "s1"}`}, "key": {"order-77"}}, nil)
	if a.status != http.StatusSeeOther || !strings.HasPrefix(a.header.Get("Location"), "/runs/") {
		t.Fatalf("trigger: %d to %q", a.status, a.header.Get("Location"))
	}
	id := strings.TrimPrefix(strings.SplitN(a.header.Get("Location"), "?", 2)[0], "/runs/")
	e.waitRun(t, id)
	for _, q := range []string{id, "order-77"} {
		a := b.get("/runs?q=" + url.QueryEscape(q))
		if a.status != http.StatusOK || strings.Count(a.body, `<tr data-run="`+id+`"`) != 1 || strings.Count(a.body, "<tr data-run=") != 1 {
			t.Errorf("search %q: %d, want exactly run %s", q, a.status, id)
		}
	}
	if a := b.get("/runs?q=nothing-like-it"); !strings.Contains(a.body, "No run matches.") {
		t.Error("a search that matches nothing lists runs")
	}
	if a := b.get("/runs?after=yesterday"); a.status != http.StatusBadRequest {
		t.Errorf("a malformed time filter: %d, want 400", a.status)
	}
	// The error page is the form again, answered to the POST: the input
	// (which may hold secrets) never goes into a URL.
	page := b.do("POST", "/workflows/shop/trigger", url.Values{"csrf": {tok}, "input": {`{"secret": `}}, nil)
	if page.status != http.StatusUnprocessableEntity || page.header.Get("Location") != "" {
		t.Fatalf("trigger with bad JSON: %d to %q, want 422 with the form", page.status, page.header.Get("Location"))
	}
	if !strings.Contains(page.body, "The input is not valid JSON.") || !strings.Contains(page.body, `{&#34;secret&#34;:</textarea>`) {
		t.Errorf("the form does not say why or lost the input:\n%s", page.body)
	}
	// A reserved key (a schedule tick's) is refused on the form, naming
	// the prefix; nothing is started.
	page = b.do("POST", "/workflows/shop/trigger", url.Values{"csrf": {tok}, "input": {`{}`}, "key": {"schedule:nightly:1900000000"}}, nil)
	if page.status != http.StatusUnprocessableEntity || !strings.Contains(page.body, "starts with &#34;schedule:&#34;") {
		t.Errorf("trigger with a schedule tick's key: %d, want 422 with the form naming the prefix:\n%.2000s", page.status, page.body)
	}
}

// TestWhyWaitingNoNode: a step that no live node can run says so on its
// run's page, naming the handler and the queue.
func TestWhyWaitingNoNode(t *testing.T) {
	// An engine that runs nothing: the step waits for a node.
	w := shopWorkflow(t)
	e := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{w}, Clock: engine.SystemClock,
		Configure: func(c *engine.Config) { c.NoWorkers = true; c.NodeHeartbeat = 200 * time.Millisecond }})
	env := &env{Env: e}
	env.direct(t)
	id := e.Trigger(t, "shop", map[string]string{})
	b := env.browser(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := b.get("/runs/" + id + "?step=a")
		if strings.Contains(a.body, "No live node has handler <code>shop/a</code>") && strings.Contains(a.body, "works queue <code>default</code>") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run page does not say that no node can run step a:\n%s", a.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a := b.get("/runs/" + id + "?step=b")
	if !strings.Contains(a.body, "Why is this step waiting?") || !strings.Contains(a.body, `Pending dependencies: <a href="?step=a#step"><code>a</code></a>`) {
		t.Errorf("step b does not say it waits for a:\n%s", a.body)
	}
}

// TestBulkByFilterActsOnWhatItCounted: the confirmation by filter posts
// the runs it counted, so a run that starts matching after the count is
// not acted on; a search by run id finds that run as the list does; a
// status the action cannot take counts nothing.
func TestBulkByFilterActsOnWhatItCounted(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	var failed []string
	for range 2 {
		id := e.Trigger(t, "shop", map[string]string{"fail": "a"})
		e.waitRun(t, id)
		failed = append(failed, id)
	}
	b := e.browser(t)
	tok := csrf(t, b.get("/runs"))

	form := url.Values{"csrf": {tok}, "action": {"retry"}, "status": {"failed"}, "scope": {"filter"}}
	a := b.do("POST", "/runs/bulk", form, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, "Retry 2 runs?") {
		t.Fatalf("bulk retry by filter: %d, want a page asking to retry 2 runs:\n%s", a.status, a.body)
	}
	confirm, err := url.ParseQuery(hiddenFields(a.body))
	if err != nil {
		t.Fatal(err)
	}
	late := e.Trigger(t, "shop", map[string]string{"fail": "a"})
	e.waitRun(t, late)
	a = b.do("POST", "/runs/bulk", confirm, nil)
	if msg := b.flash(a); msg != "Retried: 2 of 2 runs." {
		t.Fatalf("confirmed: the page says %q, want 2 of 2 retried", msg)
	}
	if ri, _ := e.Engine.Get(ctx, late); ri.Run.Status != persistence.RunFailed {
		t.Errorf("the run that failed after the count is %s: it was acted on", ri.Run.Status)
	}
	for _, id := range failed {
		e.waitRun(t, id)
	}

	a = b.do("POST", "/runs/bulk", url.Values{"csrf": {tok}, "action": {"retry"}, "scope": {"filter"}, "q": {late}}, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, "Retry 1 runs?") || !strings.Contains(a.body, late) {
		t.Fatalf("bulk retry of a run searched by id: %d, want it counted:\n%s", a.status, a.body)
	}
	a = b.do("POST", "/runs/bulk", url.Values{"csrf": {tok}, "action": {"cancel"}, "scope": {"filter"}, "status": {"failed"}}, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, "Cancel 0 runs?") {
		t.Fatalf("bulk cancel of failed runs: %d, want none counted:\n%s", a.status, a.body)
	}
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// hiddenFields returns a page's hidden form fields as a query string.
func hiddenFields(body string) string {
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(body, -1) {
		v.Add(m[1], html.UnescapeString(m[2]))
	}
	return v.Encode()
}

// TestBadWorkflowNameIsNotFound: a workflow page, or a trigger, for a
// name that is not a workflow's (unknown, or not a name at all) is a 404
// naming it escaped, and no error in the log.
func TestBadWorkflowNameIsNotFound(t *testing.T) {
	var logs syncLog
	e := newEnv(t, envOptions{logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	b := e.browser(t)
	tok := csrf(t, b.get("/workflows/shop"))
	for _, name := range []string{"nope", "<script>alert(1)</script>", "a b", "x%00y", strings.Repeat("n", 300)} {
		p := "/workflows/" + url.PathEscape(name)
		for _, a := range []answer{b.get(p), b.do("POST", p+"/trigger", url.Values{"csrf": {tok}, "input": {"{}"}}, nil)} {
			if a.status != http.StatusNotFound {
				t.Errorf("%s: %d, want 404", p, a.status)
			}
			if strings.Contains(a.body, "<script>alert") {
				t.Errorf("%s: the page holds the name unescaped", p)
			}
			if !strings.Contains(a.body, "There is no workflow") {
				t.Errorf("%s: the page does not say there is no such workflow", p)
			}
		}
	}
	if got := logs.String(); strings.Contains(got, "level=ERROR") {
		t.Errorf("the log has errors:\n%s", got)
	}
}

// syncLog is a log buffer the server's goroutines write to.
type syncLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// TestRunsSearchByIDPrefix: a search that is a unique prefix of a run's
// id (8+ characters, with or without dashes) goes to that run's page; a
// prefix several runs share lists them (the first ten, saying there are
// more); a bulk action by that filter counts the runs listed, and is
// refused when more match than the list shows; a prefix under 8
// characters is an idempotency key like any other search.
func TestRunsSearchByIDPrefix(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	id := e.Trigger(t, "shop", map[string]string{})
	e.waitRun(t, id)
	b := e.browser(t)
	for _, q := range []string{id[:18], strings.ReplaceAll(id[:18], "-", "")} {
		a := b.get("/runs?q=" + url.QueryEscape(q))
		if a.status != http.StatusSeeOther || a.header.Get("Location") != "/runs/"+id {
			t.Errorf("search %q: %d to %q, want the run's page /runs/%s", q, a.status, a.header.Get("Location"), id)
		}
	}

	create := func(id string) {
		t.Helper()
		if _, err := e.Store.RunCreate(ctx, persistence.RunCreateParams{ID: id, Workflow: "shop", Version: 1, Now: time.Now(),
			StartAt: time.Now().Add(time.Hour), Steps: []persistence.StepSpec{{Name: "a"}}}); err != nil {
			t.Fatal(err)
		}
	}
	var shared []string
	for i := range 3 {
		shared = append(shared, fmt.Sprintf("0190a1b9-0000-7000-8000-%012d", i))
		create(shared[i])
	}
	for i := range 12 {
		create(fmt.Sprintf("0190a1c0-0000-7000-8000-%012d", i))
	}
	a := b.get("/runs?q=0190a1b9")
	if a.status != http.StatusOK || strings.Count(a.body, "<tr data-run=") != 3 || strings.Contains(a.body, "type more of the id") {
		t.Errorf("a prefix of 3 runs: %d, %d rows, want the 3:\n%.3000s", a.status, strings.Count(a.body, "<tr data-run="), a.body)
	}
	for _, sid := range shared {
		if !strings.Contains(a.body, `<tr data-run="`+sid+`"`) {
			t.Errorf("a prefix of 3 runs does not list %s", sid)
		}
	}
	a = b.get("/runs?q=0190a1c0")
	if a.status != http.StatusOK || strings.Count(a.body, "<tr data-run=") != 10 || !strings.Contains(a.body, "type more of the id") {
		t.Errorf("a prefix of 12 runs: %d, %d rows, want 10 and a note that more match", a.status, strings.Count(a.body, "<tr data-run="))
	}
	if a := b.get("/runs?q=0190a1b"); a.status != http.StatusOK || !strings.Contains(a.body, "No run matches.") {
		t.Errorf("a 7-character prefix: %d, want an idempotency key search that finds nothing", a.status)
	}

	tok := csrf(t, b.get("/runs"))
	a = b.do("POST", "/runs/bulk", url.Values{"csrf": {tok}, "action": {"cancel"}, "scope": {"filter"}, "q": {"0190a1b9"}}, nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, "Cancel 3 runs?") {
		t.Errorf("bulk cancel by a shared prefix: %d, want the 3 runs counted:\n%.3000s", a.status, a.body)
	}
	a = b.do("POST", "/runs/bulk", url.Values{"csrf": {tok}, "action": {"cancel"}, "scope": {"filter"}, "q": {"0190a1c0"}}, nil)
	if a.status != http.StatusConflict || !strings.Contains(a.body, "type more of the id") {
		t.Errorf("bulk cancel by a prefix of more runs than listed: %d, want 409:\n%.3000s", a.status, a.body)
	}
}

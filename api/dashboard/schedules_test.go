package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// TestSchedulesPage: a schedule shows its spec, zone and next five fire
// times; an admin session pauses, triggers and resumes it.
func TestSchedulesPage(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	now := time.Now()
	if _, err := e.Store.ScheduleUpsert(ctx, persistence.Schedule{
		Name: "nightly", Spec: "0 3 * * *", TimeZone: "Europe/Paris", Workflow: "shop", Input: []byte(`{}`),
		Overlap: persistence.OverlapAllow, CatchUp: persistence.CatchUpNone, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	a := b.get("/schedules")
	if a.status != http.StatusOK || !strings.Contains(a.body, "<code>0 3 * * *</code>") || !strings.Contains(a.body, "Europe/Paris") ||
		strings.Count(a.body, " CET</li>")+strings.Count(a.body, " CEST</li>") != 5 {
		t.Fatalf("GET /schedules: %d, want the spec, zone and five fire times in Paris time:\n%s", a.status, a.body)
	}
	tok := csrf(t, a)
	post := func(action string) string {
		t.Helper()
		a := b.do("POST", "/schedules/nightly/"+action, url.Values{"csrf": {tok}}, nil)
		if a.status != http.StatusSeeOther {
			t.Fatalf("POST %s: %d\n%s", action, a.status, a.body)
		}
		return b.flash(a)
	}
	post("pause")
	if sc, err := e.Store.ScheduleGet(ctx, "nightly"); err != nil || !sc.Paused {
		t.Fatalf("after pause: %+v, %v", sc, err)
	}
	if a := b.get("/schedules"); !strings.Contains(a.body, ">Resume</button>") || !strings.Contains(a.body, "paused") {
		t.Error("a paused schedule offers no resume")
	}
	if loc := post("trigger"); !strings.Contains(loc, "Schedule nightly triggered: run ") {
		t.Errorf("trigger: redirected to %q", loc)
	}
	post("resume")
	if sc, err := e.Store.ScheduleGet(ctx, "nightly"); err != nil || sc.Paused {
		t.Errorf("after resume: %+v, %v", sc, err)
	}
	if a := b.do("POST", "/schedules/nightly/explode", url.Values{"csrf": {tok}}, nil); a.status != http.StatusNotFound {
		t.Errorf("an unknown schedule action: %d, want 404", a.status)
	}
	if a := b.do("POST", "/schedules/nope/pause", url.Values{"csrf": {tok}}, nil); a.status != http.StatusNotFound {
		t.Errorf("pausing an unknown schedule: %d, want 404", a.status)
	}
	if a := b.get("/schedules"); !strings.Contains(a.body, "/schedules/nightly/delete") {
		t.Error("an admin is offered no delete")
	}
	if a := b.do("POST", "/schedules/nightly/delete", url.Values{}, nil); a.status == http.StatusSeeOther {
		t.Error("a delete without the CSRF token was accepted")
	}
	if loc := post("delete"); !strings.Contains(loc, "Schedule nightly deleted.") {
		t.Errorf("delete: redirected to %q", loc)
	}
	if _, err := e.Store.ScheduleGet(ctx, "nightly"); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("after delete: %v, want ErrScheduleNotFound", err)
	}
	if a := b.get("/schedules"); strings.Contains(a.body, `id="s-nightly"`) {
		t.Error("a deleted schedule is still listed")
	}
}

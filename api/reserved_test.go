package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// TestScheduleTickKeyIsRefused: an operate key cannot take a future tick
// of a schedule by triggering a run with the tick's idempotency key (in
// the header or the body, with a start far ahead that would also hold
// off later ticks under overlap=skip): the trigger is a 400 naming the
// reserved prefix, and the tick fires with the schedule's own input.
func TestScheduleTickKeyIsRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		fast := func(c *engine.Config) { c.ScheduleInterval = 200 * time.Millisecond }
		env := newAPIEnv(t, b, envOptions{keys: true, engine: fast})
		admin := "Authorization: Bearer " + newKey(t, env, "ops.admin", api.ScopeAdmin)
		operate := "Authorization: Bearer " + newKey(t, env, "ci", api.ScopeOperate)
		base := env.Clock.Now().Truncate(time.Minute).Add(time.Minute)
		env.Clock.Set(base.Add(time.Second))
		env.raw(t, "POST", "/v1/schedules", `{"name":"nightly","spec":"*/10 * * * * *","workflow":"order","input":{"tenant":7},"overlap":"skip","catch_up":"none"}`, admin).
			decode(t, http.StatusCreated, nil)

		tick := base.Add(10 * time.Second)
		key := cron.Key("nightly", tick)
		far := base.Add(365 * 24 * time.Hour).Format(time.RFC3339)
		for _, tc := range []struct{ body, header string }{
			{`{"input":{"attacker":1},"start_at":"` + far + `"}`, "Idempotency-Key: " + key},
			{`{"input":{"attacker":1},"start_at":"` + far + `","idempotency_key":"` + key + `"}`, ""},
			{`{"input":{"attacker":1}}`, "Idempotency-Key: schedule:nightly:manual:1"},
		} {
			hdr := []string{operate}
			if tc.header != "" {
				hdr = append(hdr, tc.header)
			}
			p := env.raw(t, "POST", "/v1/workflows/order/runs", tc.body, hdr...).problem(t, http.StatusBadRequest, api.CodeInvalidParameter)
			if !strings.Contains(p.Detail, `"schedule:"`) || !strings.Contains(p.Detail, "reserved") {
				t.Fatalf("%s %s: detail %q, want it to name the reserved prefix \"schedule:\"", tc.body, tc.header, p.Detail)
			}
		}
		if n := countRuns(t, env); n != 0 {
			t.Fatalf("%d runs after the refused triggers, want 0", n)
		}

		env.Clock.Set(tick)
		waitTicks(t, env.Store, "nightly", []time.Time{tick})
		page, err := env.Store.RunList(context.Background(), persistence.RunListParams{IdempotencyKey: key, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) != 1 || page.Runs[0].Schedule != "nightly" || string(page.Runs[0].Input) != `{"tenant":7}` {
			t.Fatalf("runs with the tick's key %q: %+v, want one, the schedule's, with its input", key, page.Runs)
		}
	})
}

// TestIdempotencyKeyRefusals: a whitespace-only key, the Idempotency-Key
// header given twice, and a child run's key are 400s that say what was
// wrong; nothing is created.
func TestIdempotencyKeyRefusals(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	for _, tc := range []struct {
		name, body string
		edit       func(*http.Request)
		want       []string
	}{
		{"whitespace body key", `{"idempotency_key":"   "}`, nil, []string{"idempotency key", "only whitespace"}},
		{"whitespace body key, tab", `{"idempotency_key":"\t\n"}`, nil, []string{"only whitespace"}},
		{"header twice", `{}`, func(r *http.Request) {
			r.Header.Add("Idempotency-Key", "k1")
			r.Header.Add("Idempotency-Key", "k2")
		}, []string{"Idempotency-Key", "2 times"}},
		{"header twice, same value", `{}`, func(r *http.Request) {
			r.Header.Add("Idempotency-Key", "k1")
			r.Header.Add("Idempotency-Key", "k1")
		}, []string{"Idempotency-Key", "2 times"}},
		{"child key", `{"idempotency_key":"child:x"}`, nil, []string{`"child:"`, "reserved for child runs", `"event:"`, `"schedule:"`}},
	} {
		r, err := env.rawDo("POST", "/v1/workflows/order/runs", tc.body, tc.edit)
		if err != nil {
			t.Fatal(err)
		}
		p := r.problem(t, http.StatusBadRequest, api.CodeInvalidParameter)
		for _, w := range tc.want {
			if !strings.Contains(p.Detail, w) {
				t.Errorf("%s: detail %q does not say %q", tc.name, p.Detail, w)
			}
		}
		if tc.name == "child key" && strings.Contains(p.Detail, "reserved for event runs") {
			t.Errorf("%s: detail %q blames the event prefix", tc.name, p.Detail)
		}
	}
	if n := countRuns(t, env); n != 0 {
		t.Fatalf("%d runs after the refused triggers, want 0", n)
	}
}

// TestLongValuesAreCappedInErrors: a 100 KB value (a workflow name, an
// event id, a spec, a path, a field name) is echoed in an error by its
// first bytes and its length, never in full.
func TestLongValuesAreCappedInErrors(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	long := "a" + strings.Repeat("b", 100_000)
	q := url.QueryEscape(long)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/workflows/" + long + "/runs", `{}`},
		{"GET", "/v1/runs?workflow=" + q, ``},
		{"GET", "/v1/runs?idempotency_key=" + q, ``},
		{"POST", "/v1/events", `{"name":"a.b","id":"` + long + `"}`},
		{"POST", "/v1/events", `{"name":"` + long + `","id":"x"}`},
		{"POST", "/v1/schedules", `{"name":"s1","workflow":"` + long + `","spec":"* * * * *"}`},
		{"POST", "/v1/schedules", `{"name":"s1","workflow":"order","spec":"` + long + `"}`},
		{"POST", "/v1/schedules", `{"name":"s1","workflow":"order","spec":"* * * * *","time_zone":"` + long + `"}`},
		{"POST", "/v1/schedules", `{"name":"` + long + `","workflow":"order","spec":"* * * * *"}`},
		{"POST", "/v1/workflows/order/runs", `{"input":{},"` + long + `":1}`},
		{"POST", "/v1/workflows/order/runs", `{"start_at":"` + long + `"}`},
		{"POST", "/v1/workflows/order/runs", `{"idempotency_key":"` + long + `"}`},
		{"GET", "/v1/" + long, ``},
		{"PATCH", "/v1/workflows/" + long, ``},
		{"POST", "/v1/api-keys", `{"name":"` + long + `","scope":"read"}`},
	} {
		r, err := env.rawDo(c.method, c.path, c.body, nil)
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("%s %.40s %.60s", c.method, c.path, c.body)
		// The value's length, or the path's around it.
		if r.status < 400 || len(r.body) > 1000 || !strings.Contains(string(r.body), "…(1000") || !strings.Contains(string(r.body), " bytes)") {
			t.Errorf("%s: %d, %d bytes (%.300s), want an error quoting the value's start and its length, …(100001 bytes)", what, r.status, len(r.body), r.body)
		}
	}
}

package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// scheduledTicks returns the ticks a schedule's runs were started for,
// oldest first.
func scheduledTicks(t *testing.T, st persistence.Store, name string) []time.Time {
	t.Helper()
	page, err := st.RunList(context.Background(), persistence.RunListParams{Schedule: name, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]time.Time, len(page.Runs))
	for i, r := range page.Runs {
		out[len(out)-1-i] = r.ScheduledTick.UTC()
	}
	return out
}

// A schedule created over the HTTP API on one node fires once per tick
// across three engine nodes within a second of its first tick; an edit of
// its spec takes effect at the next tick; a delete stops it.
func TestRuntimeScheduleAcrossNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		fast := func(c *engine.Config) { c.ScheduleInterval = 200 * time.Millisecond }
		env := newAPIEnv(t, b, envOptions{engine: fast})
		for range 2 {
			enginetest.New(t, enginetest.Options{Store: env.Store, Redis: env.Redis, Prefix: env.Prefix, Clock: env.Clock,
				Workflows: []*dag.Workflow{orderWorkflow(t, env.healed)}, Configure: fast})
		}
		base := env.Clock.Now().Truncate(time.Minute).Add(time.Minute)
		env.Clock.Set(base.Add(time.Second))

		r := env.raw(t, "POST", "/v1/schedules", `{"name":"tenant-7","spec":"*/10 * * * * *","workflow":"order","input":{"tenant":7},"overlap":"allow","catch_up":"none"}`)
		var sc client.Schedule
		r.decode(t, http.StatusCreated, &sc)
		if r.header.Get("Location") != "/v1/schedules/tenant-7" || sc.Owner != persistence.OwnerOperator || sc.Spec != "*/10 * * * * *" ||
			len(sc.Next) == 0 || !sc.Next[0].Equal(base.Add(10*time.Second)) || string(sc.Input) != `{"tenant":7}` {
			t.Fatalf("created %+v, Location %q", sc, r.header.Get("Location"))
		}

		// The first tick: one run, within a second, whichever node fires it.
		env.Clock.Set(base.Add(10 * time.Second))
		start := time.Now()
		deadline := start.Add(5 * time.Second)
		for len(scheduledTicks(t, env.Store, "tenant-7")) == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(start)
		t.Logf("first tick's run started %v after the tick", took)
		if took > time.Second {
			t.Errorf("the first tick's run started %v after the tick, want within a second", took)
		}
		time.Sleep(600 * time.Millisecond) // three passes on every node
		if got := scheduledTicks(t, env.Store, "tenant-7"); len(got) != 1 || !got[0].Equal(base.Add(10*time.Second)) {
			t.Fatalf("runs for ticks %v, want one for %v", got, base.Add(10*time.Second))
		}

		// An edit of the spec: every 3 s from the edit at 11 s, so 12 s.
		env.Clock.Set(base.Add(11 * time.Second))
		r = env.raw(t, "PATCH", "/v1/schedules/tenant-7", `{"spec":"*/3 * * * * *"}`)
		r.decode(t, http.StatusOK, &sc)
		if sc.Spec != "*/3 * * * * *" || string(sc.Input) != `{"tenant":7}` || len(sc.Next) == 0 || !sc.Next[0].Equal(base.Add(12*time.Second)) {
			t.Fatalf("edited %+v", sc)
		}
		time.Sleep(400 * time.Millisecond)
		env.Clock.Set(base.Add(12 * time.Second))
		want := []time.Time{base.Add(10 * time.Second), base.Add(12 * time.Second)}
		waitTicks(t, env.Store, "tenant-7", want)

		// Delete: no tick fires after it.
		env.raw(t, "DELETE", "/v1/schedules/tenant-7", "").decode(t, http.StatusNoContent, nil)
		time.Sleep(400 * time.Millisecond)
		env.Clock.Set(base.Add(15 * time.Second))
		time.Sleep(600 * time.Millisecond)
		if got := scheduledTicks(t, env.Store, "tenant-7"); len(got) != len(want) {
			t.Fatalf("after the delete: runs for ticks %v, want %v", got, want)
		}
		env.raw(t, "GET", "/v1/schedules", "").decode(t, http.StatusOK, nil)
		env.raw(t, "DELETE", "/v1/schedules/tenant-7", "").problem(t, http.StatusNotFound, api.CodeScheduleNotFound)
	})
}

func waitTicks(t *testing.T, st persistence.Store, name string, want []time.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got []time.Time
	for time.Now().Before(deadline) {
		if got = scheduledTicks(t, st, name); len(got) >= len(want) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond)
	got = scheduledTicks(t, st, name)
	if len(got) != len(want) {
		t.Fatalf("runs for ticks %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("runs for ticks %v, want %v", got, want)
		}
	}
}

// Bad definitions are 4xx problems naming what was wrong, and nothing is
// stored; the routes need the admin scope.
func TestScheduleWritesRefuseBadInput(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{engine: func(c *engine.Config) { c.ScheduleInterval = -1 }})
		for _, c := range []struct{ body, code, says string }{
			{`{"name":"s1","spec":"61 * * * *","workflow":"order"}`, api.CodeInvalidParameter, "61 * * * *"},
			{`{"name":"s1","spec":"@daily","time_zone":"Mars/Olympus","workflow":"order"}`, api.CodeInvalidParameter, "Mars/Olympus"},
			{`{"name":"s1","spec":"@daily","workflow":"nope"}`, api.CodeInvalidParameter, "nope"},
			{`{"name":"s1","spec":"@daily","workflow":"order","overlap":"sometimes"}`, api.CodeInvalidParameter, "sometimes"},
			{`{"name":"s1","spec":"@daily","workflow":"order","catch_up":"maybe"}`, api.CodeInvalidParameter, "maybe"},
			{`{"name":"s1","spec":"@daily","workflow":"order","catch_up_window":"soon"}`, api.CodeInvalidParameter, "soon"},
			{`{"name":"9x","spec":"@daily","workflow":"order"}`, api.CodeInvalidName, "9x"},
			{`{"name":"s1","spec":"@daily","workflow":"order","colour":"red"}`, api.CodeInvalidJSON, "colour"},
		} {
			p := env.raw(t, "POST", "/v1/schedules", c.body).problem(t, http.StatusBadRequest, c.code)
			if !strings.Contains(p.Detail, c.says) {
				t.Errorf("%s: detail %q does not name %q", c.body, p.Detail, c.says)
			}
		}
		if list, err := env.Store.ScheduleList(context.Background()); err != nil || len(list) != 0 {
			t.Fatalf("refused schedules were stored: %+v, %v", list, err)
		}
		env.raw(t, "POST", "/v1/schedules", `{"name":"s1","spec":"@daily","workflow":"order"}`).decode(t, http.StatusCreated, nil)
		env.raw(t, "POST", "/v1/schedules", `{"name":"s1","spec":"@hourly","workflow":"order"}`).problem(t, http.StatusConflict, api.CodeConflict)
		p := env.raw(t, "PATCH", "/v1/schedules/s1", `{"spec":"@sometimes"}`).problem(t, http.StatusBadRequest, api.CodeInvalidParameter)
		if !strings.Contains(p.Detail, "@sometimes") {
			t.Errorf("detail %q", p.Detail)
		}
		env.raw(t, "PATCH", "/v1/schedules/nope", `{"spec":"@daily"}`).problem(t, http.StatusNotFound, api.CodeScheduleNotFound)
		env.raw(t, "PUT", "/v1/schedules/s1", `{"name":"s2","spec":"@daily","workflow":"order"}`).problem(t, http.StatusBadRequest, api.CodeInvalidParameter)
		var sc client.Schedule
		env.raw(t, "PUT", "/v1/schedules/s1", `{"spec":"@weekly","workflow":"order","overlap":"skip"}`).decode(t, http.StatusOK, &sc)
		if sc.Spec != "@weekly" || sc.Overlap != "skip" || sc.CatchUp != "latest" {
			t.Fatalf("replaced %+v", sc)
		}
		if got, _ := env.Store.ScheduleGet(context.Background(), "s1"); got.Spec != "@weekly" {
			t.Fatalf("stored %+v", got)
		}

		// Only an admin key may write schedules.
		keyed := newAPIEnv(t, b, envOptions{keys: true, peer: env.Env})
		reader := keyed.client(t, newKey(t, keyed, "reader", api.ScopeRead))
		problemOf(t, reader.DeleteSchedule(context.Background(), "s1"), http.StatusForbidden, api.CodeForbidden)
		_, err := keyed.client(t, newKey(t, keyed, "ci", api.ScopeOperate)).CreateSchedule(context.Background(),
			client.ScheduleDefinition{Name: "s3", Spec: "@daily", Workflow: "order"})
		problemOf(t, err, http.StatusForbidden, api.CodeForbidden)
	})
}

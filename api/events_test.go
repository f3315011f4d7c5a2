package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

func shipOnOrder(t testing.TB) *dag.Workflow {
	t.Helper()
	w, err := dag.New("ship", dag.OnEvent("order.placed", dag.Filter("event.total >= 100"))).
		Step("a", steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) { return sc.Input, nil })).Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestPublishEvents: POST /v1/events answers 201 with the runs started,
// 200 with the same runs on every (concurrent) repeat, 409 for the id
// with another payload, 400 for a bad name or id; GET /v1/events lists
// them by name and in keyset pages. Every answer is checked against the
// spec.
func TestPublishEvents(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{workflows: []*dag.Workflow{shipOnOrder(t)}})
		const n = 20
		var wg sync.WaitGroup
		results := make([]rawResp, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = env.rawDo("POST", "/v1/events", `{"name":"order.placed","id":"o-1","payload":{"total":150,"id":"o-1"}}`, nil)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		created := 0
		runs := map[string]bool{}
		for i, r := range results {
			var ev client.Event
			switch r.status {
			case http.StatusCreated:
				created++
			case http.StatusOK:
			default:
				t.Fatalf("answer %d: %d %s", i, r.status, r.body)
			}
			r.decode(t, r.status, &ev)
			if len(ev.Runs) != 1 || ev.Runs[0].Workflow != "ship" {
				t.Fatalf("answer %d: runs %+v", i, ev.Runs)
			}
			runs[ev.Runs[0].RunID] = true
		}
		if created != 1 || len(runs) != 1 {
			t.Fatalf("%d answers 201, %d run ids; want 1 and 1", created, len(runs))
		}
		for id := range runs {
			env.waitStatus(t, id, "succeeded")
		}

		// The key order of the payload does not matter.
		env.raw(t, "POST", "/v1/events", `{"name":"order.placed","id":"o-1","payload":{"id":"o-1","total":150}}`).decode(t, http.StatusOK, nil)
		env.raw(t, "POST", "/v1/events", `{"name":"order.placed","id":"o-1","payload":{"total":1}}`).problem(t, http.StatusConflict, api.CodeEventConflict)
		env.raw(t, "POST", "/v1/events", `{"name":"order placed"}`).problem(t, http.StatusBadRequest, api.CodeInvalidName)
		env.raw(t, "POST", "/v1/events", `{"name":"order.placed","id":"a b"}`).problem(t, http.StatusBadRequest, api.CodeInvalidParameter)
		env.raw(t, "POST", "/v1/events", `{"name":"order.placed","payload":{`).problem(t, http.StatusBadRequest, api.CodeInvalidJSON)

		c := env.anon
		tick := func() { env.Clock.Set(env.Clock.Now().Add(time.Second)) }
		tick()
		small, created2, err := c.Publish(context.Background(), client.PublishRequest{Name: "order.placed", Payload: json.RawMessage(`{"total":5}`)})
		if err != nil || !created2 || small.ID == "" || len(small.Runs) != 0 {
			t.Fatalf("filtered-out event: %+v, %v, %v", small, created2, err)
		}
		tick()
		if small.Warning != "" {
			t.Errorf("an event a workflow subscribes to, filtered out, warns %q", small.Warning)
		}
		lone, _, err := c.Publish(context.Background(), client.PublishRequest{Name: "user.signed-up"})
		if want := `no workflow subscribes to event "user.signed-up": it started no run`; err != nil || lone.Warning != want {
			t.Fatalf("event nobody subscribes to: warning %q, %v; want %q", lone.Warning, err, want)
		}

		all, err := c.ListEvents(context.Background(), client.EventFilter{Limit: 2})
		if err != nil || len(all.Events) != 2 || all.NextCursor == "" {
			t.Fatalf("first page: %+v, %v", all, err)
		}
		if all.Events[0].Name != "user.signed-up" || all.Events[1].ID != small.ID {
			t.Errorf("first page, newest first: %+v", all.Events)
		}
		next, err := c.ListEvents(context.Background(), client.EventFilter{Limit: 2, Cursor: all.NextCursor})
		if err != nil || len(next.Events) != 1 || next.Events[0].ID != "o-1" || next.NextCursor != "" {
			t.Fatalf("second page: %+v, %v", next, err)
		}
		if next.Events[0].DispatchedAt == nil || len(next.Events[0].Runs) != 1 {
			t.Errorf("o-1 listed as %+v", next.Events[0])
		}
		byName, err := c.ListEvents(context.Background(), client.EventFilter{Name: "order.placed"})
		if err != nil || len(byName.Events) != 2 {
			t.Fatalf("by name: %+v, %v", byName, err)
		}
		env.raw(t, "GET", "/v1/events?name=bad%20name", "").problem(t, http.StatusBadRequest, api.CodeInvalidName)
		env.raw(t, "GET", "/v1/events?cursor=garbage!", "").problem(t, http.StatusBadRequest, api.CodeInvalidParameter)
		env.raw(t, "GET", "/v1/events?after=yesterday", "").problem(t, http.StatusBadRequest, api.CodeInvalidParameter)
	})
}

// TestEventScopes: publishing needs the operate scope, listing read.
func TestEventScopes(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{keys: true, workflows: []*dag.Workflow{shipOnOrder(t)}})
	read := env.client(t, newKey(t, env, "reader", api.ScopeRead))
	if _, _, err := read.Publish(context.Background(), client.PublishRequest{Name: "order.placed"}); !client.IsForbidden(err) {
		t.Errorf("publish with a read key: %v, want 403", err)
	}
	if _, err := read.ListEvents(context.Background(), client.EventFilter{}); err != nil {
		t.Errorf("list with a read key: %v", err)
	}
	op := env.client(t, newKey(t, env, "operator", api.ScopeOperate))
	if _, created, err := op.Publish(context.Background(), client.PublishRequest{Name: "order.placed", ID: "x"}); err != nil || !created {
		t.Errorf("publish with an operate key: %v, %v", created, err)
	}
}

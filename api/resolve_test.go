package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/persistence"
)

// TestRunIDPrefix: every run-id path parameter takes a unique prefix of
// the id (8+ characters, with or without its dashes) and answers about
// the run it names, with the whole id in the body; a prefix several runs
// share is a 409 ambiguous_id listing them; a prefix under 8 characters
// a 400 that says so.
func TestRunIDPrefix(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		ctx := context.Background()
		id := triggerOrder(t, env, `{"block":"charge"}`, "")
		for _, prefix := range []string{id[:18], strings.ReplaceAll(id[:18], "-", ""), strings.ToUpper(id[:13])} {
			var d client.RunDetail
			env.raw(t, "GET", "/v1/runs/"+prefix, "").decode(t, http.StatusOK, &d)
			if d.Run.ID != id {
				t.Errorf("GET /v1/runs/%s: run %s, want %s", prefix, d.Run.ID, id)
			}
		}
		d, err := env.anon.GetRun(ctx, id[:18])
		if err != nil || d.Run.ID != id {
			t.Errorf("client GetRun(prefix) = %s, %v", d.Run.ID, err)
		}
		var run client.Run
		env.raw(t, "POST", "/v1/runs/"+id[:18]+"/cancel", "").decode(t, http.StatusOK, &run)
		if run.ID != id || run.Status != "cancelled" {
			t.Errorf("cancel by prefix: %+v", run)
		}

		var shared []string
		for i := range 3 {
			sid := fmt.Sprintf("0190a1b9-0000-7000-8000-%012d", i)
			if _, err := env.Store.RunCreate(ctx, persistence.RunCreateParams{ID: sid, Workflow: "order", Version: 1, Now: env.Clock.Now(),
				Steps: []persistence.StepSpec{{Name: "charge"}}}); err != nil {
				t.Fatal(err)
			}
			shared = append(shared, sid)
		}
		for _, route := range []struct{ method, path string }{
			{"GET", "/v1/runs/0190a1b9"},
			{"GET", "/v1/runs/0190a1b9-0000/output"},
			{"POST", "/v1/runs/0190a1b9/cancel"},
			{"DELETE", "/v1/dead-letters/0190a1b9/charge"},
		} {
			p := env.raw(t, route.method, route.path, "").problem(t, http.StatusConflict, api.CodeAmbiguousID)
			if diff := cmp.Diff(shared, p.Matches); diff != "" {
				t.Errorf("%s %s: matches (-want +got):\n%s", route.method, route.path, diff)
			}
			if !strings.Contains(p.Detail, shared[0]) {
				t.Errorf("%s %s: detail %q does not name the matches", route.method, route.path, p.Detail)
			}
		}
		_, err = env.anon.GetRun(ctx, "0190a1b9")
		if p := problemOf(t, err, http.StatusConflict, api.CodeAmbiguousID); len(p.Matches) != 3 {
			t.Errorf("client: matches %v", p.Matches)
		}
		p := env.raw(t, "GET", "/v1/runs/0190a1b", "").problem(t, http.StatusBadRequest, api.CodeInvalidParameter)
		if !strings.Contains(p.Detail, "at least 8 characters") {
			t.Errorf("a 7-character prefix: %q", p.Detail)
		}
		env.raw(t, "GET", "/v1/runs/0190ffff", "").problem(t, http.StatusNotFound, api.CodeRunNotFound)
	})
}

package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// approvalWorkflow waits for a signal (approve), then for
// payment.captured of the input's order id (paid), then echoes.
func approvalWorkflow(t testing.TB) *dag.Workflow {
	t.Helper()
	w, err := dag.New("approval").
		Step("approve", nil, dag.WaitForSignal()).
		Step("paid", nil, dag.After("approve"), dag.WaitFor("payment.captured", dag.Correlate("input.order_id"))).
		Step("done", steps.HandlerFunc(func(_ context.Context, sc steps.Context) (json.RawMessage, error) { return sc.Outputs["paid"], nil }),
			dag.After("paid")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// waitParkedAPI polls GET /v1/runs/{id} until step is parked.
func waitParkedAPI(t *testing.T, env *apiEnv, id, step string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := env.anon.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.Steps {
			if s.Step == step && s.Status == string(persistence.StepParked) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: step %s not parked: %+v", id, step, d.Steps)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSignalStep: POST /v1/runs/{id}/steps/{step}/signal completes a
// step waiting for a signal (200 with the run; a repeat with the same
// payload is 200 too, another payload 409 step_not_waiting), and POST
// /v1/events with a correlation completes the step waiting for it. Every
// answer is checked against the spec.
func TestSignalStep(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{workflows: []*dag.Workflow{approvalWorkflow(t)}})
		id := env.Trigger(t, "approval", map[string]any{"order_id": "A-1"})
		waitParkedAPI(t, env, id, "approve")
		path := "/v1/runs/" + id + "/steps/approve/signal"

		env.raw(t, "POST", "/v1/runs/"+id+"/steps/paid/signal", "").problem(t, http.StatusConflict, api.CodeStepNotWaiting)
		env.raw(t, "POST", path, `{"payload":{`).problem(t, http.StatusBadRequest, api.CodeInvalidJSON)
		env.raw(t, "POST", "/v1/runs/"+id+"/steps/no%20such/signal", "").problem(t, http.StatusBadRequest, api.CodeInvalidName)
		var d client.RunDetail
		env.raw(t, "POST", path, `{"payload":{"by":"ann"}}`).decode(t, http.StatusOK, &d)
		if d.Run.ID != id {
			t.Errorf("signal answered run %s, want %s", d.Run.ID, id)
		}
		env.raw(t, "POST", path, `{"payload":{"by":"ann"}}`).decode(t, http.StatusOK, nil)
		env.raw(t, "POST", path, `{"payload":{"by":"bob"}}`).problem(t, http.StatusConflict, api.CodeStepNotWaiting)

		waitParkedAPI(t, env, id, "paid")
		env.raw(t, "POST", "/v1/events", `{"name":"payment.captured","correlation":"B-2","payload":{"amount":2}}`).decode(t, http.StatusCreated, nil)
		env.raw(t, "POST", "/v1/events", `{"name":"payment.captured","correlation":"A-1","payload":{"amount":1}}`).decode(t, http.StatusCreated, nil)
		done := env.waitStatus(t, id, "succeeded")
		for _, s := range done.Steps {
			if s.Step == "paid" && string(s.Output) != `{"amount":1}` {
				t.Errorf("paid's output = %s, want A-1's payload", s.Output)
			}
		}
	})
}

// TestSignalScope: signalling needs the operate scope.
func TestSignalScope(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{keys: true, workflows: []*dag.Workflow{approvalWorkflow(t)}})
	id := env.Trigger(t, "approval", map[string]any{"order_id": "A-1"})
	read := env.client(t, newKey(t, env, "reader", api.ScopeRead))
	if _, err := read.Signal(context.Background(), id, "approve", nil); !client.IsForbidden(err) {
		t.Errorf("signal with a read key: %v, want 403", err)
	}
	op := env.client(t, newKey(t, env, "operator", api.ScopeOperate))
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := op.Signal(context.Background(), id, "approve", json.RawMessage(`true`))
		if err == nil {
			if d.Run.ID != id {
				t.Errorf("signal answered run %s", d.Run.ID)
			}
			return
		}
		if !client.IsConflict(err) || time.Now().After(deadline) {
			t.Fatalf("signal with an operate key: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // not parked yet
	}
}

package api_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
)

// TestPriorityAndPause: a run's priority through the trigger, and pausing
// and resuming runs and queues.
func TestPriorityAndPause(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{engine: func(c *engine.Config) { c.NoWorkers = true }})
		ctx := context.Background()
		c := env.anon

		run, _, err := c.Trigger(ctx, "order", client.TriggerRequest{Input: json.RawMessage(`{}`), Priority: 5})
		if err != nil || run.Priority != 5 {
			t.Fatalf("trigger with priority 5 = %+v, %v", run, err)
		}
		env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":{},"priority":11}`).problem(t, 400, api.CodeInvalidParameter)

		paused, err := c.PauseRun(ctx, run.ID)
		if err != nil || paused.PausedAt == nil || paused.ID != run.ID {
			t.Fatalf("pause run = %+v, %v; want paused", paused, err)
		}
		got, err := c.GetRun(ctx, run.ID)
		if err != nil || got.Run.PausedAt == nil {
			t.Fatalf("get of a paused run = %+v, %v", got.Run, err)
		}
		resumed, err := c.ResumeRun(ctx, run.ID)
		if err != nil || resumed.PausedAt != nil {
			t.Fatalf("resume run = %+v, %v; want not paused", resumed, err)
		}
		_, err = c.PauseRun(ctx, "0190a0b0-0000-7000-8000-000000000000")
		problemOf(t, err, 404, api.CodeRunNotFound)
		if _, err := c.CancelRun(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		_, err = c.PauseRun(ctx, run.ID)
		problemOf(t, err, 409, api.CodeRunFinished)

		q, err := c.PauseQueue(ctx, "default")
		if err != nil || !q.Paused || q.Name != "default" {
			t.Fatalf("pause queue = %+v, %v", q, err)
		}
		qs, err := c.ListQueues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Paused != (q.Name == "default") {
				t.Fatalf("queue %s listed paused=%v", q.Name, q.Paused)
			}
		}
		if q, err := c.ResumeQueue(ctx, "default"); err != nil || q.Paused {
			t.Fatalf("resume queue = %+v, %v", q, err)
		}
		env.raw(t, "POST", "/v1/queues/bad%20name/pause", "").problem(t, 400, api.CodeInvalidName)
		env.raw(t, "GET", "/v1/queues/default/pause", "").problem(t, 405, api.CodeMethodNotAllowed)
	})
}

package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// keyring is enginetest.Keyring.
var keyring = enginetest.Keyring

// A server whose keyring lacks the key old rows were sealed with still
// answers GET /v1/runs, /v1/runs/{id}, /v1/dead-letters and /v1/events
// with 200: the payloads it cannot open are null or absent and
// payload_error says why (checked against the spec).
func TestListingsWithALostKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		old := newAPIEnv(t, b, envOptions{engine: func(c *engine.Config) { c.Codec = keyring(t, "k1") }})
		id := old.Trigger(t, "order", map[string]any{"fail": "charge"})
		old.waitStatus(t, id, "failed")
		if _, err := old.Engine.Publish(context.Background(), "order.noted", map[string]any{"n": 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := old.Engine.CreateSchedule(context.Background(), engine.ScheduleDefinition{Name: "sealed-nightly",
			Spec: "0 2 * * *", Workflow: "order", Input: json.RawMessage(`{"n":2}`)}); err != nil {
			t.Fatal(err)
		}
		// The store was sealed before probes were written: a node with
		// another keyring starts.
		if _, err := old.Store.(persistence.TxStore).DB().Exec(`DELETE FROM codec_probe`); err != nil {
			t.Fatal(err)
		}
		front := newAPIEnv(t, b, envOptions{peer: old.Env, engine: func(c *engine.Config) { c.Codec = keyring(t, "k2") }})
		const why = `unknown key id \"k1\"`

		var runs client.RunList
		front.raw(t, "GET", "/v1/runs", "").decode(t, http.StatusOK, &runs)
		if len(runs.Runs) != 1 || !strings.Contains(runs.Runs[0].PayloadError, `unknown key id "k1"`) || runs.Runs[0].Error != "" {
			t.Errorf("GET /v1/runs: %+v; want the run with its error left out and why", runs.Runs)
		}
		// With its payloads asked for, the input is null and said why.
		runs = client.RunList{}
		front.raw(t, "GET", "/v1/runs?include=input", "").decode(t, http.StatusOK, &runs)
		if len(runs.Runs) != 1 || !strings.Contains(runs.Runs[0].PayloadError, "decoding the input") || string(runs.Runs[0].Input) != "null" {
			t.Errorf("GET /v1/runs?include=input: %+v; want the run with its input null and why", runs.Runs)
		}
		r := front.raw(t, "GET", "/v1/runs/"+id, "")
		var d client.RunDetail
		r.decode(t, http.StatusOK, &d)
		if !strings.Contains(string(r.body), why) || d.Run.PayloadError == "" {
			t.Errorf("GET /v1/runs/{id}: %s; want payload_error on the run", r.body)
		}
		var dl client.DeadLetterList
		front.raw(t, "GET", "/v1/dead-letters", "").decode(t, http.StatusOK, &dl)
		if len(dl.DeadLetters) != 1 || !strings.Contains(dl.DeadLetters[0].PayloadError, `unknown key id "k1"`) || dl.DeadLetters[0].Error != "" {
			t.Errorf("GET /v1/dead-letters: %+v; want the dead step with its error left out and why", dl.DeadLetters)
		}
		var evs client.EventList
		front.raw(t, "GET", "/v1/events", "").decode(t, http.StatusOK, &evs)
		if len(evs.Events) != 1 || !strings.Contains(evs.Events[0].PayloadError, `unknown key id "k1"`) || string(evs.Events[0].Payload) != "null" {
			b, _ := json.Marshal(evs)
			t.Errorf("GET /v1/events: %s; want the event with its payload null and why", b)
		}
		var scs client.ScheduleList
		front.raw(t, "GET", "/v1/schedules", "").decode(t, http.StatusOK, &scs)
		if len(scs.Schedules) != 1 || !strings.Contains(scs.Schedules[0].PayloadError, `unknown key id "k1"`) || string(scs.Schedules[0].Input) != "null" {
			t.Errorf("GET /v1/schedules: %+v; want the schedule with its input null and why", scs.Schedules)
		}
	})
}

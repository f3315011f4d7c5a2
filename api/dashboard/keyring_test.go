package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// keyring is enginetest.Keyring.
var keyring = enginetest.Keyring

// A dashboard whose keyring lacks the key a run was sealed with still
// shows the runs list, the dead letters and the run's page, and says on
// each that the payloads cannot be read and why.
func TestPagesWithALostKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		old := newEnv(t, envOptions{real: real, engine: func(c *engine.Config) { c.Codec = keyring(t, "k1") }})
		id := old.Trigger(t, "shop", map[string]any{"fail": "a"})
		old.waitRun(t, id)
		if _, err := old.Engine.CreateSchedule(context.Background(), engine.ScheduleDefinition{Name: "sealed-nightly",
			Spec: "0 2 * * *", Workflow: "shop", Input: json.RawMessage(`{"sku":"SECRET"}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := old.store.Store.(persistence.TxStore).DB().Exec(`DELETE FROM codec_probe`); err != nil {
			t.Fatal(err)
		}
		front := enginetest.New(t, enginetest.Options{Store: old.store.Store, Redis: old.Redis, Prefix: old.Prefix,
			Workflows: []*dag.Workflow{shopWorkflow(t)}, Clock: engine.SystemClock,
			Configure: func(c *engine.Config) { c.Codec = keyring(t, "k2"); c.NoWorkers = true }})
		srv := httptest.NewServer(api.NewHandler(front.Engine, api.Options{AllowAnonymous: true}))
		t.Cleanup(srv.Close)
		jar, _ := cookiejar.New(nil)
		hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		t.Cleanup(hc.CloseIdleConnections)
		b := &browser{t: t, hc: hc, u: srv.URL}
		const why = "unknown key id &#34;k1&#34;"
		for _, path := range []string{"/runs", "/dead-letters", "/runs/" + id, "/runs/" + id + "?step=a"} {
			a := b.get(path)
			if a.status != http.StatusOK || !strings.Contains(a.body, why) {
				t.Errorf("GET %s: %d; want 200 naming the lost key: %.600s", path, a.status, a.body)
			}
		}
		if a := b.get("/runs/" + id + "?step=a"); !strings.Contains(a.body, `id="run-payload-error"`) || !strings.Contains(a.body, `id="step-payload-error"`) {
			t.Errorf("the run page does not say that the run's and the step's payloads cannot be read")
		}
		if a := b.get("/schedules"); a.status != http.StatusOK || !strings.Contains(a.body, "unreadable: ") || !strings.Contains(a.body, why) {
			t.Errorf("GET /schedules: %d; want 200 saying the schedule's input cannot be read: %.600s", a.status, a.body)
		}
		// Editing would store an empty input in place of the sealed one.
		if a := b.get("/schedules/sealed-nightly/edit"); a.status != http.StatusConflict || strings.Contains(a.body, `name="input"`) {
			t.Errorf("GET the edit form of an unreadable schedule: %d; want 409 and no form: %.600s", a.status, a.body)
		}
	})
}

package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// A node whose keyring lost the key old rows were sealed with still
// lists runs, dead letters and events, and shows a run: the payloads it
// cannot open are left empty and PayloadError says why; the rows it can
// open are as they were.
func TestUndecodablePayloadsAreMarked(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		old, dead, _ := sealedUnder(t, b.opts(t), keyring(t, "k1"))
		forgetProbe(t, old.Store)
		env := enginetest.New(t, keyedNode(t, old, keyring(t, "k2"), func(c *engine.Config) { c.NoWorkers = true }))
		ctx := context.Background()
		fresh := env.Trigger(t, "sealed", map[string]any{"order": "NEW"})
		const why = `unknown key id "k1"`

		page, err := env.Engine.Runs(ctx, engine.RunFilter{Workflow: "sealed"})
		if err != nil || len(page.Runs) != 3 {
			t.Fatalf("Runs: %d runs, %v; want 3 and no error", len(page.Runs), err)
		}
		for _, r := range page.Runs {
			if r.ID == fresh {
				if r.PayloadError != "" || !strings.Contains(string(r.Input), "NEW") {
					t.Errorf("Runs: the run sealed under k2: input %s, payload error %q; want it decoded", r.Input, r.PayloadError)
				}
				continue
			}
			if !strings.Contains(r.PayloadError, why) || r.Input != nil || strings.Contains(r.Error, "dagflow-aesgcm") {
				t.Errorf("Runs: run %s: input %s, error %q, payload error %q; want the payloads left out and why", r.ID, r.Input, r.Error, r.PayloadError)
			}
		}
		dl, err := env.Engine.DeadLetters(ctx, persistence.StepListDeadParams{})
		if err != nil || len(dl.Steps) != 1 || !strings.Contains(dl.Steps[0].PayloadError, why) || dl.Steps[0].Error != "" {
			t.Errorf("DeadLetters: %+v, %v; want the dead step with its error left out and why", dl.Steps, err)
		}
		evs, err := env.Engine.Events(ctx, engine.EventFilter{})
		if err != nil || len(evs.Events) != 1 || !strings.Contains(evs.Events[0].PayloadError, why) || evs.Events[0].Payload != nil {
			t.Errorf("Events: %+v, %v; want the event with its payload left out and why", evs.Events, err)
		}
		info, err := env.Engine.Get(ctx, dead)
		if err != nil {
			t.Fatalf("Get of a run sealed under a lost key: %v; want the run with its payloads marked", err)
		}
		a, _ := info.Step("a")
		if !strings.Contains(info.Run.PayloadError, why) || !strings.Contains(a.PayloadError, why) || a.Error != "" {
			t.Errorf("Get: run payload error %q, step %+v", info.Run.PayloadError, a)
		}
		if len(info.Attempts) == 0 || !strings.Contains(info.Attempts[0].PayloadError, why) || info.Attempts[0].Error != "" {
			t.Errorf("Get: attempts %+v; want the error left out and why", info.Attempts)
		}
		scs, err := env.Engine.Schedules(ctx)
		if err != nil || len(scs) != 1 || !strings.Contains(scs[0].PayloadError, why) || scs[0].Input != nil {
			t.Errorf("Schedules: %+v, %v; want the schedule with its input left out and why", scs, err)
		}
		if si, err := env.Engine.GetSchedule(ctx, "sealed-nightly"); err != nil || !strings.Contains(si.PayloadError, why) {
			t.Errorf("GetSchedule: %+v, %v; want the schedule with its input left out and why", si, err)
		}
	})
}

package engine_test

import (
	"errors"
	"testing"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// A step that dead-letters before anything with a compensation completed
// leaves nothing to undo: the run fails (and can be resumed from the DLQ)
// rather than "compensating" nothing.
func TestFirstStepDeadWithNothingToUndoFailsRun(t *testing.T) {
	r := &recorder{}
	fail := func(sc steps.Context) error {
		if sc.Step == "reserve" && !sc.Compensation {
			return steps.Permanent(errors.New("no stock"))
		}
		return nil
	}
	wf := orderWorkflow(t, r, "order", 0, fail, true, nil)
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{wf}})
	info := env.Wait(t, env.Trigger(t, "order", nil))
	env.AssertRun(t, info, persistence.RunFailed)
	env.AssertStep(t, info, "reserve", persistence.StepDead)
	for _, s := range []string{"notify", "points", "ship"} {
		env.AssertStep(t, info, s, persistence.StepCancelled)
	}
	if n := len(r.find("reserve", true)); n != 0 {
		t.Errorf("the dead step's own compensation ran %d times", n)
	}
}

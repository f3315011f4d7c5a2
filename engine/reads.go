package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// What a step receives. The claim brings the outputs of the step's
// upstream steps, measured by the store before it loads them, within
// Config.MaxStepInput; readExtra adds those a claim that names its
// outputs (WithOutputs) did not bring but the step's `when` reads
// (dag.Step.Reads), and fails the step, without running it, when the
// whole is over the bound.

// readExtra completes sc.Outputs with the outputs of the steps that sdef
// reads besides its dependencies, and checks the step's input against
// Config.MaxStepInput. Its error is permanent (the same data would be
// over again), or the store's, which is retried.
func (e *Engine) readExtra(ctx context.Context, res persistence.StepClaimResult, sdef *dag.Step, sc *steps.Context) error {
	input, count := int64(len(res.Run.Input))+res.OutputBytes, res.OutputCount
	if res.OverMaxRead || input > e.cfg.MaxStepInput {
		return e.overMaxStepInput(sc.Step, len(res.Run.Input), res.OutputBytes, count)
	}
	reads := sdef.Reads()
	for _, name := range reads[len(sdef.Deps):] {
		if res.Upstream[name] != persistence.StepSucceeded {
			continue
		}
		if _, ok := sc.Outputs[name]; ok {
			continue
		}
		st, err := e.store.StepGet(ctx, res.Step.RunID, name)
		if err != nil {
			return fmt.Errorf("engine: step %q: read the output of step %q: %w", sc.Step, name, err)
		}
		if len(st.Output) == 0 {
			continue
		}
		input += int64(len(st.Output))
		count++
		if input > e.cfg.MaxStepInput {
			return e.overMaxStepInput(sc.Step, len(res.Run.Input), input-int64(len(res.Run.Input)), count)
		}
		if sc.Outputs == nil {
			sc.Outputs = make(map[string]json.RawMessage)
		}
		sc.Outputs[name] = json.RawMessage(st.Output)
	}
	return nil
}

// overMaxStepInput is the permanent error of a step that would receive
// more than Config.MaxStepInput.
func (e *Engine) overMaxStepInput(step string, input int, outputs int64, count int) error {
	return steps.Permanent(fmt.Errorf("engine: step %q would receive %s (input %s and %d outputs of %s), over Config.MaxStepInput of %s",
		step, byteSize(int64(input)+outputs), byteSize(int64(input)), count, byteSize(outputs), byteSize(e.cfg.MaxStepInput)))
}

// byteSize formats n bytes for a person: 7 B, 64.0 KiB, 2.5 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

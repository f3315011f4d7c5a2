package engine

import (
	"fmt"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// What a step receives: the claim brings the outputs of every step
// upstream of it (those a `when` reads among them), measured by the store
// before it loads them; checkStepInput holds the whole to
// Config.MaxStepInput.

// checkStepInput fails a claimed step, without running it, when its run's
// input and upstream outputs are over Config.MaxStepInput. The error is
// permanent: the same data would be over again.
func (e *Engine) checkStepInput(res persistence.StepClaimResult, step string) error {
	if res.OverMaxRead || int64(len(res.Run.Input))+res.OutputBytes > e.cfg.MaxStepInput {
		return e.overMaxStepInput(step, len(res.Run.Input), res.OutputBytes, res.OutputCount)
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

package faults

import (
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// waitStatus waits until a step has status want.
func waitStatus(t *testing.T, c *cluster, run, step string, want persistence.StepStatus, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, func() bool { return c.stepStatus(run, step) == want },
		"run %s step %s %s", run, step, want)
}

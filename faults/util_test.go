package faults

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// waitStatus waits until a step has status want.
func waitStatus(t *testing.T, c *cluster, run, step string, want persistence.StepStatus, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, func() bool { return c.stepStatus(run, step) == want },
		"run %s step %s %s", run, step, want)
}

func byPid(ws []*worker, pid int) *worker {
	for _, w := range ws {
		if w.pid == pid {
			return w
		}
	}
	panic("no worker with that pid")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func successes(info engine.RunInfo, step string) int {
	n := 0
	for _, a := range info.Attempts {
		if a.Step == step && a.Kind == persistence.AttemptForward && a.Outcome == persistence.OutcomeSucceeded {
			n++
		}
	}
	return n
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

//go:build !nodev

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// TestDevWatchShowsRetriesItDidNotSee: dev --once polls, and a retry's
// backoff can fall between two polls, so the watcher reads the retry from
// the step's attempts, not from the snapshot it happened to catch: a step
// seen running at attempt 1 and then at attempt 3 was retried twice, and
// each failed attempt is printed once, with its error.
func TestDevWatchShowsRetriesItDidNotSee(t *testing.T) {
	var out bytes.Buffer
	w := newDevWatch(&out)
	id := "01a2524d-38ac-7dd1-991d-093a79bbee4a"
	step := func(status persistence.StepStatus, attempt int) persistence.StepRun {
		return persistence.StepRun{RunID: id, Step: "notify", Status: status, Attempt: attempt}
	}
	failed := func(n int) persistence.Attempt {
		end := time.Now()
		return persistence.Attempt{RunID: id, Step: "notify", Kind: persistence.AttemptForward, Attempt: n,
			Outcome: persistence.OutcomeFailed, Error: "notify is flaky\nsecond line", FinishedAt: &end}
	}
	w.show(engine.RunInfo{Steps: []persistence.StepRun{step(persistence.StepRunning, 1)}})
	w.show(engine.RunInfo{Steps: []persistence.StepRun{step(persistence.StepRunning, 3)},
		Attempts: []persistence.Attempt{failed(1), failed(2)}})
	// A later poll that also catches a retrying state of attempt 2 prints
	// nothing new for it.
	w.show(engine.RunInfo{Steps: []persistence.StepRun{step(persistence.StepRunning, 3)},
		Attempts: []persistence.Attempt{failed(1), failed(2)}})
	got := out.String()
	for _, n := range []string{"attempt 1  notify is flaky", "attempt 2  notify is flaky"} {
		if strings.Count(got, "retrying") != 2 || !strings.Contains(got, n) {
			t.Fatalf("want two retrying lines, one with %q:\n%s", n, got)
		}
	}
	if strings.Contains(got, "second line") {
		t.Errorf("an error's later lines are printed:\n%s", got)
	}
	if !strings.Contains(got, "running              attempt 3") {
		t.Errorf("the step's current state is missing:\n%s", got)
	}
}

// TestDevWatchRetryingSnapshotOnce: a retrying state the poll does catch
// is printed once, not again when its attempt row is read.
func TestDevWatchRetryingSnapshotOnce(t *testing.T) {
	var out bytes.Buffer
	w := newDevWatch(&out)
	id := "01a2524d-38ac-7dd1-991d-093a79bbee4a"
	end := time.Now()
	a := persistence.Attempt{RunID: id, Step: "notify", Kind: persistence.AttemptForward, Attempt: 1,
		Outcome: persistence.OutcomeFailed, Error: "flaky", FinishedAt: &end}
	w.show(engine.RunInfo{Steps: []persistence.StepRun{{RunID: id, Step: "notify", Status: persistence.StepRetrying, Attempt: 1, Error: "flaky"}},
		Attempts: []persistence.Attempt{a}})
	w.show(engine.RunInfo{Steps: []persistence.StepRun{{RunID: id, Step: "notify", Status: persistence.StepRunning, Attempt: 2}},
		Attempts: []persistence.Attempt{a}})
	if got := out.String(); strings.Count(got, "retrying") != 1 {
		t.Errorf("want one retrying line:\n%s", got)
	}
}

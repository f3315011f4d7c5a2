//go:build !nodev

package main

import (
	"fmt"
	"io"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// devWatch prints a run's steps as dev --once sees them change. It polls,
// so a state that lasts less than a poll (a retry's short backoff) can
// fall between two looks; retries are therefore read from the step's
// attempts too, and each failed attempt that was retried is printed once
// whether or not a poll caught its retrying state.
type devWatch struct {
	out     io.Writer
	seen    map[string]string // run/step -> last printed status#attempt#comp
	retried map[string]bool   // run/step#attempt -> its retry is printed
}

func newDevWatch(out io.Writer) *devWatch {
	return &devWatch{out: out, seen: map[string]string{}, retried: map[string]bool{}}
}

// show prints what changed in info since the last look at its run.
func (w *devWatch) show(info engine.RunInfo) {
	current := map[string]persistence.StepRun{}
	for _, s := range info.Steps {
		current[s.Step] = s
	}
	for _, a := range info.Attempts {
		s, ok := current[a.Step]
		if !ok || a.Kind != persistence.AttemptForward || a.Outcome == persistence.OutcomeRunning ||
			a.Outcome == persistence.OutcomeSucceeded || a.Outcome == persistence.OutcomeSkipped {
			continue
		}
		if s.Attempt > a.Attempt || (s.Attempt == a.Attempt && s.Status == persistence.StepRetrying) {
			w.retry(s.RunID, a.Step, a.Attempt, a.Error)
		}
	}
	for _, s := range info.Steps {
		if s.Status == persistence.StepRetrying {
			w.retry(s.RunID, s.Step, s.Attempt, s.Error)
			continue
		}
		key := s.RunID + "/" + s.Step
		state := fmt.Sprintf("%s#%d#%d", s.Status, s.Attempt, s.CompAttempt)
		if w.seen[key] == state {
			continue
		}
		w.seen[key] = state
		extra := ""
		if s.Status == persistence.StepDead || s.Status == persistence.StepCompensationFailed {
			extra = "  " + cell(s.Error)
		}
		w.line(s.RunID, s.Step, s.Status, s.Attempt, extra)
	}
}

// retry prints that attempt n of a step failed and will be retried, once.
func (w *devWatch) retry(runID, step string, n int, errText string) {
	key := fmt.Sprintf("%s/%s#%d", runID, step, n)
	if w.retried[key] {
		return
	}
	w.retried[key] = true
	w.seen[runID+"/"+step] = fmt.Sprintf("%s#%d#0", persistence.StepRetrying, n)
	w.line(runID, step, persistence.StepRetrying, n, "  "+cell(errText))
}

func (w *devWatch) line(runID, step string, status persistence.StepStatus, attempt int, extra string) {
	fmt.Fprintf(w.out, "  %s  %-8s %-20s attempt %d%s\n", short(runID), step, status, attempt, extra)
}

package dag

import (
	"fmt"
	"slices"
)

// Outcome is what the plan needs to know about a step of a run.
type Outcome int

// Outcomes. A step missing from an outcomes map is Pending.
const (
	// Pending: not started yet (waiting for its dependencies). Ready
	// returns a Pending step once its dependencies are done.
	Pending Outcome = iota
	// Succeeded: done, its output available to its dependents.
	Succeeded
	// Skipped: done without running (its when was false, or a Needs
	// dependency was skipped).
	Skipped
	// Failed: dead-lettered or cancelled; its dependents never run.
	Failed
	// InProgress: queued, running or retrying. Not done, and never
	// returned by Ready (it is already on its way). Callers that do not
	// track it may report such steps as Pending and filter Ready's result.
	InProgress
)

// String returns "pending", "succeeded", "skipped" or "failed".
func (o Outcome) String() string {
	switch o {
	case Pending:
		return "pending"
	case Succeeded:
		return "succeeded"
	case Skipped:
		return "skipped"
	case Failed:
		return "failed"
	case InProgress:
		return "in progress"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Done reports whether the outcome lets dependents go on: Succeeded or
// Skipped.
func (o Outcome) Done() bool { return o == Succeeded || o == Skipped }

// Ready says what to do next given the outcomes so far (a step missing
// from the map is Pending). It looks at the Pending steps whose
// dependencies are all done (Succeeded or Skipped):
//
//   - skip: those with a [Needs] dependency that was Skipped;
//   - run: the others. Their [Step.EvalWhen] is still to be evaluated; a
//     false condition makes the engine skip them, and Ready is called again.
//
// skip is closed under propagation: a step whose Needs dependency is in
// skip is in skip too, and a step that is only [After] a step in skip is in
// run. So the engine can mark every skip as skipped and queue every run in
// one transaction. Both lists are in topological order ([Workflow.Order]).
// A step with a Failed dependency is never returned.
//
// Steps that are not Pending (InProgress included) are in neither list.
func (w *Workflow) Ready(outcomes map[string]Outcome) (run, skip []string) {
	skipped := make(map[string]bool)
	for _, name := range w.order {
		if outcomes[name] != Pending {
			continue
		}
		s := w.steps[w.index[name]]
		ready, needsSkipped := true, false
		for _, dep := range s.Deps {
			o := outcomes[dep]
			if skipped[dep] {
				o = Skipped
			}
			if !o.Done() {
				ready = false
				break
			}
			if o == Skipped && slices.Contains(s.Needs, dep) {
				needsSkipped = true
			}
		}
		switch {
		case !ready:
		case needsSkipped:
			skipped[name] = true
			skip = append(skip, name)
		default:
			run = append(run, name)
		}
	}
	return run, skip
}

// ShouldSkip reports whether step must be skipped because one of its
// [Needs] dependencies was Skipped. It is false for an unknown step.
func (w *Workflow) ShouldSkip(step string, outcomes map[string]Outcome) bool {
	s := w.Step(step)
	if s == nil {
		return false
	}
	for _, dep := range s.Needs {
		if outcomes[dep] == Skipped {
			return true
		}
	}
	return false
}

// CompensationReady returns the steps whose compensation may start now,
// in reverse topological order: completed, not yet compensated, and every
// completed transitive dependent of theirs already compensated. completed
// holds the steps that succeeded; compensated those whose compensation is
// done.
//
// Steps without a Compensation handler are returned like the others: they
// are ordering points only, and the engine marks them compensated without
// running anything. Independent branches are returned together and may
// be compensated in parallel.
func (w *Workflow) CompensationReady(completed, compensated map[string]bool) []string {
	var ready []string
	for k := len(w.order) - 1; k >= 0; k-- {
		name := w.order[k]
		if !completed[name] || compensated[name] {
			continue
		}
		blocked := false
		for _, j := range w.downstream(w.index[name]) {
			d := w.steps[j].Name
			if completed[d] && !compensated[d] {
				blocked = true
				break
			}
		}
		if !blocked {
			ready = append(ready, name)
		}
	}
	return ready
}

// CompensationOrder returns the whole compensation plan for the given
// completed steps as waves: every step of a wave may be compensated in
// parallel once the previous waves are done. It is [CompensationReady]
// applied until nothing is left.
func (w *Workflow) CompensationOrder(completed map[string]bool) [][]string {
	compensated := make(map[string]bool)
	var waves [][]string
	for {
		wave := w.CompensationReady(completed, compensated)
		if len(wave) == 0 {
			return waves
		}
		for _, name := range wave {
			compensated[name] = true
		}
		waves = append(waves, wave)
	}
}

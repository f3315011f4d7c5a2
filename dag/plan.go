package dag

import "fmt"

// Outcome is what [Workflow.ShouldSkip] needs to know about a step of a
// run: the engine maps the store's step statuses onto it.
type Outcome int

// Outcomes. A step missing from an outcomes map is Pending.
const (
	// Pending: not started yet (waiting for its dependencies).
	Pending Outcome = iota
	// Succeeded: done, its output available to its dependents.
	Succeeded
	// Skipped: done without running (its when was false, or a Needs
	// dependency was skipped).
	Skipped
	// Failed: dead-lettered or cancelled; its dependents never run.
	Failed
	// InProgress: queued, running or retrying; not done. Callers that do
	// not track it may report such steps as Pending.
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

// ShouldSkip reports whether step must be skipped because one of its
// [Needs] dependencies was Skipped. It is false for an unknown step.
//
// The engine calls it when it claims a step that has Needs dependencies,
// with the outcomes of the step's dependencies; a true result marks the
// step skipped without running it, which is how a skip propagates down a
// chain of Needs (the next step is claimed in turn and sees this one
// skipped).
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
//
// The engine calls it each time it advances a compensating run's saga,
// with completed and compensated read from the store, and queues the
// compensation of the steps it returns.
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
// parallel once the previous waves are done. It is
// [Workflow.CompensationReady] applied until nothing is left.
//
// It is a planning helper for tools that show a workflow rather than run
// it (listing what a failure at some point would undo, as an HTTP API or
// a dashboard does). The engine does not call it: it advances a saga one
// [Workflow.CompensationReady] at a time, from the steps' states in the
// store.
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

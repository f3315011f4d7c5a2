package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// RunInfo is a run with its steps and history.
type RunInfo struct {
	Run      persistence.Run
	Steps    []persistence.StepRun
	Attempts []persistence.Attempt
	// Actions are the operator actions on the run (retries, reruns,
	// skips), oldest first, with who did them and when.
	Actions []persistence.RunAction
	// Children are the child runs its `child` steps started, by step,
	// oldest first (Run.ParentRunID and Run.ParentStep name a child's
	// parent).
	Children []ChildRun
}

// ChildRun is a child run as its parent's RunInfo lists it.
type ChildRun struct {
	RunID    string
	Workflow string
	Step     string // the parent's step that started it
	Status   persistence.RunStatus
}

// Output returns the run's result: its output when it has one, else a
// JSON object mapping each final step (one no other step depends on)
// that succeeded to its output.
func (ri RunInfo) Output() json.RawMessage {
	if ri.Run.Output != nil {
		return ri.Run.Output
	}
	out := map[string]json.RawMessage{}
	for _, s := range ri.finalOutputs() {
		out[s.Step] = s.Output
	}
	b, _ := json.Marshal(out)
	return b
}

// OutputSize returns the length of what Output would return, without
// building it (a reader can decide whether to): exact when the final
// steps' outputs are compact JSON, as the store keeps them.
func (ri RunInfo) OutputSize() int {
	if ri.Run.Output != nil {
		return len(ri.Run.Output)
	}
	n := 2 // {}
	for i, s := range ri.finalOutputs() {
		if i > 0 {
			n++ // ,
		}
		n += len(s.Step) + 3 + len(s.Output) // "name":output
	}
	return n
}

// finalOutputs returns the steps whose outputs make the run's result:
// the final ones (no other step depends on them) that succeeded with an
// output.
func (ri RunInfo) finalOutputs() []persistence.StepRun {
	hasDependents := map[string]bool{}
	for _, s := range ri.Steps {
		for _, d := range s.Deps {
			hasDependents[d] = true
		}
	}
	var out []persistence.StepRun
	for _, s := range ri.Steps {
		if !hasDependents[s.Step] && s.Status == persistence.StepSucceeded && s.Output != nil {
			out = append(out, s)
		}
	}
	return out
}

// Step returns the named step of the run, or false.
func (ri RunInfo) Step(name string) (persistence.StepRun, bool) {
	for _, s := range ri.Steps {
		if s.Step == name {
			return s, true
		}
	}
	return persistence.StepRun{}, false
}

// Get returns a run with its steps and attempts, with their payloads
// decoded (Config.Codec). A payload that cannot be decoded (its key is
// not in the keyring) is left empty, and the record's PayloadError says
// why.
//
// With Config.ReadStore it reads the replica, unless ctx says ReadPrimary;
// a run the replica does not have yet (just triggered) is read from the
// primary.
func (e *Engine) Get(ctx context.Context, runID string) (RunInfo, error) {
	var ri RunInfo
	err := e.read(ctx, func(st persistence.Store) (err error) {
		ri, err = e.getFrom(ctx, st, runID)
		return err
	})
	return ri, err
}

// GetRun returns a run without its steps, its payloads decoded
// (Config.Codec): what a reader of one of its payloads needs. It reads
// like Get (the read replica, unless ctx says ReadPrimary).
func (e *Engine) GetRun(ctx context.Context, runID string) (persistence.Run, error) {
	var run persistence.Run
	err := e.read(ctx, func(st persistence.Store) (err error) {
		run, err = st.RunGet(ctx, runID)
		return err
	})
	if err != nil {
		return persistence.Run{}, err
	}
	if err := e.decodeRun(ctx, &run); err != nil {
		return persistence.Run{}, err
	}
	return run, nil
}

// GetStep returns one step of a run, its output and error decoded
// (Config.Codec). It reads like Get. A step the run does not have gives
// an error wrapping persistence.ErrStepNotFound.
func (e *Engine) GetStep(ctx context.Context, runID, step string) (persistence.StepRun, error) {
	var st persistence.StepRun
	err := e.read(ctx, func(s persistence.Store) (err error) {
		st, err = s.StepGet(ctx, runID, step)
		return err
	})
	if err != nil {
		return persistence.StepRun{}, err
	}
	sts := []persistence.StepRun{st}
	if err := e.decodeSteps(ctx, sts); err != nil {
		return persistence.StepRun{}, err
	}
	return sts[0], nil
}

// getFrom is Get on one store.
func (e *Engine) getFrom(ctx context.Context, st persistence.Store, runID string) (RunInfo, error) {
	run, err := st.RunGet(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	sts, err := st.StepList(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	atts, err := st.AttemptList(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	acts, err := st.RunActionList(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	children, err := st.RunChildren(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	e.markRun(ctx, &run)
	e.markSteps(ctx, sts)
	e.markAttempts(ctx, atts)
	ri := RunInfo{Run: run, Steps: sts, Attempts: atts, Actions: acts}
	for _, c := range children {
		ri.Children = append(ri.Children, ChildRun{RunID: c.ID, Workflow: c.Workflow, Step: c.ParentStep, Status: c.Status})
	}
	return ri, nil
}

// Wait blocks until the run is finished (succeeded, compensated, failed or
// cancelled) or ctx ends, and returns the run, its payloads decoded.
func (e *Engine) Wait(ctx context.Context, runID string) (persistence.Run, error) {
	delay := 5 * time.Millisecond
	for {
		run, err := e.store.RunGet(ctx, runID)
		if err != nil {
			return persistence.Run{}, err
		}
		if run.Status.Terminal() {
			if err := e.decodeRun(ctx, &run); err != nil {
				return persistence.Run{}, err
			}
			return run, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			if err := e.decodeRun(ctx, &run); err != nil {
				return persistence.Run{}, err
			}
			return run, ctx.Err()
		case <-t.C:
		}
		if delay < 200*time.Millisecond {
			delay = delay * 3 / 2
		}
	}
}

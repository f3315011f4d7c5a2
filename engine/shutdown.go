package engine

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// How Stop ends when handlers ignore their cancellation: it waits
// Config.StopGrace for them, then gives up on them (abandons them) rather
// than hang. Their leases were released and their tasks handed back
// before, so another node runs their steps at once; what an abandoned
// handler does when it returns at last is recorded nowhere (its execution
// is marked released, and the outcome paths check that before they
// write), and it finds nothing closed under it: the slot pool, the queue
// client and the store stay usable, and an outcome offered to committers
// that have ended is refused (complete, committer.go).

// ErrHandlersAbandoned is wrapped by Stop's error when handlers still ran
// StopGrace after Stop's context ended: Stop returned without them.
var ErrHandlersAbandoned = errors.New("engine: handlers abandoned at stop")

// StepRef names one step of one run.
type StepRef struct {
	RunID string
	Step  string
}

// AbandonedError is Stop's error when it abandoned handlers that ignored
// their cancellation. It wraps ErrHandlersAbandoned and the context's
// error that ended the wait.
type AbandonedError struct {
	// Steps are the abandoned handlers' steps, by run id then step.
	Steps []StepRef
	// Grace is how long Stop waited for them after its context ended.
	Grace time.Duration
	// Err is the context's error (context.DeadlineExceeded, usually).
	Err error
}

func (e *AbandonedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine: stop abandoned %d handler(s) still running %v after the stop deadline (their leases are released)", len(e.Steps), e.Grace)
	const show = 10
	for i, s := range e.Steps {
		if i == show {
			fmt.Fprintf(&b, ", and %d more", len(e.Steps)-show)
			break
		}
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%srun %s step %q", sep, s.RunID, s.Step)
	}
	return b.String()
}

// Unwrap makes errors.Is true for ErrHandlersAbandoned and for the
// context's error.
func (e *AbandonedError) Unwrap() []error { return []error{ErrHandlersAbandoned, e.Err} }

// awaitGrace waits up to StopGrace for done (every handler ended), once
// Stop's context ended with cause and the running steps were released and
// cancelled. It returns cause, or an *AbandonedError naming the handlers
// still running.
func (e *Engine) awaitGrace(cause error, done <-chan struct{}) error {
	if e.cfg.StopGrace > 0 {
		t := time.NewTimer(e.cfg.StopGrace)
		defer t.Stop()
		select {
		case <-done:
			return cause
		case <-t.C:
		}
	} else {
		select {
		case <-done:
			return cause
		default:
		}
	}
	err := &AbandonedError{Steps: e.inflightSteps(), Grace: max(e.cfg.StopGrace, 0), Err: cause}
	e.log.Error("stop abandoned handlers that ignore their cancellation", "handlers", len(err.Steps), "err", err)
	return err
}

// inflightSteps lists the steps whose goroutines are still running.
func (e *Engine) inflightSteps() []StepRef {
	e.inflightMu.Lock()
	refs := make([]StepRef, 0, len(e.inflight))
	for _, ex := range e.inflight {
		refs = append(refs, StepRef{RunID: ex.runID, Step: ex.step})
	}
	e.inflightMu.Unlock()
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].RunID != refs[j].RunID {
			return refs[i].RunID < refs[j].RunID
		}
		return refs[i].Step < refs[j].Step
	})
	return refs
}

package steps

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
)

// ErrNoOutput is returned by [Context.DecodeOutput] for a step whose output
// is not in the context (it is not upstream, it was skipped, or it
// returned no output).
var ErrNoOutput = errors.New("steps: no output")

// Context is what a handler knows about the step it runs. The engine builds
// it for every attempt; handlers treat it as read-only.
//
// A zero Context is usable: [Call] replaces a nil Logger with one that
// discards (carrying the attributes below), and fills an empty
// IdempotencyKey from RunID and Step.
type Context struct {
	// RunID identifies the workflow run.
	RunID string
	// Workflow is the workflow's name.
	Workflow string
	// Step is the step's name.
	Step string
	// Attempt is 1 for the first try and grows by one on every retry. An
	// operator's rerun of a completed step goes on counting after the
	// attempts of the execution it reruns.
	Attempt int
	// IdempotencyKey is "<run id>/<step>": the same on every attempt (and
	// for the compensation), so payment, mail or stock services given it can
	// drop repeats. See [IdempotencyKey]. A step an operator reran after it
	// had completed (a rerun from a step, or redoing work a compensation
	// undid) gets "<run id>/<step>/rerun-<n>" for its n-th rerun: a new
	// execution that a service must not answer with the earlier one.
	IdempotencyKey string
	// Compensation is true when the handler runs as the step's
	// compensation (undoing it after a later step was dead-lettered).
	Compensation bool
	// Input is the run's input as given to Trigger (JSON; may be empty).
	Input json.RawMessage
	// Outputs holds, by step name, the outputs of the step's upstream
	// steps (its dependencies, theirs, and so on) that succeeded with an
	// output. The store measures them before it loads them: a step that
	// would receive more than the engine's MaxStepInput fails instead.
	// For a compensation it holds the step's own output.
	Outputs map[string]json.RawMessage
	// Metadata is free-form run metadata (trigger, schedule, caller tags).
	Metadata map[string]string
	// Logger carries the run_id, workflow, step and attempt attributes (and
	// compensation=true for a compensation). It is never nil inside a
	// handler run by [Call].
	Logger *slog.Logger
}

// IdempotencyKey returns the stable key of a step of a run:
// "<run id>/<step>".
func IdempotencyKey(runID, step string) string { return runID + "/" + step }

// RerunKey returns the key of a step's n-th rerun by an operator (n > 0):
// "<run id>/<step>/rerun-<n>"; for n 0 it is IdempotencyKey's.
func RerunKey(runID, step string, n int) string {
	if n <= 0 {
		return IdempotencyKey(runID, step)
	}
	return IdempotencyKey(runID, step) + "/rerun-" + strconv.Itoa(n)
}

// WithLogger returns a copy of c whose Logger is base with the run_id,
// workflow, step and attempt attributes added (and compensation=true for a
// compensation). A nil base gives a logger that discards everything.
func (c Context) WithLogger(base *slog.Logger) Context {
	if base == nil {
		base = slog.New(slog.DiscardHandler)
	}
	attrs := []any{
		slog.String("run_id", c.RunID),
		slog.String("workflow", c.Workflow),
		slog.String("step", c.Step),
		slog.Int("attempt", c.Attempt),
	}
	if c.Compensation {
		attrs = append(attrs, slog.Bool("compensation", true))
	}
	c.Logger = base.With(attrs...)
	return c
}

// withDefaults fills the zero fields a handler relies on.
func (c Context) withDefaults() Context {
	if c.IdempotencyKey == "" && c.RunID != "" && c.Step != "" {
		c.IdempotencyKey = IdempotencyKey(c.RunID, c.Step)
	}
	if c.Logger == nil {
		c = c.WithLogger(nil)
	}
	return c
}

// DecodeInput decodes the run input into v, which must be a non-nil
// pointer. An empty input decodes like JSON null and leaves v unchanged.
// An input that does not decode into v gives an error naming the step and
// the type.
func (c Context) DecodeInput(v any) error {
	if err := decode(c.Input, v); err != nil {
		return fmt.Errorf("steps: step %q: decode input into %s: %w", c.Step, typeName(v), err)
	}
	return nil
}

// DecodeOutput decodes the output of the given upstream step into v. It
// returns an error wrapping [ErrNoOutput] when the context holds no output
// for that step.
func (c Context) DecodeOutput(step string, v any) error {
	raw, ok := c.Outputs[step]
	if !ok {
		return wrapf(ErrNoOutput, "steps: step %q: decode output of step %q: %s", c.Step, step, unprefixed(ErrNoOutput))
	}
	if err := decode(raw, v); err != nil {
		return fmt.Errorf("steps: step %q: decode output of step %q into %s: %w", c.Step, step, typeName(v), err)
	}
	return nil
}

func decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	return json.Unmarshal(raw, v)
}

// typeName names the type v points to, for error messages.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "<nil>"
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.String()
}

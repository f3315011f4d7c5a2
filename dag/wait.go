package dag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/steps"
)

// WaitKind is what a wait step waits for.
type WaitKind string

// Wait kinds.
const (
	// WaitEvent completes when an event of a name and correlation value
	// is published (or when the step is signalled).
	WaitEvent WaitKind = "event"
	// WaitSignal completes when the step is signalled (human approval).
	WaitSignal WaitKind = "signal"
	// WaitSleep completes when its time comes (a durable timer).
	WaitSleep WaitKind = "sleep"
	// WaitChild starts a run of another workflow (a child) and completes
	// with its output when it succeeds ([Child]).
	WaitChild WaitKind = "child"
)

// Wait is a wait or sleep step's declaration: such a step runs no
// handler. The engine parks it (a row in the store: no worker slot, lease
// or Redis entry) until its event, its signal or its time comes.
type Wait struct {
	Kind WaitKind
	// Event is the event name a WaitEvent step waits for.
	Event string
	// Correlate is the expression whose value (over the run's input and
	// upstream outputs, as for `when`) an event must carry to match.
	Correlate string
	// Timeout fails a WaitEvent or WaitSignal step that waited this long
	// (through its retry policy, then the dead-letter queue and the
	// saga); zero waits forever.
	Timeout time.Duration
	// Sleep is a WaitSleep step's duration from when it becomes ready;
	// Until, instead, an expression giving the time it wakes (an RFC 3339
	// string, a time, or Unix seconds).
	Sleep time.Duration
	Until string
	// Workflow is the workflow a WaitChild step starts; Input, the
	// expression (over the run's input and upstream outputs, as for
	// `when`) whose value is the child's input: empty, the parent run's
	// input.
	Workflow string
	Input    string

	corr, until, input *vm.Program
	refs               []string
}

// WaitOption configures [WaitFor] and [WaitForSignal].
type WaitOption func(*Wait)

// Correlate sets the expression whose value an event must carry (as its
// correlation) to complete the step, e.g. "input.order_id".
func Correlate(expr string) WaitOption { return func(w *Wait) { w.Correlate = expr } }

// WaitTimeout fails the step when no event (or signal) came within d of
// its parking; the retry policy applies, then the dead-letter queue.
func WaitTimeout(d time.Duration) WaitOption { return func(w *Wait) { w.Timeout = d } }

// WaitFor makes the step wait for an event named event whose correlation
// equals the value of its [Correlate] expression; the event's payload is
// its output. A signal ([engine.Engine.Signal]) completes it too. Give
// the step a nil handler.
func WaitFor(event string, opts ...WaitOption) StepOption {
	w := &Wait{Kind: WaitEvent, Event: event}
	for _, o := range opts {
		if o != nil {
			o(w)
		}
	}
	return func(c *stepConfig) { cp := *w; c.wait = &cp }
}

// WaitForSignal makes the step wait for a signal (human approval): the
// signal's payload is its output. [WaitTimeout] applies. Give the step a
// nil handler.
func WaitForSignal(opts ...WaitOption) StepOption {
	w := &Wait{Kind: WaitSignal}
	for _, o := range opts {
		if o != nil {
			o(w)
		}
	}
	return func(c *stepConfig) { cp := *w; c.wait = &cp }
}

// Sleep makes the step a durable timer that completes, with no output, d
// after it became ready. Give the step a nil handler.
func Sleep(d time.Duration) StepOption {
	return func(c *stepConfig) { c.wait = &Wait{Kind: WaitSleep, Sleep: d} }
}

// SleepUntil makes the step a durable timer that completes at the time
// expr gives (evaluated once, when the step becomes ready, over the run's
// input and upstream outputs): an RFC 3339 string, a time, or Unix
// seconds. Give the step a nil handler.
func SleepUntil(expr string) StepOption {
	return func(c *stepConfig) { c.wait = &Wait{Kind: WaitSleep, Until: expr} }
}

// Input sets the expression whose value (over the run's input and the
// upstream outputs, as for `when`) is a [Child] step's child run input,
// e.g. `{"order": input.order_id, "total": steps.price.output.total}`.
// Without it the child gets the parent run's input.
func Input(expr string) WaitOption { return func(w *Wait) { w.Input = expr } }

// Child makes the step start a run of workflow (a child workflow) and
// complete with the child's output: the output of its final step (the one
// no other step depends on), or, with several final steps, an object of
// their outputs by step name. The step holds no worker slot while the
// child runs. The child's failure fails the step (its retry policy, then
// the dead-letter queue and the saga); [WaitTimeout] bounds how long it
// waits (the child is then cancelled). Give the step a nil handler.
func Child(workflow string, opts ...WaitOption) StepOption {
	w := &Wait{Kind: WaitChild, Workflow: workflow}
	for _, o := range opts {
		if o != nil {
			o(w)
		}
	}
	return func(c *stepConfig) { cp := *w; c.wait = &cp }
}

// waitHandler is the handler of a wait step: the engine parks the step
// instead of calling it.
type waitHandler struct{}

func (waitHandler) Handle(context.Context, steps.Context) (json.RawMessage, error) {
	return nil, steps.Permanent(errors.New("dag: a wait step is parked, not run"))
}

// check validates a wait declaration of step and compiles its
// expressions.
func (w *Wait) check(v *validator, step string) {
	bad := func(format string, args ...any) {
		v.add(step, ErrInvalidOption, "step %q: "+format, append([]any{step}, args...)...)
	}
	if w.Timeout < 0 {
		bad("wait timeout %s is negative", w.Timeout)
	}
	switch w.Kind {
	case WaitEvent:
		if !names.ValidEvent(w.Event) {
			bad("wait for event %q: not a valid event name (must match %s)", w.Event, names.EventPattern)
		}
		if w.Correlate == "" {
			bad("wait for event %q needs a correlate expression", w.Event)
		} else if p, refs, err := compileValue(w.Correlate); err != nil {
			v.add(step, ErrBadCondition, "step %q: correlate %q does not compile: %v", step, w.Correlate, err)
		} else {
			w.corr, w.refs = p, refs
		}
	case WaitChild:
		if !names.Valid(w.Workflow) {
			bad("child workflow %q: not a valid workflow name", w.Workflow)
		}
		if w.Event != "" || w.Correlate != "" {
			bad("a child step takes no event or correlate")
		}
		if w.Input != "" {
			if p, refs, err := compileValue(w.Input); err != nil {
				v.add(step, ErrBadCondition, "step %q: child input %q does not compile: %v", step, w.Input, err)
			} else {
				w.input, w.refs = p, refs
			}
		}
	case WaitSignal:
		if w.Event != "" || w.Correlate != "" {
			bad("a wait for a signal takes no event or correlate")
		}
	case WaitSleep:
		switch {
		case w.Until != "":
			if p, refs, err := compileValue(w.Until); err != nil {
				v.add(step, ErrBadCondition, "step %q: sleep until %q does not compile: %v", step, w.Until, err)
			} else {
				w.until, w.refs = p, refs
			}
		case w.Sleep <= 0:
			bad("sleep %s: want a positive duration", w.Sleep)
		}
	default:
		bad("unknown wait kind %q", w.Kind)
	}
}

// compileValue compiles an expression over the `when` environment that
// yields any value, with the nil-safe member access of conditions.
func compileValue(src string) (*vm.Program, []string, error) {
	c := &condition{}
	prog, err := expr.Compile(src, expr.Env(whenEnv{}), expr.MaxNodes(MaxWhenNodes),
		expr.Function(stopCheck, checkStop), expr.Patch(&nilSafe{cond: c}), expr.Patch(loopCheck{}))
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, nil, fmt.Errorf("%s", msg)
	}
	return prog, c.refs, nil
}

// evalValue runs a compiled value expression over a run's data.
func evalValue(ctx context.Context, prog *vm.Program, input json.RawMessage, outputs map[string]json.RawMessage) (any, error) {
	in, err := decodeJSON(input)
	if err != nil {
		return nil, fmt.Errorf("decode input: %w", err)
	}
	stepEnv := make(map[string]any, len(outputs))
	for name, raw := range outputs {
		out, err := decodeJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("decode output of step %q: %w", name, err)
		}
		stepEnv[name] = map[string]any{"output": out}
	}
	env := whenEnv{Input: in, Steps: stepEnv, Stop: new(atomic.Bool)}
	return evaluate(ctx, prog, env, env.Stop)
}

// CorrelationValue evaluates a WaitEvent step's Correlate expression for
// a run: a string, a number or a boolean, as text. Errors (a nil value, an
// object) wrap [ErrEvalCondition]: the data does not fit the step.
func (w *Wait) CorrelationValue(ctx context.Context, input json.RawMessage, outputs map[string]json.RawMessage) (string, error) {
	if w.corr == nil {
		return "", fmt.Errorf("%w: no correlate expression", ErrEvalCondition)
	}
	v, err := evalValue(ctx, w.corr, input, outputs)
	if err != nil {
		return "", fmt.Errorf("%w: correlate %q: %w", ErrEvalCondition, w.Correlate, err)
	}
	s, ok := CorrelationText(v)
	if !ok {
		return "", fmt.Errorf("%w: correlate %q: value %v (%T) is not a string, number or boolean", ErrEvalCondition, w.Correlate, v, v)
	}
	if s == "" {
		return "", fmt.Errorf("%w: correlate %q: the value is empty", ErrEvalCondition, w.Correlate)
	}
	return s, nil
}

// CorrelationText is the text a correlation value is matched as: a
// string as is, an integral number without a fraction ("1001"), other
// numbers in Go's shortest form, a boolean as "true" or "false".
func CorrelationText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return strconv.FormatInt(int64(x), 10), true
		}
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

// ChildInput is the input of a WaitChild step's child run: the value of
// its Input expression as JSON, or the parent run's input without one.
// Errors wrap [ErrEvalCondition]: the data does not fit the step.
func (w *Wait) ChildInput(ctx context.Context, input json.RawMessage, outputs map[string]json.RawMessage) (json.RawMessage, error) {
	if w.input == nil {
		return input, nil
	}
	v, err := evalValue(ctx, w.input, input, outputs)
	if err != nil {
		return nil, fmt.Errorf("%w: child input %q: %w", ErrEvalCondition, w.Input, err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: child input %q: value %v (%T) is not JSON: %v", ErrEvalCondition, w.Input, v, v, err)
	}
	return raw, nil
}

// WakeAt is when a WaitSleep step that became ready at ready wakes: ready
// plus Sleep, or the value of Until.
func (w *Wait) WakeAt(ctx context.Context, ready time.Time, input json.RawMessage, outputs map[string]json.RawMessage) (time.Time, error) {
	if w.until == nil {
		return ready.Add(w.Sleep), nil
	}
	v, err := evalValue(ctx, w.until, input, outputs)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: sleep until %q: %w", ErrEvalCondition, w.Until, err)
	}
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: sleep until %q: %q is not an RFC 3339 time", ErrEvalCondition, w.Until, x)
		}
		return t, nil
	case float64:
		sec, frac := math.Modf(x)
		return time.Unix(int64(sec), int64(frac*1e9)), nil
	case int:
		return time.Unix(int64(x), 0), nil
	}
	return time.Time{}, fmt.Errorf("%w: sleep until %q: value %v (%T) is not a time", ErrEvalCondition, w.Until, v, v)
}

// WaitDefinition is a wait step's part of a [StepDefinition].
type WaitDefinition struct {
	Kind      string `json:"kind"`
	Event     string `json:"event,omitempty"`
	Correlate string `json:"correlate,omitempty"`
	Timeout   string `json:"timeout,omitempty"`
	Sleep     string `json:"sleep,omitempty"`
	Until     string `json:"until,omitempty"`
	Workflow  string `json:"workflow,omitempty"`
	Input     string `json:"input,omitempty"`
}

func (w *Wait) definition() *WaitDefinition {
	if w == nil {
		return nil
	}
	d := &WaitDefinition{Kind: string(w.Kind), Event: w.Event, Correlate: w.Correlate, Until: w.Until, Workflow: w.Workflow, Input: w.Input}
	if w.Timeout > 0 {
		d.Timeout = w.Timeout.String()
	}
	if w.Sleep > 0 {
		d.Sleep = w.Sleep.String()
	}
	return d
}

// option turns a wait definition back into its builder option.
func (d *WaitDefinition) option(workflow, step string) (StepOption, error) {
	dur := func(field, v string) (time.Duration, error) {
		if v == "" {
			return 0, nil
		}
		t, err := time.ParseDuration(v)
		if err != nil {
			return 0, &DefinitionError{Workflow: workflow, Step: step, Err: ErrInvalidOption,
				Reason: fmt.Sprintf("step %q: wait.%s %q is not a duration", step, field, v)}
		}
		return t, nil
	}
	timeout, err := dur("timeout", d.Timeout)
	if err != nil {
		return nil, err
	}
	sleep, err := dur("sleep", d.Sleep)
	if err != nil {
		return nil, err
	}
	w := &Wait{Kind: WaitKind(d.Kind), Event: d.Event, Correlate: d.Correlate, Timeout: timeout, Sleep: sleep, Until: d.Until,
		Workflow: d.Workflow, Input: d.Input}
	return func(c *stepConfig) { cp := *w; c.wait = &cp }, nil
}

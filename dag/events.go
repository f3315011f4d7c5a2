package dag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/expr-lang/expr"

	"github.com/dagflow/dagflow/internal/names"
)

// Event subscriptions: the events that start runs of a workflow
// ([OnEvent]), each with an optional filter over the event's payload
// ([Filter]). They are part of the workflow's plan (Definition.On), so
// that a node without the workflow's handlers knows which events start it.

// ErrBadFilter reports an event filter that does not compile, or an event
// name that is not valid, in a *[DefinitionError].
var ErrBadFilter = errors.New("dag: bad event subscription")

// ErrEvalFilter is wrapped by the errors of [Subscription.Match]: the
// filter compiled but failed on this event's payload.
var ErrEvalFilter = errors.New("dag: event filter failed")

// ValidEventName reports whether s is allowed as an event name: a letter
// followed by up to 127 letters, digits, '_', '-' or '.' ("order.placed").
func ValidEventName(s string) bool { return names.ValidEvent(s) }

// EventNameRule explains an event name that is not valid.
const EventNameRule = "want " + names.EventRule

// EventOption configures a subscription in [OnEvent].
type EventOption func(*subscriptionConfig)

type subscriptionConfig struct {
	filter string
}

// Filter sets the condition an event must meet to start a run, an expr
// expression over `event`, the event's payload decoded from JSON:
// `event.total >= 100`. It follows the rules of [When] (missing fields are
// nil, a nil result is false, a non-boolean result is an error) and is
// compiled by Build: a filter that does not compile is a build error
// naming the workflow and the filter.
func Filter(expr string) EventOption { return func(c *subscriptionConfig) { c.filter = expr } }

// OnEvent makes every published event called name start a run of the
// workflow, with the event's payload as the run's input, when the
// event's payload passes the [Filter] (if one is given). A workflow may
// subscribe to several events; subscribing twice to the same event is a
// build error.
func OnEvent(name string, opts ...EventOption) WorkflowOption {
	return func(c *workflowConfig) {
		var sc subscriptionConfig
		for _, o := range opts {
			if o != nil {
				o(&sc)
			}
		}
		c.on = append(c.on, subscriptionDecl{event: name, filter: sc.filter})
	}
}

type subscriptionDecl struct {
	event, filter string
}

// Subscription is one event a workflow starts on, with its compiled
// filter.
type Subscription struct {
	// Event is the event's name.
	Event string
	// Filter is the filter's source, empty when every event of the name
	// starts a run.
	Filter string

	workflow string
	prog     *condition
}

// SubscriptionDefinition is a [Subscription] in a [Definition].
type SubscriptionDefinition struct {
	// Event is the event's name.
	Event string `json:"event"`
	// When is the filter's source, empty when every event matches.
	When string `json:"when,omitempty"`
}

// Subscriptions returns the events that start the workflow, in
// declaration order.
func (w *Workflow) Subscriptions() []Subscription {
	out := make([]Subscription, len(w.on))
	for i, s := range w.on {
		out[i] = *s
	}
	return out
}

// Subscribed returns the workflow's subscription to the named event, or
// nil.
func (w *Workflow) Subscribed(event string) *Subscription {
	for _, s := range w.on {
		if s.Event == event {
			return s
		}
	}
	return nil
}

// filterEnv is what a filter sees.
type filterEnv struct {
	Event any          `expr:"event"`
	Stop  *atomic.Bool `expr:"__dagflow_stop"`
}

// compileFilter compiles an event filter as compileWhen compiles a
// condition (nil-safe member access, stoppable loops, bounded size).
func compileFilter(src string) (*condition, error) {
	c := &condition{}
	prog, err := expr.Compile(src, expr.Env(filterEnv{}), expr.AsBool(), expr.MaxNodes(MaxWhenNodes),
		expr.Function(stopCheck, checkStop), expr.Patch(&nilSafe{cond: c}), expr.Patch(loopCheck{}))
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, fmt.Errorf("%s", msg)
	}
	c.prog = prog
	return c, nil
}

// subscriptions validates and compiles the declared subscriptions.
func subscriptions(v *validator, workflow string, decls []subscriptionDecl) []*Subscription {
	var out []*Subscription
	seen := make(map[string]bool, len(decls))
	for _, d := range decls {
		if !ValidEventName(d.event) {
			v.add("", ErrBadFilter, "on event %q: invalid event name (%s)", d.event, EventNameRule)
			continue
		}
		if seen[d.event] {
			v.add("", ErrBadFilter, "on event %q: subscribed twice", d.event)
			continue
		}
		seen[d.event] = true
		s := &Subscription{Event: d.event, Filter: d.filter, workflow: workflow}
		if d.filter != "" {
			prog, err := compileFilter(d.filter)
			if err != nil {
				v.add("", ErrBadFilter, "on event %q: filter %q does not compile: %v", d.event, d.filter, err)
				continue
			}
			s.prog = prog
		}
		out = append(out, s)
	}
	return out
}

// Match reports whether an event's payload (JSON; nil for none) passes
// the subscription's filter; true without a filter. Errors wrap
// [ErrEvalFilter] and name the workflow, the event and the filter: the
// payload does not fit the filter (a number compared with a string, say),
// which publishing again will not fix. The evaluation stops when ctx
// ends, as [Step.EvalWhen]'s does.
func (s *Subscription) Match(ctx context.Context, payload json.RawMessage) (bool, error) {
	if s.prog == nil {
		return true, nil
	}
	fail := func(format string, args ...any) (bool, error) {
		msg := fmt.Sprintf("dag: workflow %q: on event %q: filter %q: %s: %s",
			s.workflow, s.Event, s.Filter, unprefixed(ErrEvalFilter), fmt.Sprintf(format, args...))
		return false, &sentinelError{sentinel: ErrEvalFilter, msg: msg}
	}
	if ctx.Err() != nil {
		return fail("stopped: %v", context.Cause(ctx))
	}
	ev, err := decodeJSON(payload)
	if err != nil {
		return fail("decode payload: %v", err)
	}
	env := filterEnv{Event: ev, Stop: new(atomic.Bool)}
	res, err := evaluate(ctx, s.prog.prog, env, env.Stop)
	if err != nil {
		return fail("%v", err)
	}
	switch r := res.(type) {
	case bool:
		return r, nil
	case nil:
		return false, nil
	}
	return fail("result %v (%T) is not a boolean", res, res)
}

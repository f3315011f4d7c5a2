package dag

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dagflow/dagflow/steps"
)

// Definition is a workflow's plan without its code: what any node needs
// to list the workflow, draw its graph, start runs of it and follow a run
// on the plan it started with, whether or not the node has the handlers.
// The engine stores it when a node registers the workflow; its JSON form
// is the stored and served one.
type Definition struct {
	// Name is the workflow's name.
	Name string `json:"name"`
	// Declared is the version the workflow declares ([Version]).
	Declared int `json:"declared_version"`
	// Steps are the steps in declaration order.
	Steps []StepDefinition `json:"steps"`
	// On lists the events that start the workflow ([OnEvent]), in
	// declaration order. It is omitted when empty, so that the plans
	// without subscriptions keep their hashes.
	On []SubscriptionDefinition `json:"on,omitempty"`
	// ExampleInput is the workflow's example input ([ExampleInput]) and
	// InputSchema the JSON Schema its inputs must match ([InputSchema]),
	// both canonical JSON; omitted when not declared (the plans without
	// them keep their hashes).
	ExampleInput json.RawMessage `json:"example_input,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
}

// StepDefinition is one step of a [Definition], every default resolved.
//
// Its JSON form is hashed ([Definition.Hash]): a field added later must be
// omitempty, so that the plans that do not use it keep their versions.
type StepDefinition struct {
	// Name is the step's name.
	Name string `json:"name"`
	// Deps lists every dependency in declaration order; Needs is the
	// subset given with [Needs] (the others were given with [After]).
	Deps  []string `json:"deps,omitempty"`
	Needs []string `json:"needs,omitempty"`
	// When is the condition's source, empty when the step always runs.
	When  string          `json:"when,omitempty"`
	Queue string          `json:"queue"`
	Retry RetryDefinition `json:"retry"`
	// Timeout bounds each attempt, as a Go duration ("5m0s").
	Timeout string `json:"timeout"`
	// Compensation says the step has a compensation handler.
	Compensation bool `json:"compensation"`
	// Kind is "http" for a built-in HTTP step ([KindHTTP]), empty for a
	// step running a handler; HTTP then says where it goes (never with
	// a header's value).
	Kind string          `json:"kind,omitempty"`
	HTTP *HTTPDefinition `json:"http,omitempty"`
	// Wait describes a wait or sleep step; omitted for the others.
	Wait *WaitDefinition `json:"wait,omitempty"`
	// Limits are the step's own limits; omitted for none.
	Limits *LimitsDefinition `json:"limits,omitempty"`
}

// RetryDefinition is a resolved [RetryPolicy] with its durations written
// as Go durations ("1s").
type RetryDefinition struct {
	// MaxAttempts is RetryPolicy.MaxAttempts.
	MaxAttempts int `json:"max_attempts"`
	// InitialBackoff and MaxBackoff are RetryPolicy's, as Go durations.
	InitialBackoff string `json:"initial_backoff"`
	MaxBackoff     string `json:"max_backoff"`
	// Multiplier is RetryPolicy.Multiplier.
	Multiplier float64 `json:"multiplier"`
	// Jitter is the resolved RetryPolicy.Jitter, in [0, 1] (0: none).
	Jitter float64 `json:"jitter"`
}

// Definition returns the workflow's plan without its code.
func (w *Workflow) Definition() Definition {
	d := Definition{Name: w.name, Declared: w.version, Steps: make([]StepDefinition, len(w.steps)),
		ExampleInput: w.ExampleInput(), InputSchema: w.InputSchema()}
	for _, s := range w.on {
		d.On = append(d.On, SubscriptionDefinition{Event: s.Event, When: s.Filter})
	}
	for i, s := range w.steps {
		d.Steps[i] = StepDefinition{
			Name:  s.Name,
			Deps:  slices.Clone(s.Deps),
			Needs: slices.Clone(s.Needs),
			When:  s.When,
			Queue: s.Queue,
			Retry: RetryDefinition{
				MaxAttempts:    s.Retry.MaxAttempts,
				InitialBackoff: s.Retry.InitialBackoff.String(),
				MaxBackoff:     s.Retry.MaxBackoff.String(),
				Multiplier:     s.Retry.Multiplier,
				Jitter:         s.Retry.Jitter,
			},
			Timeout:      s.Timeout.String(),
			Compensation: s.Compensation != nil,
			Wait:         s.Wait.definition(),
			Limits:       s.Limits.definition(),
		}
		switch h := s.Handler.(type) {
		case *steps.HTTP:
			d.Steps[i].Kind, d.Steps[i].HTTP = KindHTTP, httpDefinition(h)
		default:
			if s.http != nil {
				// Built from a stored definition: its kind stays.
				d.Steps[i].Kind, d.Steps[i].HTTP = KindHTTP, s.http
			}
		}
	}
	return d
}

// Hash identifies the plan: 16 hexadecimal digits of the SHA-256 of its
// JSON form. Two definitions with the same steps, dependencies,
// conditions, queues, policies and compensations have the same hash, on
// every node and in every process; any change to one of them changes it.
func (d Definition) Hash() string {
	b, err := json.Marshal(d)
	if err != nil {
		// A Definition holds strings, numbers and slices of them only;
		// Marshal fails only on a NaN or infinite float, which a built
		// workflow's policy never has.
		panic(fmt.Sprintf("dag: definition of %q: %v", d.Name, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ParseDefinition decodes a definition's JSON form and checks it by
// building it ([FromDefinition] without handlers).
func ParseDefinition(b []byte) (Definition, error) {
	var d Definition
	if err := json.Unmarshal(b, &d); err != nil {
		return Definition{}, fmt.Errorf("dag: definition: %w", err)
	}
	if _, err := FromDefinition(d, nil); err != nil {
		return Definition{}, err
	}
	return d, nil
}

// missingHandler stands in, during Build, for a handler the node does
// not have; FromDefinition clears it afterwards.
type missingHandler struct{}

func (missingHandler) Handle(context.Context, steps.Context) (json.RawMessage, error) {
	return nil, errors.New("dag: step has no handler on this node")
}

var noHandler steps.Handler = missingHandler{}

// FromDefinition builds the workflow that d describes, for the plan it
// carries (dependencies, conditions, queues, policies): the steps take
// their handlers and compensations from handlers, the same workflow as
// registered on this node (nil: none), by step name. A step that handlers
// does not have keeps a stand-in handler that fails, and
// [Step.HasHandler] (or [Step.HasCompensationHandler]) reports it: the
// node can follow a run on this plan (its dependencies, conditions and
// undo order), but must leave that step to a node that has it. The
// definition is validated as [Builder.Build] validates a declaration, and
// its name must be handlers' name.
func FromDefinition(d Definition, handlers *Workflow) (*Workflow, error) {
	if handlers != nil && handlers.name != d.Name {
		return nil, fmt.Errorf("dag: definition of %q built with the handlers of %q", d.Name, handlers.name)
	}
	wopts := []WorkflowOption{Version(d.Declared)}
	for _, s := range d.On {
		wopts = append(wopts, OnEvent(s.Event, Filter(s.When)))
	}
	wopts = append(wopts, d.inputOptions()...)
	b := New(d.Name, wopts...)
	for _, s := range d.Steps {
		opts, err := s.options(d.Name)
		if err != nil {
			return nil, err
		}
		var h, comp steps.Handler = noHandler, nil
		if handlers != nil {
			if hs := handlers.Step(s.Name); hs != nil {
				h, comp = hs.Handler, hs.Compensation
			}
		}
		if s.Compensation {
			if comp == nil {
				comp = noHandler
			}
			opts = append(opts, Compensate(comp))
		}
		if s.Kind != "" {
			if s.Kind != KindHTTP || s.HTTP == nil {
				return nil, &DefinitionError{Workflow: d.Name, Step: s.Name, Err: ErrUnknownKind,
					Reason: fmt.Sprintf("step %q: unknown kind %q", s.Name, s.Kind)}
			}
			opts = append(opts, storedHTTP(s.HTTP))
		}
		b.Step(s.Name, h, opts...)
	}
	return b.Build()
}

// HasHandler reports whether the step's handler is this node's code: it
// is false only for a step of a plan built by [FromDefinition] that the
// node's own workflow lacks.
func (s *Step) HasHandler() bool { return !isNoHandler(s.Handler) }

// HasCompensationHandler reports whether the step has a compensation and
// this node has its code (see [Step.HasHandler]).
func (s *Step) HasCompensationHandler() bool {
	return s.Compensation != nil && !isNoHandler(s.Compensation)
}

func isNoHandler(h steps.Handler) bool {
	_, ok := h.(missingHandler)
	return ok
}

func isWaitHandler(h steps.Handler) bool {
	_, ok := h.(waitHandler)
	return ok
}

// options turns the step's resolved settings back into builder options.
func (s StepDefinition) options(workflow string) ([]StepOption, error) {
	dur := func(field, v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, &DefinitionError{Workflow: workflow, Step: s.Name, Err: ErrInvalidOption,
				Reason: fmt.Sprintf("step %q: %s %q is not a duration", s.Name, field, v)}
		}
		return d, nil
	}
	initial, err := dur("retry.initial_backoff", s.Retry.InitialBackoff)
	if err != nil {
		return nil, err
	}
	maxBackoff, err := dur("retry.max_backoff", s.Retry.MaxBackoff)
	if err != nil {
		return nil, err
	}
	timeout, err := dur("timeout", s.Timeout)
	if err != nil {
		return nil, err
	}
	jitter := s.Retry.Jitter
	if jitter == 0 {
		jitter = NoJitter // a resolved 0 is "none", not "inherit"
	}
	needs := make(map[string]bool, len(s.Needs))
	for _, n := range s.Needs {
		needs[n] = true
	}
	opts := []StepOption{
		Retry(RetryPolicy{MaxAttempts: s.Retry.MaxAttempts, InitialBackoff: initial, MaxBackoff: maxBackoff,
			Multiplier: s.Retry.Multiplier, Jitter: jitter}),
		Timeout(timeout),
		Queue(s.Queue),
	}
	for _, dep := range s.Deps {
		if needs[dep] {
			opts = append(opts, Needs(dep))
		} else {
			opts = append(opts, After(dep))
		}
	}
	for _, n := range s.Needs {
		if !slices.Contains(s.Deps, n) {
			opts = append(opts, Needs(n))
		}
	}
	if s.When != "" {
		opts = append(opts, When(s.When))
	}
	if s.Wait != nil {
		o, err := s.Wait.option(workflow, s.Name)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	if s.Limits != nil {
		o, err := s.Limits.option()
		if err != nil {
			return nil, &DefinitionError{Workflow: workflow, Step: s.Name, Err: ErrInvalidOption,
				Reason: fmt.Sprintf("step %q: %v", s.Name, err)}
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// Graph is a workflow's plan as nodes and edges, for drawing.
type Graph struct {
	Nodes []GraphNode `json:"nodes"`
	Edges []GraphEdge `json:"edges"`
}

// GraphNode is one step of a [Graph].
type GraphNode struct {
	// ID is the step's name.
	ID string `json:"id"`
	// Queue is the step's queue.
	Queue string `json:"queue"`
	// When is the step's condition, empty when it always runs.
	When string `json:"when,omitempty"`
	// Compensation says the step has a compensation.
	Compensation bool `json:"compensation"`
}

// GraphEdge goes from a dependency to its dependent; Kind is "needs" for
// a dependency given with [Needs], "after" for one given with [After].
type GraphEdge struct {
	// From is the dependency, To the dependent step.
	From string `json:"from"`
	To   string `json:"to"`
	// Kind is "needs" or "after".
	Kind string `json:"kind"`
}

// Graph returns the definition's nodes (declaration order) and edges
// (grouped by dependent, in dependency order).
func (d Definition) Graph() Graph {
	g := Graph{Nodes: make([]GraphNode, len(d.Steps)), Edges: []GraphEdge{}}
	for i, s := range d.Steps {
		g.Nodes[i] = GraphNode{ID: s.Name, Queue: s.Queue, When: s.When, Compensation: s.Compensation}
		for _, dep := range s.Deps {
			kind := "after"
			if slices.Contains(s.Needs, dep) {
				kind = "needs"
			}
			g.Edges = append(g.Edges, GraphEdge{From: dep, To: s.Name, Kind: kind})
		}
	}
	return g
}

// Mermaid renders the definition as [Workflow.Mermaid] does; a definition
// that does not build renders as an empty flowchart.
func (d Definition) Mermaid() string {
	w, err := FromDefinition(d, nil)
	if err != nil {
		return "flowchart TD\n"
	}
	return w.Mermaid()
}

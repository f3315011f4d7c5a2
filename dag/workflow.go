package dag

import (
	"slices"
	"time"

	"github.com/dagflow/dagflow/steps"
)

// Workflow is a validated DAG of steps, made by [Builder.Build] or loaded
// from YAML. It is immutable and safe for concurrent use; the *Step values
// it hands out are shared and must be treated as read-only.
type Workflow struct {
	name       string
	version    int
	steps      []*Step        // declaration order
	index      map[string]int // name -> position in steps
	dependents [][]int        // direct dependents of steps[i], declaration order
	order      []string
	on         []*Subscription // OnEvent, declaration order
	input      inputSpec       // ExampleInput, InputSchema
}

// Step is one node of a workflow, with every default resolved.
type Step struct {
	// Name is unique within the workflow.
	Name string
	// Deps lists every dependency (given with After or Needs) in the
	// order they were declared, without repeats.
	Deps []string
	// Needs is the subset of Deps given with Needs: if one of them is
	// skipped, this step is skipped too.
	Needs []string
	// Handler does the step's work.
	Handler steps.Handler
	// Compensation undoes the step; nil when the step has nothing to undo.
	Compensation steps.Handler
	// Retry is the resolved retry policy (every field set, Jitter in
	// [0, 1]).
	Retry RetryPolicy
	// Timeout bounds each attempt (default [DefaultStepTimeout]).
	Timeout time.Duration
	// Queue is the queue the step's tasks go to (default
	// [DefaultQueueName]).
	Queue string
	// When is the condition's source, empty when the step always runs.
	When string
	// Wait, when set, makes the step a wait or sleep step ([WaitFor],
	// [WaitForSignal], [Sleep], [SleepUntil]): it runs no handler.
	Wait *Wait
	// Limits is the step's own flow control ([ConcurrencyKey],
	// [RateLimit]); nil for none.
	Limits *Limits

	workflow string
	cond     *condition
	reads    []string        // see Reads
	http     *HTTPDefinition // an HTTP step's, when built from a stored definition
}

// Name returns the workflow's name.
func (w *Workflow) Name() string { return w.name }

// Version returns the workflow's version (1 unless set).
func (w *Workflow) Version() int { return w.version }

// Steps returns the steps in declaration order. The slice is a copy; the
// steps are shared.
func (w *Workflow) Steps() []*Step { return slices.Clone(w.steps) }

// Step returns the named step, or nil if the workflow has none.
func (w *Workflow) Step(name string) *Step {
	i, ok := w.index[name]
	if !ok {
		return nil
	}
	return w.steps[i]
}

// Order returns the step names in a topological order: every step after
// all its dependencies. It is deterministic: among the steps that could
// come next, the one declared first does.
//
// It is a planning helper for tools that show a workflow rather than run
// it (drawing or listing its steps, as an HTTP API or a dashboard does).
// The engine does not call it: it gives the store every step with its
// dependencies when it creates a run, and the store queues a step when
// its last dependency succeeds or is skipped.
func (w *Workflow) Order() []string { return slices.Clone(w.order) }

// Roots returns the steps without dependencies, in declaration order: the
// steps a new run queues first.
func (w *Workflow) Roots() []string {
	var roots []string
	for _, s := range w.steps {
		if len(s.Deps) == 0 {
			roots = append(roots, s.Name)
		}
	}
	return roots
}

// Dependents returns the steps that depend directly on name, in
// declaration order (nil for an unknown step).
func (w *Workflow) Dependents(name string) []string {
	i, ok := w.index[name]
	if !ok {
		return nil
	}
	var out []string
	for _, j := range w.dependents[i] {
		out = append(out, w.steps[j].Name)
	}
	return out
}

// link fills the dependents lists from the known dependencies.
func (w *Workflow) link() {
	w.dependents = make([][]int, len(w.steps))
	for j, s := range w.steps {
		for _, dep := range s.Deps {
			if i, ok := w.index[dep]; ok && i != j {
				w.dependents[i] = append(w.dependents[i], j)
			}
		}
	}
}

// findCycle returns a dependency cycle as a path that starts and ends with
// the same step (the earliest declared of the cycle), or nil. Self
// dependencies are reported separately and ignored here.
func (w *Workflow) findCycle() []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(w.steps))
	var stack []int
	var found []int
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, i)
		for _, j := range w.dependents[i] {
			switch color[j] {
			case grey:
				k := slices.Index(stack, j)
				found = slices.Clone(stack[k:])
				return true
			case white:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range w.steps {
		if color[i] == white && visit(i) {
			break
		}
	}
	if found == nil {
		return nil
	}
	first := slices.Index(found, slices.Min(found))
	found = append(found[first:], found[:first]...)
	path := make([]string, 0, len(found)+1)
	for _, i := range found {
		path = append(path, w.steps[i].Name)
	}
	return append(path, path[0])
}

// topoOrder is Kahn's algorithm taking the earliest declared ready step
// each time. The graph is acyclic.
func (w *Workflow) topoOrder() []string {
	indeg := make([]int, len(w.steps))
	for i := range w.steps {
		for _, j := range w.dependents[i] {
			indeg[j]++
		}
	}
	order := make([]string, 0, len(w.steps))
	done := make([]bool, len(w.steps))
	for len(order) < len(w.steps) {
		next := -1
		for i := range w.steps {
			if !done[i] && indeg[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 { // unreachable for an acyclic graph
			break
		}
		done[next] = true
		order = append(order, w.steps[next].Name)
		for _, j := range w.dependents[next] {
			indeg[j]--
		}
	}
	return order
}

// upstream returns the transitive dependencies of name.
func (w *Workflow) upstream(name string) map[string]bool {
	seen := make(map[string]bool)
	var walk func(string)
	walk = func(n string) {
		s := w.Step(n)
		if s == nil {
			return
		}
		for _, d := range s.Deps {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(name)
	return seen
}

// downstream returns the transitive dependents of steps[i].
func (w *Workflow) downstream(i int) []int {
	seen := make([]bool, len(w.steps))
	var out []int
	var walk func(int)
	walk = func(i int) {
		for _, j := range w.dependents[i] {
			if !seen[j] {
				seen[j] = true
				out = append(out, j)
				walk(j)
			}
		}
	}
	walk(i)
	return out
}

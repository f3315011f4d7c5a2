package dag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// condition is a compiled `when`.
type condition struct {
	prog *vm.Program
	refs []string // step names read as steps.<name>, in order of appearance
	// dynamic is set when steps is indexed by a computed key, so every
	// output has to be decoded.
	dynamic bool
}

// whenEnv is what a condition sees. Values are untyped (decoded JSON), so
// type errors surface at evaluation, not at compile time; unknown
// variables are compile errors.
type whenEnv struct {
	Input any            `expr:"input"`
	Steps map[string]any `expr:"steps"`
	// Stop is the evaluation's stop flag, read by every iteration of a
	// loop (see loopCheck).
	Stop *atomic.Bool `expr:"__dagflow_stop"`
}

// MaxWhenNodes bounds the size of a `when` condition: the number of nodes
// (names, literals, operators, calls) of its syntax tree. Conditions are
// short tests on a run's data; the bound keeps compiling one, at
// definition load, cheap whatever the source.
const MaxWhenNodes = 1000

// Names of the stop check that compileWhen adds to every loop.
const (
	stopVar   = "__dagflow_stop"
	stopCheck = "__dagflow_check"
)

// errStopped is what the stop check returns once the evaluation's
// context ended; EvalWhen reports the context's cause instead.
var errStopped = errors.New("dag: condition evaluation stopped")

// compileWhen compiles src once, with member access made nil-safe (see
// Step.EvalWhen), every loop made to stop when the evaluation's context
// ends (see loopCheck), and the referenced steps collected.
func compileWhen(src string) (*condition, error) { return compileExpr(src, true) }

// compileExpr compiles an expression over the `when` environment: a
// condition (asBool) or an HTTP step's body template (any value).
func compileExpr(src string, asBool bool) (*condition, error) {
	c := &condition{}
	opts := []expr.Option{expr.Env(whenEnv{}), expr.MaxNodes(MaxWhenNodes),
		expr.Function(stopCheck, checkStop), expr.Patch(&nilSafe{cond: c}), expr.Patch(loopCheck{})}
	if asBool {
		opts = append(opts, expr.AsBool())
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		// expr appends a snippet with a caret on more lines; keep the
		// first line (message and position) so the error stays one line.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, fmt.Errorf("%s", msg)
	}
	c.prog = prog
	return c, nil
}

// nilSafe turns every member access a.b into a?.b, so that reading a field
// of a missing value gives nil instead of an error, and records which steps
// the condition reads.
type nilSafe struct{ cond *condition }

func (v *nilSafe) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok || m.Method {
		return
	}
	if id, ok := m.Node.(*ast.IdentifierNode); ok && id.Value == "steps" {
		if s, ok := m.Property.(*ast.StringNode); ok {
			if !contains(v.cond.refs, s.Value) {
				v.cond.refs = append(v.cond.refs, s.Value)
			}
		} else {
			v.cond.dynamic = true
		}
	}
	// Children are visited first: a.b is already a chain when a.b.c is
	// visited; merge it so that one chain covers the whole path.
	if ch, ok := m.Node.(*ast.ChainNode); ok {
		m.Node = ch.Node
	}
	m.Optional = true
	ast.Patch(node, &ast.ChainNode{Node: m})
}

// loopCheck makes every loop of a condition stoppable. expr's VM cannot
// be interrupted, and the only loops a condition can make are the
// predicates of all, any, filter, map, reduce and the other builtins that
// take one (there are no user functions and no recursion). Each predicate
// body p becomes (__dagflow_check(__dagflow_stop); p): an atomic load per
// iteration (about the cost of the cheapest body, # > 0), which returns
// an error, and so ends the run, once EvalWhen's context has ended.
// Without a predicate, work is linear (or n log n) in the data, which the
// payload limits bound.
type loopCheck struct{}

func (loopCheck) Visit(node *ast.Node) {
	p, ok := (*node).(*ast.PredicateNode)
	if !ok {
		return
	}
	check := &ast.CallNode{Callee: &ast.IdentifierNode{Value: stopCheck}, Arguments: []ast.Node{&ast.IdentifierNode{Value: stopVar}}}
	p.Node = &ast.SequenceNode{Nodes: []ast.Node{check, p.Node}}
}

// checkStop is the stop check: an error once the flag is set.
func checkStop(args ...any) (any, error) {
	if len(args) == 1 {
		if stop, ok := args[0].(*atomic.Bool); ok && stop.Load() {
			return nil, errStopped
		}
	}
	return nil, nil
}

// Reads returns the steps whose outputs the step receives, for its
// condition and its handler (steps.Context.Outputs): its dependencies
// (Deps), then the other steps its When condition reads
// (steps.<name>.output), in name order, or every other upstream step when
// the condition picks steps by a computed key (steps[input.k]).
func (s *Step) Reads() []string { return slices.Clone(s.reads) }

// condReads is Reads for a step with a condition; up is its upstream.
func (s *Step) condReads(up map[string]bool) []string {
	var extra []string
	for n := range up {
		if !slices.Contains(s.Deps, n) && (s.cond.dynamic || slices.Contains(s.cond.refs, n)) {
			extra = append(extra, n)
		}
	}
	if len(extra) == 0 {
		return s.Deps
	}
	slices.Sort(extra)
	return append(slices.Clone(s.Deps), extra...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// EvalWhen evaluates the step's condition for a run; true means run the
// step, false skip it. It is true when When is empty. The condition was
// compiled once by Build.
//
// The environment is:
//
//   - input: the run input decoded from JSON (objects are maps, numbers
//     float64, null is nil);
//   - steps.<name>.output: the decoded output of an upstream step (only
//     upstream steps may be named; Build checks it).
//
// A missing value is nil, at any depth: input.total when the input has no
// total, steps.reserve.output.warehouse when reserve was skipped or
// returned no output. nil compares equal to nil and unequal to everything
// else, so `steps.reserve.output.warehouse == "EU"` is simply false. Using
// nil where a number or string is required (input.total >= 100 without a
// total, len(nil)) is an evaluation error like any other type mismatch
// (`"abc" >= 100`); give a default with ?? when a field is optional:
// `(input.total ?? 0) >= 100`. A result that is nil counts as false; a
// result that is not a boolean is an error.
//
// Errors wrap [ErrEvalCondition] and name the workflow, the step and the
// condition. They mean the data does not fit the condition, which retrying
// will not fix: the engine fails the step as it would for a permanent
// error.
//
// The evaluation stops when ctx ends, or runs over ctx's budget
// ([WithExprBudget]), within one iteration of the loop it is in, and
// returns an error that wraps ErrEvalCondition and ctx's cause
// (context.Cause), or the *[ExprBudgetError]: give ctx a budget to bound
// the CPU time a condition may take on hostile or unexpectedly large
// data. No goroutine is left running.
func (s *Step) EvalWhen(ctx context.Context, input json.RawMessage, outputs map[string]json.RawMessage) (bool, error) {
	if s.cond == nil {
		return true, nil
	}
	fail := func(format string, args ...any) (bool, error) {
		return false, &sentinelError{sentinel: ErrEvalCondition, msg: s.failMsg(format, args...)}
	}
	stopped := func(se *stopError) (bool, error) {
		return false, &stoppedError{msg: s.failMsg("%v", se), cause: se.cause}
	}
	if ctx.Err() != nil {
		return stopped(&stopError{cause: context.Cause(ctx)})
	}
	in, err := decodeJSON(input)
	if err != nil {
		return fail("decode input: %v", err)
	}
	stepEnv := make(map[string]any)
	for name, raw := range outputs {
		if !s.cond.dynamic && !contains(s.cond.refs, name) {
			continue
		}
		out, err := decodeJSON(raw)
		if err != nil {
			return fail("decode output of step %q: %v", name, err)
		}
		stepEnv[name] = map[string]any{"output": out}
	}
	env := whenEnv{Input: in, Steps: stepEnv, Stop: new(atomic.Bool)}
	res, err := evaluate(ctx, s.cond.prog, env, env.Stop)
	var se *stopError
	if errors.As(err, &se) {
		return stopped(se)
	}
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

func (s *Step) failMsg(format string, args ...any) string {
	return fmt.Sprintf("dag: workflow %q: step %q: when %q: %s: %s",
		s.workflow, s.Name, s.When, unprefixed(ErrEvalCondition), fmt.Sprintf(format, args...))
}

// stoppedError is the error of an evaluation its context stopped: it is
// an ErrEvalCondition and wraps the context's cause.
type stoppedError struct {
	msg   string
	cause error
}

func (e *stoppedError) Error() string   { return e.msg }
func (e *stoppedError) Unwrap() []error { return []error{ErrEvalCondition, e.cause} }

func decodeJSON(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	err := json.Unmarshal(raw, &v)
	return v, err
}

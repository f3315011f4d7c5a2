package dag

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// budgetKey is the context key of WithExprBudget.
type budgetKey struct{}

// ExprBudgetError is the cause of an evaluation that ran over the time
// budget given with [WithExprBudget]. Running over is permanent: the same
// data would run over again, so the engine fails the step at once.
type ExprBudgetError struct {
	Budget time.Duration
	// Setting names the setting the budget comes from, for the message
	// ("Config.WhenBudget"); it may be empty.
	Setting string
}

// Error returns "dag: expression ran over its time budget of <budget>
// (<setting>)".
func (e *ExprBudgetError) Error() string {
	msg := fmt.Sprintf("dag: expression ran over its time budget of %v", e.Budget)
	if e.Setting != "" {
		msg += " (" + e.Setting + ")"
	}
	return msg
}

// WithExprBudget returns a copy of ctx under which each expression this
// package evaluates gets at most budget of time: a `when` condition, an
// HTTP step's body, a wait's correlate, a sleep's until, a child's input,
// a limit key and an event filter, each evaluation a budget of its own.
// One that runs over stops within one loop iteration with an error
// wrapping an *[ExprBudgetError]; setting names the budget's setting in
// it. A budget of 0 or less sets none: ctx alone bounds the evaluation.
func WithExprBudget(ctx context.Context, budget time.Duration, setting string) context.Context {
	return context.WithValue(ctx, budgetKey{}, &ExprBudgetError{Budget: budget, Setting: setting})
}

// stopError is the error of an evaluation that its context, or its
// budget, stopped: "stopped: <cause>", wrapping the cause.
type stopError struct{ cause error }

func (e *stopError) Error() string { return "stopped: " + e.cause.Error() }
func (e *stopError) Unwrap() error { return e.cause }

// overBudget reports whether err is an evaluation that ran over its
// budget.
func overBudget(err error) bool {
	var be *ExprBudgetError
	return errors.As(err, &be)
}

// evaluate runs prog on env, whose stop flag is stop: the one place an
// expression of a workflow runs. It applies ctx's budget (WithExprBudget)
// and stops the evaluation, within one iteration of the loop it is in
// (see loopCheck), when ctx or the budget ends, with a *stopError. An
// expression error is returned as its first line. No goroutine is left
// running.
func evaluate(ctx context.Context, prog *vm.Program, env any, stop *atomic.Bool) (any, error) {
	if b, ok := ctx.Value(budgetKey{}).(*ExprBudgetError); ok && b.Budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, b.Budget, b)
		defer cancel()
	}
	if ctx.Err() != nil {
		return nil, &stopError{cause: context.Cause(ctx)}
	}
	defer context.AfterFunc(ctx, func() { stop.Store(true) })()
	res, err := expr.Run(prog, env)
	if stop.Load() || errors.Is(err, errStopped) {
		// Cut short, or only just done: either way ctx ended, and a
		// builtin that recovers panics may have hidden the stop.
		return nil, &stopError{cause: context.Cause(ctx)}
	}
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, errors.New(msg)
	}
	return res, nil
}

package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

// quadratic walks xs once for each of its elements: 400 million steps on
// 20,000 elements.
const quadratic = "len(filter(input.xs, {any(input.xs, {# == -1})}))"

// quadraticInput is {"xs": [0, 1, ..., 19999]}.
func quadraticInput() json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"xs":[0`)
	for i := 1; i < 20000; i++ {
		b.WriteString("," + strconv.Itoa(i))
	}
	b.WriteString("]}")
	return json.RawMessage(b.String())
}

// TestExprBudgetBody renders an HTTP step's quadratic body under a
// budget: it stops at the budget with a permanent error naming it (the
// same data would run over again), where the step's own deadline alone
// would have let it run and then retried.
func TestExprBudgetBody(t *testing.T) {
	src := "name: pay\nsteps:\n  - name: charge\n    kind: http\n    url: https://pay.example/charges\n    body: '" + quadratic + "'\n"
	w, err := dag.LoadYAML([]byte(src), "pay.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := w.Step("charge").Handler.(*steps.HTTP)
	sc := steps.Context{Step: "charge", Input: quadraticInput()}
	ctx := dag.WithExprBudget(context.Background(), 100*time.Millisecond, "Config.WhenBudget")
	start := time.Now()
	_, err = h.Body(ctx, sc)
	took := time.Since(start)
	var be *dag.ExprBudgetError
	if !errors.As(err, &be) || be.Budget != 100*time.Millisecond || !steps.IsPermanent(err) {
		t.Fatalf("Body = %v; want a permanent *dag.ExprBudgetError of 100ms", err)
	}
	want := `dag: step "charge": body "` + quadratic + `": stopped: dag: expression ran over its time budget of 100ms (Config.WhenBudget)`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Body error = %q; want it to contain %q", err, want)
	}
	if took > 5*time.Second {
		t.Errorf("Body returned after %v with a 100ms budget", took)
	}

	// The step's own deadline, not the budget: a retryable stop.
	dctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err = h.Body(dctx, sc); !errors.Is(err, context.DeadlineExceeded) || steps.IsPermanent(err) || errors.As(err, &be) {
		t.Errorf("Body at the step's deadline = %v; want a retryable deadline error", err)
	}
}

// TestExprBudgetLimitKeys evaluates a quadratic concurrency key under a
// budget: an error that is a *dag.ExprBudgetError.
func TestExprBudgetLimitKeys(t *testing.T) {
	w, err := dag.New("w").Step("s", noop, dag.ConcurrencyKey(quadratic, 1)).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := dag.WithExprBudget(context.Background(), 100*time.Millisecond, "")
	_, _, err = w.Step("s").LimitKeys(ctx, quadraticInput())
	var be *dag.ExprBudgetError
	if !errors.As(err, &be) {
		t.Fatalf("LimitKeys = %v; want a *dag.ExprBudgetError", err)
	}
	if want := `dag: workflow "w": step "s": limit key "` + quadratic + `": stopped: dag: expression ran over its time budget of 100ms`; err.Error() != want {
		t.Errorf("LimitKeys error = %q; want %q", err, want)
	}
}

// TestExprBudgetWhen: a condition under a budget stops with an
// ErrEvalCondition that is a *dag.ExprBudgetError.
func TestExprBudgetWhen(t *testing.T) {
	w, err := dag.New("w").Step("s", noop, dag.When(quadratic+" > 0")).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := dag.WithExprBudget(context.Background(), 100*time.Millisecond, "")
	_, err = w.Step("s").EvalWhen(ctx, quadraticInput(), nil)
	var be *dag.ExprBudgetError
	if !errors.As(err, &be) || !errors.Is(err, dag.ErrEvalCondition) {
		t.Fatalf("EvalWhen = %v; want an ErrEvalCondition that is a *dag.ExprBudgetError", err)
	}
}

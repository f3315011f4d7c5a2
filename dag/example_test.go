package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

// The order workflow: reserve stock, then notify the customer and award
// loyalty points (only for big orders) in parallel, then ship.
func ExampleNew() {
	step := func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil }
	h := steps.HandlerFunc(step)

	w, err := dag.New("order", dag.DefaultTimeout(30*time.Second)).
		Step("reserve", h, dag.Compensate(h)).
		Step("notify", h, dag.After("reserve"), dag.Queue("mail")).
		Step("points", h, dag.After("reserve"), dag.When("input.total >= 100"), dag.Compensate(h)).
		Step("ship", h, dag.After("notify", "points"), dag.Retry(dag.RetryPolicy{MaxAttempts: 3})).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.Order())
	fmt.Print(w.Mermaid())
	// Output:
	// [reserve notify points ship]
	// flowchart TD
	//     reserve["reserve"]
	//     notify["notify"]
	//     points["points<br/>when: input.total #gt;= 100"]
	//     ship["ship"]
	//     reserve --> notify
	//     reserve --> points
	//     notify --> ship
	//     points --> ship
}

// Validation names the workflow, the step and the problem.
func ExampleBuilder_Build() {
	h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
	_, err := dag.New("order").
		Step("reserve", h, dag.After("ship")).
		Step("ship", h, dag.After("reserve", "pack")).
		Build()
	fmt.Println(err)
	// Output:
	// dag: workflow "order": step "ship" depends on unknown step "pack"
	// dag: workflow "order": dependency cycle: reserve -> ship -> reserve
}

// ShouldSkip is asked when a step with Needs dependencies is claimed.
func ExampleWorkflow_ShouldSkip() {
	h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
	w, _ := dag.New("order").
		Step("reserve", h).
		Step("points", h, dag.After("reserve"), dag.When("input.total >= 100")).
		Step("email_points", h, dag.Needs("points")).
		Step("ship", h, dag.After("points")).
		Build()

	// points' condition was false, so the engine skipped it.
	outcomes := map[string]dag.Outcome{"reserve": dag.Succeeded, "points": dag.Skipped}
	fmt.Println("email_points:", w.ShouldSkip("email_points", outcomes))
	fmt.Println("ship:", w.ShouldSkip("ship", outcomes))
	// Output:
	// email_points: true
	// ship: false
}

// Compensation runs backwards in waves; a wave may run in parallel. A
// tool can list this plan; the engine walks it with CompensationReady.
func ExampleWorkflow_CompensationOrder() {
	h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
	w, _ := dag.New("order").
		Step("reserve", h, dag.Compensate(h)).
		Step("charge", h, dag.After("reserve"), dag.Compensate(h)).
		Step("points", h, dag.After("reserve"), dag.Compensate(h)).
		Step("ship", h, dag.After("charge", "points")).
		Build()

	// ship was dead-lettered after the others completed.
	fmt.Println(w.CompensationOrder(map[string]bool{"reserve": true, "charge": true, "points": true}))
	// Output:
	// [[points charge] [reserve]]
}

// A time budget for each expression evaluated under a context: a
// condition that loops over its data inside a loop over it stops at the
// budget with an *ExprBudgetError instead of running for minutes.
func ExampleWithExprBudget() {
	w, err := dag.New("w").Step("s", noop, dag.When("all(input.xs, {all(input.xs, {# >= 0})})")).Build()
	if err != nil {
		panic(err)
	}
	xs := make([]int, 20000)
	in, _ := json.Marshal(map[string]any{"xs": xs})
	ctx := dag.WithExprBudget(context.Background(), 50*time.Millisecond, "my budget")
	_, err = w.Step("s").EvalWhen(ctx, in, nil)
	var be *dag.ExprBudgetError
	fmt.Println(errors.As(err, &be), be)
	// Output: true dag: expression ran over its time budget of 50ms (my budget)
}

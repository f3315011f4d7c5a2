package dag_test

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

// noop is a handler that does nothing.
var noop = steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })

// orderWorkflow is the Go declaration of the order workflow that
// workflows/order.yaml describes too.
func orderWorkflow() *dag.Builder {
	return dag.New("order",
		dag.Version(1),
		dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2, Jitter: 1}),
		dag.DefaultTimeout(30*time.Second),
	).
		Step("reserve", noop, dag.Compensate(noop), dag.Timeout(10*time.Second)).
		Step("notify", noop, dag.After("reserve"), dag.Queue("mail"),
			dag.Retry(dag.RetryPolicy{MaxAttempts: 10, InitialBackoff: 5 * time.Second, MaxBackoff: 10 * time.Minute})).
		Step("points", noop, dag.After("reserve"), dag.When("input.total >= 100"), dag.Compensate(noop)).
		Step("ship", noop, dag.Needs("reserve"), dag.After("notify", "points"),
			dag.Retry(dag.RetryPolicy{MaxAttempts: 3}), dag.Timeout(2*time.Minute))
}

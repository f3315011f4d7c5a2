package steps_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dagflow/dagflow/steps"
)

// A typed step: the run input is decoded into Order and the returned
// Reservation becomes the step's JSON output.
func ExampleTyped() {
	type Order struct {
		ID    string  `json:"id"`
		Total float64 `json:"total"`
	}
	type Reservation struct {
		Warehouse string `json:"warehouse"`
		Key       string `json:"key"`
	}
	reserve := steps.Typed(func(ctx context.Context, sc steps.Context, o Order) (Reservation, error) {
		if o.ID == "" {
			// Retrying cannot fix a malformed order: dead-letter now.
			return Reservation{}, steps.Permanent(errors.New("order without id"))
		}
		// Pass sc.IdempotencyKey to the stock service so that a retried
		// attempt does not reserve twice.
		return Reservation{Warehouse: "EU", Key: sc.IdempotencyKey}, nil
	})

	sc := steps.Context{RunID: "run-42", Workflow: "order", Step: "reserve", Attempt: 1,
		Input: json.RawMessage(`{"id":"o-1","total":120}`)}
	out, err := steps.Call(context.Background(), reserve, sc)
	fmt.Println(string(out), err)

	sc.Input = json.RawMessage(`{"total":120}`)
	_, err = steps.Call(context.Background(), reserve, sc)
	fmt.Println(err, steps.IsPermanent(err))
	// Output:
	// {"warehouse":"EU","key":"run-42/reserve"} <nil>
	// order without id true
}

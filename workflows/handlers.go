package workflows

import (
	"context"
	"errors"
	"fmt"

	"github.com/dagflow/dagflow/steps"
)

// Order is the input of the order workflow.
type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Total    float64 `json:"total"`
	// Fail names a step that fails permanently, to watch compensation in
	// `dagflow dev` (demo only).
	Fail string `json:"fail,omitempty"`
}

// Reservation is the output of the reserve step.
type Reservation struct {
	Warehouse string `json:"warehouse"`
	Key       string `json:"key"`
}

// Done is the output of the other demo steps.
type Done struct {
	Step string `json:"step"`
	Key  string `json:"key"`
}

// Register adds the demo handlers named by order.yaml to reg:
// order.reserve, order.release, order.notify, order.points,
// order.revoke_points and order.ship. They only log what a real
// implementation would do, with the step's idempotency key; an input with
// "fail": "<step>" makes that step fail permanently.
func Register(reg *steps.Registry) error {
	return errors.Join(
		reg.Register("order.reserve", steps.Typed(reserve)),
		reg.Register("order.release", steps.Typed(demo("released stock"))),
		reg.Register("order.notify", steps.Typed(demo("sent confirmation"))),
		reg.Register("order.points", steps.Typed(demo("awarded points"))),
		reg.Register("order.revoke_points", steps.Typed(demo("revoked points"))),
		reg.Register("order.ship", steps.Typed(demo("shipped"))),
	)
}

func check(sc steps.Context, o Order) error {
	if o.Fail != "" && o.Fail == sc.Step && !sc.Compensation {
		return steps.Permanent(fmt.Errorf("order %s: step %s fails on request", o.ID, sc.Step))
	}
	return nil
}

func reserve(ctx context.Context, sc steps.Context, o Order) (Reservation, error) {
	if err := check(sc, o); err != nil {
		return Reservation{}, err
	}
	sc.Logger.InfoContext(ctx, "reserved stock", "order", o.ID, "key", sc.IdempotencyKey)
	return Reservation{Warehouse: "EU", Key: sc.IdempotencyKey}, nil
}

func demo(what string) func(context.Context, steps.Context, Order) (Done, error) {
	return func(ctx context.Context, sc steps.Context, o Order) (Done, error) {
		if err := check(sc, o); err != nil {
			return Done{}, err
		}
		sc.Logger.InfoContext(ctx, what, "order", o.ID, "key", sc.IdempotencyKey)
		return Done{Step: sc.Step, Key: sc.IdempotencyKey}, nil
	}
}

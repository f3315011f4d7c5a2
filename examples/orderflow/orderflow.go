// Package orderflow is dagflow's running example: order processing.
//
//	reserve ──> notify ──┐
//	        └─> points ──┴─> ship
//
// reserve holds stock, notify mails the customer, points awards loyalty
// points (only for orders of 100 or more), and ship books the parcel. Each
// external effect goes to a Services value that deduplicates by the step's
// idempotency key, as a real payment, mail or stock service would, so a
// step that runs twice (at-least-once delivery) has its effect once.
// reserve and points have compensations: when ship dead-letters, the points
// are taken back and the stock is released.
//
// Inputs steer the example: FailStep makes that step fail permanently (to
// show compensation) and FlakyStep makes it fail twice before succeeding
// (to show retries).
package orderflow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

// Order is the workflow input.
type Order struct {
	OrderID  string  `json:"order_id"`
	Customer string  `json:"customer"`
	SKU      string  `json:"sku"`
	Quantity int     `json:"quantity"`
	Total    float64 `json:"total"`
	// FailStep, when set, makes that step fail permanently.
	FailStep string `json:"fail_step,omitempty"`
	// FlakyStep, when set, makes that step fail on its first two attempts.
	FlakyStep string `json:"flaky_step,omitempty"`
	// FailOnceStep, when set, makes that step fail permanently on its
	// first call only: it is dead-lettered, and retrying the dead letter
	// (once its "cause is fixed") moves the run on.
	FailOnceStep string `json:"fail_once_step,omitempty"`
}

// Example is the order the workflow declares as its example input
// (dag.ExampleInput): a dashboard's trigger form starts from it.
var Example = Order{OrderID: "order-1001", Customer: "ada@example.com", SKU: "SKU-42", Quantity: 1, Total: 120}

// InputSchema is the JSON Schema the workflow's inputs must match
// (dag.InputSchema): points' condition compares input.total, so an order
// without a numeric total is refused when triggered rather than failing
// (and compensating) at points.
const InputSchema = `{
  "type": "object",
  "required": ["total"],
  "properties": {
    "order_id": {"type": "string"},
    "total": {"type": "number"}
  }
}`

// Reservation is reserve's output.
type Reservation struct {
	ReservationID string `json:"reservation_id"`
	Warehouse     string `json:"warehouse"`
}

// Notification is notify's output.
type Notification struct {
	MessageID string `json:"message_id"`
}

// Points is points' output.
type Points struct {
	Awarded int `json:"awarded"`
}

// Shipment is ship's output.
type Shipment struct {
	TrackingID    string `json:"tracking_id"`
	ReservationID string `json:"reservation_id"`
	Notified      bool   `json:"notified"`
}

// Services stands in for the inventory, mail, loyalty and shipping
// services. Every effect is keyed by the step's idempotency key, so a
// repeat is recorded once; Effects lists them.
type Services struct {
	mu      sync.Mutex
	effects map[string]string // idempotency key + effect -> description
	counts  map[string]int    // effect -> how many distinct times it happened
	calls   map[string]int    // idempotency key -> handler calls (for flaky steps)
	// Delay is added to every handler, to make the parallel steps visible.
	Delay time.Duration
}

// NewServices returns empty services.
func NewServices() *Services {
	return &Services{effects: map[string]string{}, counts: map[string]int{}, calls: map[string]int{}}
}

// effect records an effect once per (key, kind) and reports whether it was
// new.
func (s *Services) effect(key, kind, desc string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key + "#" + kind
	if _, ok := s.effects[k]; ok {
		return false
	}
	s.effects[k] = desc
	s.counts[kind]++
	return true
}

func (s *Services) call(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[key]++
	return s.calls[key]
}

// Count returns how many distinct effects of a kind happened (e.g.
// "reserve", "release").
func (s *Services) Count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}

// Effects lists every effect, sorted.
func (s *Services) Effects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.effects))
	for k, v := range s.effects {
		out = append(out, k+": "+v)
	}
	sort.Strings(out)
	return out
}

func (s *Services) pause(ctx context.Context) error {
	if s.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(s.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Services) steer(sc steps.Context, o Order) error {
	if o.FailStep == sc.Step {
		return steps.Permanent(fmt.Errorf("%s refused order %s", sc.Step, o.OrderID))
	}
	if o.FailOnceStep == sc.Step && s.call(sc.IdempotencyKey) == 1 {
		return steps.Permanent(fmt.Errorf("%s refused order %s (once)", sc.Step, o.OrderID))
	}
	if o.FlakyStep == sc.Step && s.call(sc.IdempotencyKey) <= 2 {
		return fmt.Errorf("%s service unavailable (attempt %d)", sc.Step, sc.Attempt)
	}
	return nil
}

// Register registers the handlers under the names the YAML definition
// (workflows/order.yaml) uses.
func (s *Services) Register(reg *steps.Registry) error {
	return errors.Join(
		reg.Register("order.reserve", steps.Typed(s.reserve)),
		reg.Register("order.release", steps.Typed(s.release)),
		reg.Register("order.notify", steps.Typed(s.notify)),
		reg.Register("order.points", steps.Typed(s.points)),
		reg.Register("order.revoke_points", steps.Typed(s.revokePoints)),
		reg.Register("order.ship", steps.Typed(s.ship)),
	)
}

// Workflow declares the order workflow in Go, named name.
func (s *Services) Workflow(name string) (*dag.Workflow, error) {
	retry := dag.RetryPolicy{MaxAttempts: 4, InitialBackoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second, Multiplier: 2, Jitter: 1}
	return dag.New(name, dag.Version(1), dag.DefaultRetry(retry), dag.DefaultTimeout(30*time.Second),
		dag.ExampleInput(Example), dag.InputSchema(InputSchema)).
		Step("reserve", steps.Typed(s.reserve), dag.Compensate(steps.Typed(s.release))).
		Step("notify", steps.Typed(s.notify), dag.After("reserve")).
		Step("points", steps.Typed(s.points), dag.After("reserve"), dag.When("input.total >= 100"),
			dag.Compensate(steps.Typed(s.revokePoints))).
		Step("ship", steps.Typed(s.ship), dag.After("notify", "points")).
		Build()
}

func (s *Services) reserve(ctx context.Context, sc steps.Context, o Order) (Reservation, error) {
	if err := s.pause(ctx); err != nil {
		return Reservation{}, err
	}
	if err := s.steer(sc, o); err != nil {
		return Reservation{}, err
	}
	r := Reservation{ReservationID: "rsv-" + o.OrderID, Warehouse: "EU"}
	s.effect(sc.IdempotencyKey, "reserve", fmt.Sprintf("%d x %s for %s", o.Quantity, o.SKU, o.OrderID))
	return r, nil
}

func (s *Services) release(ctx context.Context, sc steps.Context, o Order) (struct{}, error) {
	var r Reservation
	if err := sc.DecodeOutput("reserve", &r); err != nil {
		return struct{}{}, steps.Permanent(err)
	}
	s.effect(sc.IdempotencyKey, "release", r.ReservationID)
	return struct{}{}, nil
}

func (s *Services) notify(ctx context.Context, sc steps.Context, o Order) (Notification, error) {
	if err := s.pause(ctx); err != nil {
		return Notification{}, err
	}
	if err := s.steer(sc, o); err != nil {
		return Notification{}, err
	}
	s.effect(sc.IdempotencyKey, "notify", "mail to "+o.Customer)
	return Notification{MessageID: "msg-" + o.OrderID}, nil
}

func (s *Services) points(ctx context.Context, sc steps.Context, o Order) (Points, error) {
	if err := s.pause(ctx); err != nil {
		return Points{}, err
	}
	if err := s.steer(sc, o); err != nil {
		return Points{}, err
	}
	p := Points{Awarded: int(o.Total / 10)}
	s.effect(sc.IdempotencyKey, "points", fmt.Sprintf("%d points to %s", p.Awarded, o.Customer))
	return p, nil
}

func (s *Services) revokePoints(ctx context.Context, sc steps.Context, o Order) (struct{}, error) {
	var p Points
	if err := sc.DecodeOutput("points", &p); err != nil {
		return struct{}{}, steps.Permanent(err)
	}
	s.effect(sc.IdempotencyKey, "revoke_points", fmt.Sprintf("%d points from %s", p.Awarded, o.Customer))
	return struct{}{}, nil
}

func (s *Services) ship(ctx context.Context, sc steps.Context, o Order) (Shipment, error) {
	if err := s.pause(ctx); err != nil {
		return Shipment{}, err
	}
	if err := s.steer(sc, o); err != nil {
		return Shipment{}, err
	}
	var r Reservation
	if err := sc.DecodeOutput("reserve", &r); err != nil {
		return Shipment{}, steps.Permanent(err)
	}
	_, notified := sc.Outputs["notify"]
	s.effect(sc.IdempotencyKey, "ship", "parcel for "+o.OrderID)
	return Shipment{TrackingID: "trk-" + o.OrderID, ReservationID: r.ReservationID, Notified: notified}, nil
}

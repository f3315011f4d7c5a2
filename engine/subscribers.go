package engine

import (
	"context"
	"fmt"

	"github.com/dagflow/dagflow/dag"
)

// Subscribers returns the names of the workflows subscribed to the event
// name, sorted: those registered on this node and those whose current
// stored definition subscribes, as Publish finds them. Their filters
// are not applied: a subscribed workflow may still start no run for a
// given payload. An empty answer means that publishing name starts no
// run at all (it may still complete steps waiting for it).
func (e *Engine) Subscribers(ctx context.Context, name string) ([]string, error) {
	if !dag.ValidEventName(name) {
		return nil, fmt.Errorf("%w: event name %q (%s)", ErrInvalidEvent, name, dag.EventNameRule)
	}
	subs, err := e.subscribers(ctx, name, false)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(subs))
	for i, s := range subs {
		out[i] = s.name
	}
	return out, nil
}

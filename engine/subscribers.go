package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

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

// subscriber is a workflow subscribed to an event, on the plan its runs
// start with.
type subscriber struct {
	name string
	sub  *dag.Subscription
}

// subscribers returns the workflows subscribed to event, by name: those
// registered on this node (their registered plan decides, as for
// Trigger) and those whose current stored definition subscribes. With
// cachedOnly it reads nothing from the store: the stored definitions count
// as far as this node has them cached (index and plans, whatever their
// age), which on a one-connection store (a private :memory: database)
// are this process's own.
func (e *Engine) subscribers(ctx context.Context, event string, cachedOnly bool) ([]subscriber, error) {
	candidates := map[string]bool{}
	for _, w := range e.registeredWorkflows() {
		candidates[w.Name()] = true
	}
	var index map[string][]string
	var err error
	if cachedOnly {
		index = e.subs.cached()
	} else if index, err = e.subs.read(ctx, e); err != nil {
		return nil, fmt.Errorf("engine: subscribers of event %q: %w", event, err)
	}
	for _, wf := range index[event] {
		candidates[wf] = true
	}
	names := make([]string, 0, len(candidates))
	for n := range candidates {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []subscriber
	for _, n := range names {
		if cachedOnly {
			w, _ := e.registered(n)
			if w == nil {
				c, _ := e.plans.fresh(n)
				w = c.plan
			}
			if w == nil {
				continue
			}
			if sub := w.Subscribed(event); sub != nil {
				out = append(out, subscriber{name: n, sub: sub})
			}
			continue
		}
		w, _, err := e.triggerPlan(ctx, n)
		if errors.Is(err, ErrUnknownWorkflow) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("engine: subscribers of event %q: %w", event, err)
		}
		if sub := w.Subscribed(event); sub != nil {
			out = append(out, subscriber{name: n, sub: sub})
		}
	}
	return out, nil
}

// subscriptionIndex caches which stored workflows subscribe to which
// events (event -> workflows), from the current stored definitions, for
// currentPlanTTL: one query per two seconds, not one per publication.
type subscriptionIndex struct {
	mu     sync.Mutex
	readAt time.Time
	index  map[string][]string
}

func (s *subscriptionIndex) read(ctx context.Context, e *Engine) (map[string][]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.index != nil && time.Since(s.readAt) < currentPlanTTL {
		return s.index, nil
	}
	defs, err := e.Definitions(ctx)
	if err != nil {
		return nil, err
	}
	index := map[string][]string{}
	for _, d := range defs {
		for _, on := range d.Definition.On {
			index[on.Event] = append(index[on.Event], d.Name)
		}
	}
	s.index, s.readAt = index, time.Now()
	return index, nil
}

// cached returns the index as last read, whatever its age, without
// waiting for a read in progress (nil then, or before the first read).
func (s *subscriptionIndex) cached() map[string][]string {
	if !s.mu.TryLock() {
		return nil
	}
	defer s.mu.Unlock()
	return s.index
}

// reset forgets the index (Register: a new subscription shows at once).
func (s *subscriptionIndex) reset() {
	s.mu.Lock()
	s.index = nil
	s.mu.Unlock()
}

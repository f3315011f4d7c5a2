package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/internal/clip"
	"github.com/dagflow/dagflow/persistence"
)

// Event-triggered runs: Publish and PublishTx start one run of every
// workflow subscribed to an event (dag.OnEvent) whose filter the payload
// passes, once per (event id, workflow): the event id is a unique key in
// the store, and each run's idempotency key is "event:<id>:<workflow>".
// Events recorded in a caller's transaction are an outbox: the outbox
// loop (and every reconcile pass) enqueues the runs of committed events
// that no node has dispatched yet.

// Errors of Publish and PublishTx.
var (
	// ErrInvalidEvent reports an event name or id that is not valid.
	ErrInvalidEvent = errors.New("engine: invalid event")
	// ErrEventConflict reports an event id published again with another
	// name or payload: the stored event and its runs stand.
	ErrEventConflict = errors.New("engine: event id reused with a different name or payload")
)

// PublishOption sets a per-call option of Publish and PublishTx.
type PublishOption func(*publishOptions)

type publishOptions struct {
	id          string
	correlation string
}

// Correlation gives the event a correlation value: the steps waiting for
// an event of this name (dag.WaitFor) whose Correlate expression has
// this value complete with the event's payload as their output, in the
// event's transaction. A step that starts waiting later finds the event
// within Config.EventLookback. At most 255 characters. With a codec
// that hashes (Config.Codec, codec.Hasher) the store keeps a keyed hash
// of it, not the value.
func Correlation(v string) PublishOption { return func(o *publishOptions) { o.correlation = v } }

// EventID names the event: however often, and on however many nodes, an
// event with this id is published, it starts its runs once, and a repeat
// returns them. Without it a fresh id (a UUIDv7) is generated. An id is
// 1-128 characters of [A-Za-z0-9_.:-] starting with a letter or digit.
func EventID(id string) PublishOption { return func(o *publishOptions) { o.id = id } }

// EventRun is a run an event started.
type EventRun struct {
	Workflow string
	RunID    string
}

// Published is the outcome of Publish and PublishTx.
type Published struct {
	// EventID is the event's id (the generated one without EventID).
	EventID string
	// Created is false when the event id had been published before:
	// Runs are then the runs that first publication started.
	Created bool
	// Runs are the runs the event started, by workflow name.
	Runs []EventRun
}

// RunIDs returns the ids of the runs the event started, by workflow name.
func (p Published) RunIDs() []string {
	out := make([]string, len(p.Runs))
	for i, r := range p.Runs {
		out[i] = r.RunID
	}
	return out
}

// Publish records an event called name with payload (any JSON-encodable
// value, or raw JSON as []byte/json.RawMessage) and starts one run of
// every workflow subscribed to name whose filter the payload passes, with
// the payload as the run's input. The event and its runs are committed
// together before Publish returns, and the runs are enqueued (if Redis is
// unreachable the reconciler dispatches them later).
//
// With EventID, a repeat of the id starts nothing and returns the runs the
// first publication started (Created false), on any node and however many
// publish it at once; a repeat with another name or payload is an error
// wrapping ErrEventConflict. A filter that fails on the payload (a number
// compared with a string, say) counts as not matching and is logged.
// The subscribed workflows are those registered on this node and those
// whose current stored definition subscribes (a node learns of a
// subscription registered on another node within two seconds).
func (e *Engine) Publish(ctx context.Context, name string, payload any, opts ...PublishOption) (Published, error) {
	if e.stopped() {
		return Published{}, ErrStopped
	}
	p, raw, err := e.publishParams(ctx, name, payload, opts, false)
	if err != nil {
		return Published{}, err
	}
	p.Dispatched = true
	res, err := e.store.EventCreate(ctx, p)
	if err != nil {
		return Published{}, fmt.Errorf("engine: publish event %q: %w", name, err)
	}
	if !res.Created {
		return e.repeated(ctx, res.Event, name, raw)
	}
	var created []persistence.RunCreateResult
	for _, r := range res.Runs {
		if r.Created {
			created = append(created, r)
			e.stats.runsCreated.Add(1)
			e.metrics.runStarted(r.Run.Workflow)
		}
	}
	// A failed enqueue is logged; the reconciler dispatches the runs.
	e.enqueueCreated(ctx, created)
	e.afterResolved(ctx, res.Resolved)
	return published(res.Event, true), nil
}

// PublishTx records an event inside tx, a transaction the caller owns
// (*sql.Tx or *sqlx.Tx begun on DB()), as Publish records it: the event
// and its runs commit or roll back with the caller's own rows (the
// outbox pattern). Nothing is dispatched before the commit. A committed
// event's runs are enqueued by the outbox loop of any running engine
// (this one polls at once after a PublishTx, at
// Config.OutboxInterval otherwise) and by every reconcile pass, so also
// after this process crashed; a rolled-back event leaves nothing.
//
// A concurrent publication of the same id in another transaction waits
// for this one to commit (then it returns this one's runs, Created
// false) or roll back (then exactly one waiter creates the event); no
// waiter's transaction is rolled back by a deadlock.
func (e *Engine) PublishTx(ctx context.Context, tx persistence.DBTX, name string, payload any, opts ...PublishOption) (Published, error) {
	if e.stopped() {
		return Published{}, ErrStopped
	}
	ts, ok := e.store.(persistence.TxStore)
	if !ok {
		return Published{}, ErrNoTx
	}
	p, raw, err := e.publishParams(ctx, name, payload, opts, ts.DB().Stats().MaxOpenConnections == 1)
	if err != nil {
		return Published{}, err
	}
	res, err := ts.EventCreateTx(ctx, tx, p)
	if err != nil {
		return Published{}, fmt.Errorf("engine: publish event %q: %w", name, err)
	}
	if !res.Created {
		return e.repeated(ctx, res.Event, name, raw)
	}
	for _, r := range res.Runs {
		if r.Created {
			// Counted when created: a transaction the caller rolls
			// back afterwards leaves a run counted that never was.
			e.metrics.runStarted(r.Run.Workflow)
		}
	}
	e.nudgeOutbox()
	// The steps the event resolved are queued in the caller's
	// transaction: the reconciler enqueues them once it commits.
	return published(res.Event, true), nil
}

func published(ev persistence.Event, created bool) Published {
	out := Published{EventID: ev.ID, Created: created, Runs: make([]EventRun, len(ev.Runs))}
	for i, r := range ev.Runs {
		out.Runs[i] = EventRun{Workflow: r.Workflow, RunID: r.RunID}
	}
	return out
}

// repeated answers a publication of an id already stored: the stored
// event's runs, or ErrEventConflict when the name or payload differ.
func (e *Engine) repeated(ctx context.Context, stored persistence.Event, name string, raw []byte) (Published, error) {
	if stored.Name != name {
		return Published{}, fmt.Errorf("%w: event %q was published as %q, not %q", ErrEventConflict, stored.ID, stored.Name, name)
	}
	plain, err := e.decodePayload(ctx, codec.Input, stored.Payload)
	if err != nil {
		return Published{}, fmt.Errorf("engine: event %q: %w", stored.ID, err)
	}
	if !sameJSON(plain, raw) {
		return Published{}, fmt.Errorf("%w: event %q (%s) was published with another payload", ErrEventConflict, stored.ID, name)
	}
	return published(stored, false), nil
}

// sameJSON reports whether a and b are the same JSON value, whatever
// their spelling (whitespace, the order of an object's keys); numbers are
// compared as written.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	decode := func(b []byte) (any, bool) {
		if len(bytes.TrimSpace(b)) == 0 {
			return nil, true
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}

// publishParams validates an event, finds the workflows it starts and
// plans their runs. raw is the payload's JSON before the codec.
// publishParams builds the event's create parameters. With cachedOnly
// (PublishTx on a one-connection store, SQLite :memory:, whose only
// connection the caller's transaction holds) it finds the subscribers
// without reading the store.
func (e *Engine) publishParams(ctx context.Context, name string, payload any, opts []PublishOption, cachedOnly bool) (persistence.EventCreateParams, []byte, error) {
	if !dag.ValidEventName(name) {
		return persistence.EventCreateParams{}, nil, fmt.Errorf("%w: event name %q (%s)", ErrInvalidEvent, name, dag.EventNameRule)
	}
	var o publishOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.id == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return persistence.EventCreateParams{}, nil, fmt.Errorf("engine: event id: %w", err)
		}
		o.id = id.String()
	} else if !validEventID(o.id) {
		return persistence.EventCreateParams{}, nil, fmt.Errorf("%w: event %q: id %q (want 1-128 characters of [A-Za-z0-9_.:-] starting with a letter or digit)",
			ErrInvalidEvent, name, clip.String(o.id))
	}
	raw, err := encodeInput(payload)
	if err != nil {
		return persistence.EventCreateParams{}, nil, fmt.Errorf("engine: event %q: invalid payload: %w", name, errors.Join(ErrInvalidInput, err))
	}
	stored, err := e.encodePayload(ctx, codec.Input, raw)
	if err != nil {
		return persistence.EventCreateParams{}, nil, fmt.Errorf("engine: event %q: %w", name, err)
	}
	subs, err := e.subscribers(ctx, name, cachedOnly)
	if err != nil {
		return persistence.EventCreateParams{}, nil, err
	}
	p := persistence.EventCreateParams{ID: o.id, Name: name, Payload: stored, Now: e.clock.Now()}
	if p.Correlation, p.CorrelationAliases, err = e.storedCorrelation(ctx, o.correlation); err != nil {
		return persistence.EventCreateParams{}, nil, fmt.Errorf("engine: event %q: %w", name, err)
	}
	if o.correlation != "" {
		if p.WaitOutput, err = e.encodePayload(ctx, codec.Output, raw); err != nil {
			return persistence.EventCreateParams{}, nil, fmt.Errorf("engine: event %q: %w", name, err)
		}
	}
	var in any // an event without a payload starts runs without input
	if raw != nil {
		in = json.RawMessage(raw)
	}
	for _, wf := range subs {
		if !e.matches(ctx, wf.sub, raw) {
			continue
		}
		rp, err := e.createParams(ctx, wf.name, in, []TriggerOption{IdempotencyKey(EventRunKey(o.id, wf.name)), internalRun(eventKeyPrefix)})
		if err != nil {
			return persistence.EventCreateParams{}, nil, fmt.Errorf("engine: event %q: %w", name, err)
		}
		p.Runs = append(p.Runs, rp)
	}
	return p, raw, nil
}

// EventRunKey is the idempotency key of the run an event starts of a
// workflow: "event:<event id>:<workflow>".
func EventRunKey(eventID, workflow string) string { return eventKeyPrefix + eventID + ":" + workflow }

// validEventID is the store's rule for event ids, checked here so that a
// bad id is refused with ErrInvalidEvent before any work.
func validEventID(v string) bool {
	if len(v) == 0 || len(v) > 128 || !alnum(v[0]) {
		return false
	}
	for i := 1; i < len(v); i++ {
		if c := v[i]; !alnum(c) && c != '_' && c != '.' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return (c|0x20 >= 'a' && c|0x20 <= 'z') || (c >= '0' && c <= '9') }

// matches evaluates a subscription's filter within the condition budget;
// an evaluation error counts as no match.
func (e *Engine) matches(ctx context.Context, sub *dag.Subscription, payload []byte) bool {
	if sub.Filter == "" {
		return true
	}
	ok, err := sub.Match(e.exprBudget(ctx), payload)
	if err != nil {
		e.log.Warn("an event filter failed on a payload; no run started", "event", sub.Event, "err", err)
		return false
	}
	return ok
}

// Event is a published event as Event and Events return it, its payload
// decoded (Config.Codec).
type Event struct {
	// ID and Name are the event's.
	ID   string
	Name string
	// Payload is the event's JSON payload; nil for none.
	Payload json.RawMessage
	// PublishedAt is when it was first published.
	PublishedAt time.Time
	// DispatchedAt is when its runs were handed to the queues; nil while
	// an event of PublishTx waits for an engine to see its commit.
	DispatchedAt *time.Time
	// Runs are the runs it started, by workflow name.
	Runs []EventRun
	// PayloadError says why Payload is nil although the event has one:
	// the codec could not decode it (Config.Codec lacks its key).
	PayloadError string
}

// EventFilter selects and pages the events Events lists; zero values mean
// no filter.
type EventFilter struct {
	// Name lists only the events of that name.
	Name string
	// PublishedAfter (inclusive) and PublishedBefore (exclusive) bound
	// the publication time.
	PublishedAfter  time.Time
	PublishedBefore time.Time
	// Cursor is the NextCursor of the page before, with the same filters.
	Cursor string
	// Limit is the most events on a page: 50 when zero or negative, at
	// most 1000.
	Limit int
}

// EventPage is one page of Events.
type EventPage struct {
	Events []Event
	// NextCursor continues the listing; empty on the last page.
	NextCursor string
}

// Event returns a published event with the runs it started; an unknown id
// gives an error wrapping persistence.ErrEventNotFound. A payload the
// codec cannot decode is left out, and PayloadError says why.
func (e *Engine) Event(ctx context.Context, id string) (Event, error) {
	ev, err := e.store.EventGet(ctx, id)
	if err != nil {
		return Event{}, fmt.Errorf("engine: event %q: %w", id, err)
	}
	return e.markEvent(ctx, ev), nil
}

// Events lists published events, newest first (by publication time, then
// id), a keyset page at a time, as Runs lists runs: every page is an
// index seek. A filter the store refuses (a malformed name or cursor)
// gives an error wrapping persistence.ErrInvalid.
func (e *Engine) Events(ctx context.Context, f EventFilter) (EventPage, error) {
	page, err := e.store.EventList(ctx, persistence.EventListParams{Name: f.Name, PublishedAfter: f.PublishedAfter,
		PublishedBefore: f.PublishedBefore, Cursor: f.Cursor, Limit: f.Limit})
	if err != nil {
		return EventPage{}, fmt.Errorf("engine: list events: %w", err)
	}
	out := EventPage{NextCursor: page.NextCursor, Events: make([]Event, 0, len(page.Events))}
	for _, ev := range page.Events {
		out.Events = append(out.Events, e.markEvent(ctx, ev))
	}
	return out, nil
}

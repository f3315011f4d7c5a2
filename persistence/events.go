package persistence

import (
	"context"
	"time"
)

// Events is the part of a Store that keeps published events: what
// Publish writes and the outbox and the API read.
type Events interface {
	// EventCreate records a published event and creates its runs (the
	// runs of p.Runs, each found by its idempotency key if it exists),
	// linked to the event, in one transaction. An event whose id is
	// already stored is returned as it is stored, with the runs it
	// started, and nothing is created (Created false): however many
	// callers publish an event, concurrently or not, one of them creates
	// it and its runs.
	EventCreate(ctx context.Context, p EventCreateParams) (EventCreateResult, error)
	// EventGet returns one event with its runs, or ErrEventNotFound.
	EventGet(ctx context.Context, id string) (Event, error)
	// EventList lists events, newest first (published at, then id,
	// descending), with their runs; a keyset page. Index-served.
	EventList(ctx context.Context, p EventListParams) (EventPage, error)
	// EventListPending lists the events not marked dispatched that were
	// published at or before p.Before, oldest first, with their runs.
	// Index-served: dispatched events are never read.
	EventListPending(ctx context.Context, p EventListPendingParams) ([]Event, error)
	// EventMarkDispatched records that the runs of the events have been
	// handed to the queues; it returns how many events it changed (an
	// event already marked, or unknown, is not counted).
	EventMarkDispatched(ctx context.Context, p EventMarkDispatchedParams) (int, error)
}

// Event is a published event and the runs it started.
type Event struct {
	// ID identifies the event: a repeat of an id is the same event.
	ID string
	// Name is the event's name ("order.placed").
	Name string
	// Payload is the event's payload as stored (JSON, or the engine's
	// codec's encoding of it); nil for none.
	Payload []byte
	// PublishedAt is when the event was first published.
	PublishedAt time.Time
	// DispatchedAt is when its runs were handed to the queues; nil while
	// an event recorded in a caller's transaction waits for the engine.
	DispatchedAt *time.Time
	// Correlation is the value waiting steps are matched by; empty for
	// none.
	Correlation string
	// Runs are the runs the event started, by workflow name.
	Runs []EventRun
}

// EventRun is one run an event started.
type EventRun struct {
	Workflow string
	RunID    string
}

// EventCreateParams are the arguments of Store.EventCreate.
type EventCreateParams struct {
	// ID, Name and Payload are the event's; Now is its publication time.
	ID      string
	Name    string
	Payload []byte
	Now     time.Time
	// Runs are the runs to start, one per workflow, each with an
	// idempotency key (the engine's is derived from the event id and the
	// workflow).
	Runs []RunCreateParams
	// Dispatched stores the event as dispatched at Now: the caller
	// enqueues the runs itself right after the commit.
	Dispatched bool
	// Correlation, when not empty, is stored with the event, and the
	// steps parked waiting for (Name, Correlation) are resolved with the
	// event's payload as their output in the same transaction (one
	// indexed lookup; see StepPark).
	Correlation string
	// CorrelationAliases are other stored forms of the same correlation
	// value (the engine's codec hashes it under each of its keys and
	// stores the current key's hash as Correlation): a row stored with
	// any of them matches too. They are never stored; each is locked as
	// Correlation is. At most 16, each a valid correlation.
	CorrelationAliases []string
	// WaitOutput is the output the resolved steps get: the payload as an
	// output (a codec may encode outputs apart from inputs); nil: Payload.
	WaitOutput []byte
}

// EventCreateResult is the outcome of Store.EventCreate.
type EventCreateResult struct {
	// Event is the event as stored, with its runs.
	Event Event
	// Created is false when the event id was already stored: Event is
	// the stored one (whose name or payload may differ from the call's)
	// and Runs is empty.
	Created bool
	// Runs are the results of creating p.Runs, in order (a run that
	// already existed for its key has Created false).
	Runs []RunCreateResult
	// Resolved are the completions of the parked steps the event
	// matched (their Ready steps are to be enqueued).
	Resolved []StepCompleteResult
}

// EventListParams are the arguments of Store.EventList.
type EventListParams struct {
	// Name lists only the events of that name.
	Name string
	// PublishedAfter and PublishedBefore bound the publication time
	// (inclusive after, exclusive before); zero is unbounded.
	PublishedAfter  time.Time
	PublishedBefore time.Time
	Cursor          string // from a previous page's NextCursor
	Limit           int    // default 50, at most 1000
}

// EventPage is one page of events.
type EventPage struct {
	Events     []Event
	NextCursor string // empty on the last page
}

// EventListPendingParams are the arguments of Store.EventListPending.
type EventListPendingParams struct {
	Before time.Time
	Limit  int // default 100, at most 1000
}

// EventMarkDispatchedParams are the arguments of
// Store.EventMarkDispatched.
type EventMarkDispatchedParams struct {
	IDs []string
	Now time.Time
}

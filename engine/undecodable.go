package engine

import (
	"context"
	"strings"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/persistence"
)

// What the operator's reads (Runs, Get, DeadLetters, Events) do with a
// payload the codec cannot decode: a row sealed under a key the keyring
// no longer has must not fail a whole listing, nor hide the run from
// the operator who has to find it (and rotate or restore the key). The
// payload is left empty and the record's PayloadError says why. The
// engine's own reads (claims, Wait, child outputs) still fail: they
// need the value.

// reasons collects why payloads could not be decoded.
type reasons []string

func (r *reasons) add(err error) {
	if err != nil {
		*r = append(*r, err.Error())
	}
}

func (r reasons) String() string { return strings.Join(r, "; ") }

// markRun decodes a run's payloads for an operator's read.
func (e *Engine) markRun(ctx context.Context, r *persistence.Run) {
	if e.cfg.Codec == nil {
		return
	}
	var why reasons
	var err error
	if r.Input, err = e.decodePayload(ctx, codec.Input, r.Input); err != nil {
		why.add(err)
	}
	if r.Output, err = e.decodePayload(ctx, codec.Output, r.Output); err != nil {
		why.add(err)
	}
	if r.Error, err = e.decodeError(ctx, r.Error); err != nil {
		why.add(err)
	}
	r.PayloadError = why.String()
}

// markSteps decodes steps' payloads for an operator's read.
func (e *Engine) markSteps(ctx context.Context, sts []persistence.StepRun) {
	if e.cfg.Codec == nil {
		return
	}
	for i := range sts {
		s := &sts[i]
		var why reasons
		var err error
		if s.Output, err = e.decodePayload(ctx, codec.Output, s.Output); err != nil {
			why.add(err)
		}
		if s.Error, err = e.decodeError(ctx, s.Error); err != nil {
			why.add(err)
		}
		s.PayloadError = why.String()
	}
}

// markAttempts decodes a run's history for an operator's read.
func (e *Engine) markAttempts(ctx context.Context, atts []persistence.Attempt) {
	for i := range atts {
		a := &atts[i]
		var err error
		if a.Error, err = e.decodeError(ctx, a.Error); err != nil {
			a.PayloadError = err.Error()
		}
	}
}

// markSchedule decodes a listed schedule's input; one the codec cannot
// open is left empty, and PayloadError says why, so that one schedule
// sealed under a retired key does not fail the list.
func (e *Engine) markSchedule(ctx context.Context, si *ScheduleInfo) {
	if err := e.decodeSchedule(ctx, &si.Schedule); err != nil {
		si.Input, si.PayloadError = nil, err.Error()
	}
}

// markEvent is an event as Events lists it, its payload decoded.
func (e *Engine) markEvent(ctx context.Context, ev persistence.Event) Event {
	out := published(ev, true)
	d := Event{ID: ev.ID, Name: ev.Name, PublishedAt: ev.PublishedAt, DispatchedAt: ev.DispatchedAt, Runs: out.Runs}
	payload, err := e.decodePayload(ctx, codec.Input, ev.Payload)
	if err != nil {
		d.PayloadError = "payload: " + err.Error()
		return d
	}
	d.Payload = payload
	return d
}

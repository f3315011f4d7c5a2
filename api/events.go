package api

import (
	"fmt"
	"net/http"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/clip"
)

// publishEvent records an event and starts its runs: POST /v1/events. The
// first publication of an id answers 201, a repeat 200 with the runs the
// first started; the id with another name or payload is a 409.
func (s *server) publishEvent(w http.ResponseWriter, r *http.Request) error {
	var req client.PublishRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if !dag.ValidEventName(req.Name) {
		return problemf(http.StatusBadRequest, CodeInvalidName, "event name %q is not valid (%s)", clip.String(req.Name), dag.EventNameRule)
	}
	payload, err := normalizeJSON(req.Payload, "payload")
	if err != nil {
		return err
	}
	var opts []engine.PublishOption
	if req.ID != "" {
		opts = append(opts, engine.EventID(req.ID))
	}
	if req.Correlation != "" {
		opts = append(opts, engine.Correlation(req.Correlation))
	}
	p, err := s.e.Publish(r.Context(), req.Name, payload, opts...)
	if err != nil {
		return err
	}
	ev, err := s.e.Event(r.Context(), p.EventID)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if p.Created {
		status = http.StatusCreated
	}
	out := toEvent(ev)
	if len(out.Runs) == 0 {
		if subs, err := s.e.Subscribers(r.Context(), req.Name); err == nil && len(subs) == 0 {
			out.Warning = fmt.Sprintf("no workflow subscribes to event %q: it started no run", req.Name)
		}
	}
	return writeJSON(w, status, out)
}

// listEvents lists events: GET /v1/events.
func (s *server) listEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := queryValues(r, "name", "after", "before", "cursor", "limit")
	if err != nil {
		return err
	}
	var f engine.EventFilter
	if f.Name, err = single(q, "name"); err != nil {
		return err
	}
	if f.Name != "" && !dag.ValidEventName(f.Name) {
		return problemf(http.StatusBadRequest, CodeInvalidName, "event name %q is not valid (%s)", clip.String(f.Name), dag.EventNameRule)
	}
	if f.PublishedAfter, err = timeParam(q, "after"); err != nil {
		return err
	}
	if f.PublishedBefore, err = timeParam(q, "before"); err != nil {
		return err
	}
	if f.Cursor, err = single(q, "cursor"); err != nil {
		return err
	}
	if f.Limit, err = limitParam(q); err != nil {
		return err
	}
	page, err := s.e.Events(r.Context(), f)
	if err != nil {
		return err
	}
	out := client.EventList{Events: make([]client.Event, 0, len(page.Events)), NextCursor: page.NextCursor}
	for _, ev := range page.Events {
		out.Events = append(out.Events, toEvent(ev))
	}
	return writeJSON(w, http.StatusOK, out)
}

func toEvent(ev engine.Event) client.Event {
	out := client.Event{ID: ev.ID, Name: ev.Name, Payload: ev.Payload, PublishedAt: ev.PublishedAt,
		DispatchedAt: ev.DispatchedAt, Runs: make([]client.EventRun, len(ev.Runs)), PayloadError: ev.PayloadError}
	if out.Payload == nil {
		out.Payload = []byte("null")
	}
	for i, r := range ev.Runs {
		out.Runs[i] = client.EventRun{Workflow: r.Workflow, RunID: r.RunID}
	}
	return out
}

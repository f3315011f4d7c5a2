package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The calls about runs: workflows and their triggers, events, runs and
// their steps, and dead letters.

// ListWorkflows calls GET /v1/workflows.
func (c *Client) ListWorkflows(ctx context.Context) ([]Workflow, error) {
	var out WorkflowList
	_, _, err := c.do(ctx, http.MethodGet, "/v1/workflows", nil, nil, nil, &out)
	return out.Workflows, err
}

// GetWorkflow calls GET /v1/workflows/{name}.
func (c *Client) GetWorkflow(ctx context.Context, name string) (WorkflowDetail, error) {
	var out WorkflowDetail
	_, _, err := c.do(ctx, http.MethodGet, "/v1/workflows/"+seg(name), nil, nil, nil, &out)
	return out, err
}

// Trigger starts a run of workflow (POST /v1/workflows/{name}/runs). It
// returns the run and whether this call created it: false for a repeat
// with the same idempotency key and input. The same key with another
// input is a *Problem with status 409 whose RunID is the existing run.
// The key goes in the Idempotency-Key header.
func (c *Client) Trigger(ctx context.Context, workflow string, req TriggerRequest) (Run, bool, error) {
	var h http.Header
	if req.IdempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {req.IdempotencyKey}}
		req.IdempotencyKey = ""
	}
	var out Run
	status, _, err := c.do(ctx, http.MethodPost, "/v1/workflows/"+seg(workflow)+"/runs", nil, h, req, &out)
	return out, status == http.StatusCreated, err
}

// Publish calls POST /v1/events: it records the event and starts its
// runs. created is false for a repeat of an event id, whose answer is the
// runs the first publication started.
func (c *Client) Publish(ctx context.Context, req PublishRequest) (Event, bool, error) {
	var out Event
	status, _, err := c.do(ctx, http.MethodPost, "/v1/events", nil, nil, req, &out)
	return out, status == http.StatusCreated, err
}

// EventFilter selects the events ListEvents lists; zero values mean no
// filter.
type EventFilter struct {
	Name   string
	After  time.Time
	Before time.Time
	Cursor string
	Limit  int
}

// ListEvents calls GET /v1/events: a page of events, newest first; pass
// its NextCursor as Cursor for the next.
func (c *Client) ListEvents(ctx context.Context, f EventFilter) (EventList, error) {
	q := url.Values{}
	if f.Name != "" {
		q.Set("name", f.Name)
	}
	if !f.After.IsZero() {
		q.Set("after", f.After.UTC().Format(time.RFC3339Nano))
	}
	if !f.Before.IsZero() {
		q.Set("before", f.Before.UTC().Format(time.RFC3339Nano))
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out EventList
	_, _, err := c.do(ctx, http.MethodGet, "/v1/events", q, nil, nil, &out)
	return out, err
}

// RunFilter selects the runs ListRuns lists; zero values mean no filter.
type RunFilter struct {
	Workflow       string
	Status         []string
	CreatedAfter   time.Time
	CreatedBefore  time.Time
	IdempotencyKey string
	Cursor         string
	Limit          int
	// Include asks for the runs' payloads, "input" and/or "output"
	// (each over the inline limit still a PayloadRef); by default a list
	// has none.
	Include []string
}

// ListRuns calls GET /v1/runs: a page of runs, newest first; pass its
// NextCursor as Cursor for the next.
func (c *Client) ListRuns(ctx context.Context, f RunFilter) (RunList, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("workflow", f.Workflow)
	for _, s := range f.Status {
		q.Add("status", s)
	}
	if !f.CreatedAfter.IsZero() {
		set("created_after", f.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if !f.CreatedBefore.IsZero() {
		set("created_before", f.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	set("idempotency_key", f.IdempotencyKey)
	set("cursor", f.Cursor)
	if f.Limit > 0 {
		set("limit", strconv.Itoa(f.Limit))
	}
	set("include", strings.Join(f.Include, ","))
	var out RunList
	_, _, err := c.do(ctx, http.MethodGet, "/v1/runs", q, nil, nil, &out)
	return out, err
}

// GetRun calls GET /v1/runs/{id}.
func (c *Client) GetRun(ctx context.Context, id string) (RunDetail, error) {
	var out RunDetail
	_, _, err := c.do(ctx, http.MethodGet, "/v1/runs/"+seg(id), nil, nil, nil, &out)
	return out, err
}

// Payload reads a payload an answer referred to (a PayloadRef's URL):
// the run's input or output, or a step's output, whole.
func (c *Client) Payload(ctx context.Context, ref PayloadRef) (json.RawMessage, error) {
	var out json.RawMessage
	_, _, err := c.do(ctx, http.MethodGet, ref.URL, nil, nil, nil, &out)
	return out, err
}

// CancelRun calls POST /v1/runs/{id}/cancel.
func (c *Client) CancelRun(ctx context.Context, id string) (Run, error) {
	var out Run
	_, _, err := c.do(ctx, http.MethodPost, "/v1/runs/"+seg(id)+"/cancel", nil, nil, nil, &out)
	return out, err
}

// Signal calls POST /v1/runs/{id}/steps/{step}/signal: it completes a
// step parked waiting for a signal (or an event) with payload as its
// output, and returns the run with its steps.
func (c *Client) Signal(ctx context.Context, id, step string, payload json.RawMessage) (RunDetail, error) {
	var out RunDetail
	_, _, err := c.do(ctx, http.MethodPost, "/v1/runs/"+seg(id)+"/steps/"+seg(step)+"/signal", nil, nil, SignalRequest{Payload: payload}, &out)
	return out, err
}

// PauseRun calls POST /v1/runs/{id}/pause.
func (c *Client) PauseRun(ctx context.Context, id string) (Run, error) {
	var out Run
	_, _, err := c.do(ctx, http.MethodPost, "/v1/runs/"+seg(id)+"/pause", nil, nil, nil, &out)
	return out, err
}

// ResumeRun calls POST /v1/runs/{id}/resume.
func (c *Client) ResumeRun(ctx context.Context, id string) (Run, error) {
	var out Run
	_, _, err := c.do(ctx, http.MethodPost, "/v1/runs/"+seg(id)+"/resume", nil, nil, nil, &out)
	return out, err
}

// RetryRun calls POST /v1/runs/{id}/retry: the zero request retries the
// run's failed steps; RetryRequest{Mode: RetryFromStep, Step: s} reruns
// it from s.
func (c *Client) RetryRun(ctx context.Context, id string, req RetryRequest) (RetryRunResult, error) {
	var out RetryRunResult
	_, _, err := c.do(ctx, http.MethodPost, "/v1/runs/"+seg(id)+"/retry", nil, nil, req, &out)
	return out, err
}

// SkipStep calls POST /v1/runs/{id}/steps/{step}/skip: the dead step
// gets output (nil: none) and the run resumes.
func (c *Client) SkipStep(ctx context.Context, id, step string, output json.RawMessage) (RunDetail, error) {
	var out RunDetail
	_, _, err := c.do(ctx, http.MethodPost, "/v1/runs/"+seg(id)+"/steps/"+seg(step)+"/skip", nil, nil, SkipRequest{Output: output}, &out)
	return out, err
}

// DeadLetterFilter selects the dead steps ListDeadLetters lists.
type DeadLetterFilter struct {
	Workflow string
	Cursor   string
	Limit    int
}

// ListDeadLetters calls GET /v1/dead-letters.
func (c *Client) ListDeadLetters(ctx context.Context, f DeadLetterFilter) (DeadLetterList, error) {
	q := url.Values{}
	if f.Workflow != "" {
		q.Set("workflow", f.Workflow)
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out DeadLetterList
	_, _, err := c.do(ctx, http.MethodGet, "/v1/dead-letters", q, nil, nil, &out)
	return out, err
}

// RetryDeadLetter calls POST /v1/dead-letters/{run}/{step}/retry.
func (c *Client) RetryDeadLetter(ctx context.Context, runID, step string) (Step, error) {
	var out Step
	_, _, err := c.do(ctx, http.MethodPost, "/v1/dead-letters/"+seg(runID)+"/"+seg(step)+"/retry", nil, nil, nil, &out)
	return out, err
}

// DiscardDeadLetter calls DELETE /v1/dead-letters/{run}/{step}.
func (c *Client) DiscardDeadLetter(ctx context.Context, runID, step string) error {
	_, _, err := c.do(ctx, http.MethodDelete, "/v1/dead-letters/"+seg(runID)+"/"+seg(step), nil, nil, nil, nil)
	return err
}

package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options configure a Client. Zero values mean the documented defaults.
type Options struct {
	// Key is the API key sent as "Authorization: Bearer <key>"; empty
	// sends none (a server on loopback without keys lets such requests in).
	Key string
	// HTTPClient sends the requests. Default: a client with a 30 s timeout.
	HTTPClient *http.Client
	// UserAgent is sent with every request. Default "dagflow-client".
	UserAgent string
}

// Client calls a dagflow API. It is safe for concurrent use.
type Client struct {
	base *url.URL
	o    Options
}

// maxAnswer bounds an answer body the client reads.
const maxAnswer = 64 << 20

// New returns a client of the API at baseURL ("http://127.0.0.1:8080",
// or with a path prefix where the handler is mounted under one).
func New(baseURL string, o Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http:// or https:// and a host", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.UserAgent == "" {
		o.UserAgent = "dagflow-client"
	}
	return &Client{base: u, o: o}, nil
}

// do sends a request and decodes a JSON answer into out (when not nil),
// returning the status. An answer of 400 or more is a *Problem.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, header http.Header, body, out any) (int, http.Header, error) {
	status, h, b, err := c.send(ctx, method, path, query, header, body)
	if err != nil {
		return status, h, err
	}
	if status >= 400 {
		return status, h, problemOf(status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return status, h, fmt.Errorf("client: %s %s: decode answer: %w", method, path, err)
		}
	}
	return status, h, nil
}

// PreflightHeader is sent, as "1", with every request but GET and HEAD.
// A server without API keys takes a write only with it or a JSON body:
// a web page of another origin cannot send either without a CORS
// preflight.
const PreflightHeader = "X-Dagflow-Request"

// send sends a request and returns the answer's status, header and body.
// path's segments are escaped already (seg).
func (c *Client) send(ctx context.Context, method, path string, query url.Values, header http.Header, body any) (int, http.Header, []byte, error) {
	u := c.base.String() + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("client: %s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set(PreflightHeader, "1")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.o.UserAgent)
	if c.o.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Key)
	}
	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, resp.Header, nil, fmt.Errorf("client: %s %s: read answer: %w", method, path, err)
	}
	return resp.StatusCode, resp.Header, b, nil
}

// problemOf returns the problem of an error answer; an answer that is not
// a problem document becomes one with code "http_<status>".
func problemOf(status int, body []byte) *Problem {
	p := &Problem{}
	if err := json.Unmarshal(body, p); err != nil || p.Status == 0 {
		return &Problem{Status: status, Title: http.StatusText(status), Code: "http_" + strconv.Itoa(status), Detail: strings.TrimSpace(string(body))}
	}
	return p
}

// seg escapes one path segment (a run id, a name).
func seg(s string) string { return url.PathEscape(s) }

// AsProblem returns the *Problem in err's chain, if any.
func AsProblem(err error) (*Problem, bool) {
	var p *Problem
	ok := errors.As(err, &p)
	return p, ok
}

// Healthz calls GET /healthz.
func (c *Client) Healthz(ctx context.Context) (Health, error) {
	var h Health
	_, _, err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil, &h)
	return h, err
}

// Readyz calls GET /readyz. A server that is not ready answers 503: the
// Health (whose Checks name what failed) comes back with a *Problem of
// status 503 and code "unavailable".
func (c *Client) Readyz(ctx context.Context) (Health, error) {
	status, _, b, err := c.send(ctx, http.MethodGet, "/readyz", nil, nil, nil)
	if err != nil {
		return Health{}, err
	}
	var h Health
	if status == http.StatusOK || status == http.StatusServiceUnavailable {
		if err := json.Unmarshal(b, &h); err != nil {
			return Health{}, fmt.Errorf("client: GET /readyz: decode answer: %w", err)
		}
	}
	switch status {
	case http.StatusOK:
		return h, nil
	case http.StatusServiceUnavailable:
		var failed []string
		for k, v := range h.Checks {
			if v != "ok" {
				failed = append(failed, k)
			}
		}
		sort.Strings(failed)
		return h, &Problem{Status: status, Title: http.StatusText(status), Code: "unavailable",
			Detail: "not ready: " + strings.Join(failed, ", ") + " failed"}
	}
	return Health{}, problemOf(status, b)
}

// OpenAPI returns the server's OpenAPI description (GET /openapi.yaml).
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	status, _, b, err := c.send(ctx, http.MethodGet, "/openapi.yaml", nil, nil, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, problemOf(status, b)
	}
	return b, nil
}

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

// PauseQueue calls POST /v1/queues/{name}/pause.
func (c *Client) PauseQueue(ctx context.Context, name string) (Queue, error) {
	var out Queue
	_, _, err := c.do(ctx, http.MethodPost, "/v1/queues/"+seg(name)+"/pause", nil, nil, nil, &out)
	return out, err
}

// ResumeQueue calls POST /v1/queues/{name}/resume.
func (c *Client) ResumeQueue(ctx context.Context, name string) (Queue, error) {
	var out Queue
	_, _, err := c.do(ctx, http.MethodPost, "/v1/queues/"+seg(name)+"/resume", nil, nil, nil, &out)
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

// ListSchedules calls GET /v1/schedules.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var out ScheduleList
	_, _, err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, nil, nil, &out)
	return out.Schedules, err
}

// PauseSchedule calls POST /v1/schedules/{name}/pause.
func (c *Client) PauseSchedule(ctx context.Context, name string) (Schedule, error) {
	var out Schedule
	_, _, err := c.do(ctx, http.MethodPost, "/v1/schedules/"+seg(name)+"/pause", nil, nil, nil, &out)
	return out, err
}

// CreateSchedule calls POST /v1/schedules.
func (c *Client) CreateSchedule(ctx context.Context, d ScheduleDefinition) (Schedule, error) {
	var out Schedule
	_, _, err := c.do(ctx, http.MethodPost, "/v1/schedules", nil, nil, d, &out)
	return out, err
}

// ReplaceSchedule calls PUT /v1/schedules/{name}.
func (c *Client) ReplaceSchedule(ctx context.Context, name string, d ScheduleDefinition) (Schedule, error) {
	var out Schedule
	_, _, err := c.do(ctx, http.MethodPut, "/v1/schedules/"+seg(name), nil, nil, d, &out)
	return out, err
}

// EditSchedule calls PATCH /v1/schedules/{name}.
func (c *Client) EditSchedule(ctx context.Context, name string, e ScheduleEdit) (Schedule, error) {
	var out Schedule
	_, _, err := c.do(ctx, http.MethodPatch, "/v1/schedules/"+seg(name), nil, nil, e, &out)
	return out, err
}

// DeleteSchedule calls DELETE /v1/schedules/{name}.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	_, _, err := c.do(ctx, http.MethodDelete, "/v1/schedules/"+seg(name), nil, nil, nil, nil)
	return err
}

// ResumeSchedule calls POST /v1/schedules/{name}/resume.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (Schedule, error) {
	var out Schedule
	_, _, err := c.do(ctx, http.MethodPost, "/v1/schedules/"+seg(name)+"/resume", nil, nil, nil, &out)
	return out, err
}

// TriggerSchedule calls POST /v1/schedules/{name}/trigger and returns the
// id of the run it started.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (string, error) {
	var out ScheduleTriggerResult
	_, _, err := c.do(ctx, http.MethodPost, "/v1/schedules/"+seg(name)+"/trigger", nil, nil, nil, &out)
	return out.RunID, err
}

// ListQueues calls GET /v1/queues.
func (c *Client) ListQueues(ctx context.Context) ([]Queue, error) {
	var out QueueList
	_, _, err := c.do(ctx, http.MethodGet, "/v1/queues", nil, nil, nil, &out)
	return out.Queues, err
}

// ListAPIKeys calls GET /v1/api-keys (admin scope).
func (c *Client) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	var out APIKeyList
	_, _, err := c.do(ctx, http.MethodGet, "/v1/api-keys", nil, nil, nil, &out)
	return out.Keys, err
}

// CreateAPIKey calls POST /v1/api-keys (admin scope). The answer holds the
// key's secret, which the server never shows again.
func (c *Client) CreateAPIKey(ctx context.Context, name, scope string) (CreatedAPIKey, error) {
	var out CreatedAPIKey
	_, _, err := c.do(ctx, http.MethodPost, "/v1/api-keys", nil, nil, CreateAPIKeyRequest{Name: name, Scope: scope}, &out)
	return out, err
}

// RevokeAPIKey calls DELETE /v1/api-keys/{key} with a key's id or name
// (admin scope).
func (c *Client) RevokeAPIKey(ctx context.Context, idOrName string) (APIKey, error) {
	var out APIKey
	_, _, err := c.do(ctx, http.MethodDelete, "/v1/api-keys/"+seg(idOrName), nil, nil, nil, &out)
	return out, err
}

package client

import (
	"context"
	"net/http"
)

// The operator's calls about the rest: queues, schedules and API keys.

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

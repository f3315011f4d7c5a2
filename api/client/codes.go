package client

import "net/http"

// Problem codes: the "code" member of a problem answer (Problem.Code).
// Package api answers with these; branch on them, or on the status with
// IsNotFound, IsConflict, IsUnauthorized and IsForbidden.
const (
	// CodeBadRequest: the request is malformed in a way no other code names.
	CodeBadRequest = "bad_request"
	// CodeInvalidJSON: the body is not JSON, has unknown fields or trailing data.
	CodeInvalidJSON = "invalid_json"
	// CodeInvalidName: a workflow, schedule, step or key name is not valid.
	CodeInvalidName = "invalid_name"
	// CodeInvalidParameter: a query parameter, header or body field is not valid.
	CodeInvalidParameter = "invalid_parameter"
	// CodeInvalidInput: the workflow refused the run's input.
	CodeInvalidInput = "invalid_input"
	// CodeBodyTooLarge: the body is over the server's limit.
	CodeBodyTooLarge = "body_too_large"
	// CodeUnsupportedMedia: the body is not application/json.
	CodeUnsupportedMedia = "unsupported_media_type"
	// CodeUnauthorized: no API key, or one that is malformed, unknown or revoked.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden: the key's scope does not allow the route, or a keyless
	// server refused a request from another site or host.
	CodeForbidden = "forbidden"
	// CodeNotFound: no such route, or no such API key.
	CodeNotFound = "not_found"
	// CodeWorkflowNotFound: no workflow of that name.
	CodeWorkflowNotFound = "workflow_not_found"
	// CodeRunNotFound: no run with that id.
	CodeRunNotFound = "run_not_found"
	// CodeStepNotFound: the run has no such step, or it is not dead.
	CodeStepNotFound = "step_not_found"
	// CodeScheduleNotFound: no schedule of that name.
	CodeScheduleNotFound = "schedule_not_found"
	// CodeScheduleDisabled: the schedule was disabled and cannot be triggered.
	CodeScheduleDisabled = "schedule_disabled"
	// CodeMethodNotAllowed: the path exists but not with this method.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeIdempotencyConflict: the idempotency key was used with another
	// input; Problem.RunID is the existing run.
	CodeIdempotencyConflict = "idempotency_conflict"
	// CodeConflict: the request conflicts with the current state.
	CodeConflict = "conflict"
	// CodeRunFinished: the run has finished already.
	CodeRunFinished = "run_finished"
	// CodeAmbiguousID: the run id prefix is the start of more than one
	// run's id; Problem.Matches lists them.
	CodeAmbiguousID = "ambiguous_id"
	// CodeRetryRefused: the run has nothing to retry.
	CodeRetryRefused = "retry_refused"
	// CodeEventConflict: the event id was published before with another
	// name or payload.
	CodeEventConflict = "event_conflict"
	// CodeStepNotWaiting: a signal of a step that is not parked waiting
	// for one (not ready yet, finished, or a sleep).
	CodeStepNotWaiting = "step_not_waiting"
	// CodeUnavailable: the server is stopping, or its store does not answer.
	CodeUnavailable = "unavailable"
	// CodeInternal: the server failed; its log has the cause.
	CodeInternal = "internal"
)

// IsNotFound reports whether err is a 404 answer (a run, workflow,
// schedule, step or key that does not exist, or no such route).
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is a 409 answer (an idempotency key used
// with another input, a finished run, a disabled schedule...).
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsUnauthorized reports whether err is a 401 answer: no key, or a key
// that is malformed, unknown or revoked.
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsForbidden reports whether err is a 403 answer: the key's scope does
// not allow the route.
func IsForbidden(err error) bool { return hasStatus(err, http.StatusForbidden) }

func hasStatus(err error, status int) bool {
	p, ok := AsProblem(err)
	return ok && p.Status == status
}

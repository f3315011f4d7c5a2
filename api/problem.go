package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// problemTypeBase prefixes a problem's code to make its type URI.
const problemTypeBase = "urn:dagflow:problem:"

// Problem codes: the "code" member of a problem answer. They are
// package client's constants, so that callers of either package branch on
// the same names.
const (
	CodeBadRequest          = client.CodeBadRequest
	CodeInvalidJSON         = client.CodeInvalidJSON
	CodeInvalidName         = client.CodeInvalidName
	CodeStepNotWaiting      = client.CodeStepNotWaiting
	CodeInvalidParameter    = client.CodeInvalidParameter
	CodeInvalidInput        = client.CodeInvalidInput
	CodeBodyTooLarge        = client.CodeBodyTooLarge
	CodeUnsupportedMedia    = client.CodeUnsupportedMedia
	CodeUnauthorized        = client.CodeUnauthorized
	CodeForbidden           = client.CodeForbidden
	CodeNotFound            = client.CodeNotFound
	CodeWorkflowNotFound    = client.CodeWorkflowNotFound
	CodeRunNotFound         = client.CodeRunNotFound
	CodeStepNotFound        = client.CodeStepNotFound
	CodeScheduleNotFound    = client.CodeScheduleNotFound
	CodeScheduleDisabled    = client.CodeScheduleDisabled
	CodeMethodNotAllowed    = client.CodeMethodNotAllowed
	CodeIdempotencyConflict = client.CodeIdempotencyConflict
	CodeConflict            = client.CodeConflict
	CodeRunFinished         = client.CodeRunFinished
	CodeRetryRefused        = client.CodeRetryRefused
	CodeAmbiguousID         = client.CodeAmbiguousID
	CodeEventConflict       = client.CodeEventConflict
	CodeUnavailable         = client.CodeUnavailable
	CodeInternal            = client.CodeInternal
)

// apiError is an error a handler returns to answer with a problem.
type apiError struct {
	status int
	code   string
	detail string
	runID  string
	// matches are the runs an ambiguous run id prefix matches.
	matches []string
	err     error // the cause, logged for 5xx answers
}

func (e *apiError) Error() string { return e.detail }

func (e *apiError) Unwrap() error { return e.err }

// problemf returns an apiError with a formatted detail.
func problemf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, detail: fmt.Sprintf(format, args...)}
}

// problemOf maps an error of a handler (an *apiError, or an error of the
// engine or the store) to the problem to answer with. An error it does
// not know is a 500 whose detail hides the cause (which is logged).
func problemOf(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ic *persistence.IdempotencyConflictError
	var rr *engine.RetryRefusedError
	var te *persistence.TransitionError
	var ve *persistence.ValidationError
	var amb *engine.AmbiguousIDError
	switch {
	case errors.As(err, &amb):
		return &apiError{status: http.StatusConflict, code: CodeAmbiguousID, matches: amb.Matches, err: err,
			detail: fmt.Sprintf("run id prefix %q is the start of more than one run's id: %s; give more of the id", amb.Prefix, matchList(amb))}
	case errors.As(err, &ic):
		return &apiError{status: http.StatusConflict, code: CodeIdempotencyConflict, runID: ic.RunID, err: err,
			detail: fmt.Sprintf("idempotency key %q of workflow %q was already used by run %s with a different input", ic.Key, ic.Workflow, ic.RunID)}
	case errors.Is(err, engine.ErrInvalidSchedule):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidParameter, detail: err.Error(), err: err}
	case errors.Is(err, persistence.ErrScheduleExists):
		return &apiError{status: http.StatusConflict, code: CodeConflict, detail: err.Error(), err: err}
	case errors.Is(err, engine.ErrUnknownWorkflow):
		return &apiError{status: http.StatusNotFound, code: CodeWorkflowNotFound, detail: err.Error(), err: err}
	case errors.Is(err, persistence.ErrRunNotFound):
		return &apiError{status: http.StatusNotFound, code: CodeRunNotFound, detail: err.Error(), err: err}
	case errors.Is(err, persistence.ErrStepNotFound):
		return &apiError{status: http.StatusNotFound, code: CodeStepNotFound, detail: err.Error(), err: err}
	case errors.Is(err, persistence.ErrScheduleNotFound):
		return &apiError{status: http.StatusNotFound, code: CodeScheduleNotFound, detail: err.Error(), err: err}
	case errors.Is(err, cron.ErrDisabled):
		return &apiError{status: http.StatusConflict, code: CodeScheduleDisabled, detail: err.Error(), err: err}
	case errors.As(err, &rr):
		return &apiError{status: http.StatusConflict, code: CodeRetryRefused, runID: rr.RunID, detail: err.Error(), err: err}
	case errors.Is(err, persistence.ErrRunFinished):
		return &apiError{status: http.StatusConflict, code: CodeRunFinished, detail: err.Error(), err: err}
	case errors.As(err, &te):
		return &apiError{status: http.StatusConflict, code: CodeConflict, runID: te.RunID, detail: err.Error(), err: err}
	case errors.Is(err, persistence.ErrInvalidTransition):
		return &apiError{status: http.StatusConflict, code: CodeConflict, detail: err.Error(), err: err}
	case errors.Is(err, engine.ErrNotWaiting):
		return &apiError{status: http.StatusConflict, code: CodeStepNotWaiting, detail: err.Error(), err: err}
	case errors.Is(err, engine.ErrEventConflict):
		return &apiError{status: http.StatusConflict, code: CodeEventConflict, detail: err.Error(), err: err}
	case errors.Is(err, engine.ErrInvalidEvent):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidParameter, detail: err.Error(), err: err}
	case errors.Is(err, engine.ErrInvalidPriority), errors.Is(err, engine.ErrInvalidQueue):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidParameter, detail: err.Error(), err: err}
	case errors.Is(err, engine.ErrReservedKey), errors.Is(err, engine.ErrInvalidKey):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidParameter, detail: err.Error(), err: err}
	case errors.Is(err, engine.ErrInvalidInput):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidInput, detail: err.Error(), err: err}
	case errors.Is(err, persistence.ErrTooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: CodeBodyTooLarge, detail: err.Error(), err: err}
	case errors.As(err, &ve):
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidParameter, detail: err.Error(), err: err}
	case errors.Is(err, engine.ErrStopped):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, detail: "the engine is stopping", err: err}
	}
	return &apiError{status: http.StatusInternalServerError, code: CodeInternal,
		detail: "internal error; the server log has the cause", err: err}
}

// writeProblem answers with the problem as application/problem+json.
func writeProblem(w http.ResponseWriter, ae *apiError) {
	p := client.Problem{
		Type:    problemTypeBase + ae.code,
		Title:   http.StatusText(ae.status),
		Status:  ae.status,
		Detail:  ae.detail,
		Code:    ae.code,
		RunID:   ae.runID,
		Matches: ae.matches,
	}
	b, err := json.Marshal(p)
	if err != nil {
		http.Error(w, ae.detail, ae.status)
		return
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(ae.status)
	w.Write(b)
}

// matchList lists the runs an ambiguous prefix matches, for a detail.
func matchList(amb *engine.AmbiguousIDError) string {
	list := strings.Join(amb.Matches, ", ")
	if amb.More {
		list += " and more"
	}
	return list
}

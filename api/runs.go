package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/clip"
	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/persistence"
)

// maxIdempotencyKey is the longest idempotency key, in bytes (the stores'
// limit).
const maxIdempotencyKey = 255

// triggerRun starts a run: POST /v1/workflows/{name}/runs. With an
// idempotency key, the first call answers 201 and a repeat with the same
// input 200 with the same run; the key with another input is a 409 naming
// the existing run.
func (s *server) triggerRun(w http.ResponseWriter, r *http.Request) error {
	name, err := workflowName(r, "name")
	if err != nil {
		return err
	}
	var req client.TriggerRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	// An empty key, in the header or the body, is no key.
	key := req.IdempotencyKey
	if hks := r.Header.Values("Idempotency-Key"); len(hks) > 1 {
		return problemf(http.StatusBadRequest, CodeInvalidParameter, "the Idempotency-Key header is given %d times; give it once", len(hks))
	}
	if hk := r.Header.Get("Idempotency-Key"); hk != "" {
		if key != "" && key != hk {
			return problemf(http.StatusBadRequest, CodeInvalidParameter, "the Idempotency-Key header %q and the body's idempotency_key %q differ; give one", clip.String(hk), clip.String(key))
		}
		key = hk
	}
	if len(key) > maxIdempotencyKey {
		return problemf(http.StatusBadRequest, CodeInvalidParameter, "idempotency key %q is %d bytes, over the limit of %d", clip.String(key), len(key), maxIdempotencyKey)
	}
	// Refused before anything is created: a reserved key (a schedule
	// tick's, an event's, a child's) or one of only whitespace.
	if err := engine.CheckIdempotencyKey(key); err != nil {
		return err
	}
	var opts []engine.TriggerOption
	if key != "" {
		opts = append(opts, engine.IdempotencyKey(key))
	}
	if len(req.Metadata) > 0 {
		opts = append(opts, engine.Metadata(req.Metadata))
	}
	if req.Priority != 0 {
		opts = append(opts, engine.Priority(req.Priority))
	}
	if req.StartAt != nil {
		opts = append(opts, engine.StartAt(*req.StartAt))
	}
	input, err := normalizeInput(req.Input)
	if err != nil {
		return err
	}
	id, created, err := s.trigger(callerTrace(s.e, r), name, input, opts)
	if err != nil {
		return err
	}
	info, err := s.e.Get(engine.ReadPrimary(r.Context()), id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", s.runURL(id))
	}
	return writeJSON(w, status, toRun(info.Run))
}

// callerTrace returns the request's context joined to the caller's
// trace: the W3C traceparent and tracestate headers, when the engine
// traces, so that the run's trigger span is a child of the caller's span.
// A malformed traceparent is ignored (the run starts a trace of its own),
// as the W3C recommendation asks.
func callerTrace(e *engine.Engine, r *http.Request) context.Context {
	if !e.Tracing() || r.Header.Get("traceparent") == "" {
		return r.Context()
	}
	return propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
}

// runURL is the path of a run, under Options.BasePath.
func (s *server) runURL(id string) string {
	return s.o.BasePath + "/v1/runs/" + url.PathEscape(id)
}

// normalizeInput returns a run's input in one canonical form, so that an
// idempotent repeat that differs only in its JSON's spelling (whitespace,
// the order of an object's keys) is the same input: decoded with numbers
// kept as their text, and encoded again (objects' keys sorted, no HTML
// escaping). An absent input and JSON null are both no input (nil).
func normalizeInput(raw json.RawMessage) (any, error) { return normalizeJSON(raw, "input") }

// normalizeJSON is normalizeInput for the body field named field (an
// event's payload, say).
func normalizeJSON(raw json.RawMessage, field string) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body's %s is not valid JSON: %v", field, err)
	}
	if v == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body's %s cannot be encoded again: %v", field, err)
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// trigger starts a run and tells whether this call created it: the
// store's insert decides (engine.Created), so of concurrent calls with one
// key, on any number of nodes, exactly one answers 201.
func (s *server) trigger(ctx context.Context, workflow string, input any, opts []engine.TriggerOption) (string, bool, error) {
	var created bool
	id, err := s.e.Trigger(ctx, workflow, input, append(opts, engine.Created(&created))...)
	return id, created, err
}

// listRuns lists runs: GET /v1/runs.
func (s *server) listRuns(w http.ResponseWriter, r *http.Request) error {
	q, err := queryValues(r, "workflow", "status", "created_after", "created_before", "idempotency_key", "cursor", "limit", "include")
	if err != nil {
		return err
	}
	inc, err := includeParam(q)
	if err != nil {
		return err
	}
	// Without payloads asked for, the store does not read them.
	f := engine.RunFilter{NoPayloads: !inc.input && !inc.output}
	if f.Workflow, err = nameParam(q, "workflow"); err != nil {
		return err
	}
	for _, v := range q["status"] {
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if !persistence.RunStatus(st).Valid() {
				return problemf(http.StatusBadRequest, CodeInvalidParameter, "status %q is not a run status (want one of: %s)", clip.String(st), persistence.RunStatusList())
			}
			f.Status = append(f.Status, persistence.RunStatus(st))
		}
	}
	if f.CreatedAfter, err = timeParam(q, "created_after"); err != nil {
		return err
	}
	if f.CreatedBefore, err = timeParam(q, "created_before"); err != nil {
		return err
	}
	if err := setIdempotencyFilter(&f, q); err != nil {
		return err
	}
	if f.Cursor, err = single(q, "cursor"); err != nil {
		return err
	}
	if f.Limit, err = limitParam(q); err != nil {
		return err
	}
	page, err := s.e.Runs(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, client.RunList{Runs: toListedRuns(page.Runs, inc), NextCursor: page.NextCursor})
}

// getRun shows a run with its steps, attempts and outputs: GET /v1/runs/{id}.
func (s *server) getRun(w http.ResponseWriter, r *http.Request) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	info, err := s.e.Get(r.Context(), id)
	if err != nil {
		return withRun(err, id)
	}
	return writeJSON(w, http.StatusOK, toRunDetail(info))
}

// cancelRun cancels an unfinished run: POST /v1/runs/{id}/cancel.
func (s *server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	if err := s.e.Cancel(r.Context(), id); err != nil {
		return withRun(err, id)
	}
	info, err := s.e.Get(engine.ReadPrimary(r.Context()), id)
	if err != nil {
		return withRun(err, id)
	}
	return writeJSON(w, http.StatusOK, toRun(info.Run))
}

// signalStep completes a step parked waiting for a signal (or an event)
// with the body's payload as its output: POST
// /v1/runs/{id}/steps/{step}/signal. It answers the run with its steps.
func (s *server) signalStep(w http.ResponseWriter, r *http.Request) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	step := r.PathValue("step")
	if !dag.ValidName(step) {
		return problemf(http.StatusBadRequest, CodeInvalidName, "step name %q is not valid", clip.String(step))
	}
	var req client.SignalRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	payload, err := normalizeJSON(req.Payload, "payload")
	if err != nil {
		return err
	}
	if err := s.e.Signal(r.Context(), id, step, payload); err != nil {
		return withRun(err, id)
	}
	info, err := s.e.Get(engine.ReadPrimary(r.Context()), id)
	if err != nil {
		return withRun(err, id)
	}
	return writeJSON(w, http.StatusOK, toRunDetail(info))
}

// retryRun runs a finished run again: POST /v1/runs/{id}/retry with an
// optional body {mode: failed|from_step, step}. Without a body it retries
// the failed steps.
func (s *server) retryRun(w http.ResponseWriter, r *http.Request) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	var req client.RetryRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	var again []string
	switch req.Mode {
	case "", client.RetryFailed:
		if req.Step != "" {
			return problemf(http.StatusBadRequest, CodeInvalidParameter, "mode %q retries every dead step and takes no step (got %q); retry one with POST /v1/dead-letters/{run}/{step}/retry", client.RetryFailed, clip.String(req.Step))
		}
		again, err = s.e.RetryRun(r.Context(), id, actor(r))
	case client.RetryFromStep:
		if req.Step == "" {
			return problemf(http.StatusBadRequest, CodeInvalidParameter, "mode %q needs the step to rerun from (step)", client.RetryFromStep)
		}
		if !names.Valid(req.Step) {
			return problemf(http.StatusBadRequest, CodeInvalidName, "step name %q is not valid: want %s", clip.String(req.Step), names.Rule)
		}
		again, err = s.e.RetryFrom(r.Context(), id, req.Step, actor(r))
	default:
		return problemf(http.StatusBadRequest, CodeInvalidParameter, "mode %q is not %q or %q", clip.String(req.Mode), client.RetryFailed, client.RetryFromStep)
	}
	if err != nil {
		return withRun(err, id)
	}
	info, err := s.e.Get(engine.ReadPrimary(r.Context()), id)
	if err != nil {
		return withRun(err, id)
	}
	if again == nil {
		again = []string{}
	}
	return writeJSON(w, http.StatusOK, client.RetryRunResult{Run: toRun(info.Run), Steps: again})
}

// skipStep gives a dead step an operator's output and resumes its run:
// POST /v1/runs/{id}/steps/{step}/skip with a body {output}.
func (s *server) skipStep(w http.ResponseWriter, r *http.Request) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	step, err := stepName(r)
	if err != nil {
		return err
	}
	var req client.SkipRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	out, err := normalizeJSON(req.Output, "output")
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if out != nil {
		if raw, err = json.Marshal(out); err != nil {
			return err
		}
	}
	if err := s.e.SkipStep(r.Context(), id, step, raw, actor(r)); err != nil {
		return withRun(err, id)
	}
	info, err := s.e.Get(engine.ReadPrimary(r.Context()), id)
	if err != nil {
		return withRun(err, id)
	}
	return writeJSON(w, http.StatusOK, toRunDetail(info))
}

// withRun maps err to a problem that names the run it is about.
func withRun(err error, id string) error {
	ae := problemOf(err)
	if ae.runID == "" && ae.status < 500 {
		cp := *ae
		cp.runID = id
		return &cp
	}
	return ae
}

// pauseRun pauses an unfinished run: POST /v1/runs/{id}/pause.
func (s *server) pauseRun(w http.ResponseWriter, r *http.Request) error {
	return s.setRunPaused(w, r, true)
}

// resumeRun resumes a paused run: POST /v1/runs/{id}/resume.
func (s *server) resumeRun(w http.ResponseWriter, r *http.Request) error {
	return s.setRunPaused(w, r, false)
}

func (s *server) setRunPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	if paused {
		err = s.e.PauseRun(r.Context(), id)
	} else {
		err = s.e.ResumeRun(r.Context(), id)
	}
	if err != nil {
		return withRun(err, id)
	}
	info, err := s.e.Get(engine.ReadPrimary(r.Context()), id)
	if err != nil {
		return withRun(err, id)
	}
	return writeJSON(w, http.StatusOK, toRun(info.Run))
}

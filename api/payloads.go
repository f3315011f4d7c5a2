package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/clip"
	"github.com/dagflow/dagflow/persistence"
)

// MaxInlinePayload is the largest payload (a run's input or output, a
// step's output), in bytes of JSON, that an answer holds inline. A larger
// one is null in the answer, with a client.PayloadRef beside it naming its
// size and the route that serves it whole: an answer about a run stays
// small however large its payloads, and so does the memory that serving
// it takes.
const MaxInlinePayload = 64 << 10

// inline returns a stored payload for an answer: itself (JSON null when
// empty) when it is at most MaxInlinePayload bytes, else null and a
// reference to path, the route that serves it.
func inline(b []byte, path string) (json.RawMessage, *client.PayloadRef) {
	if len(b) <= MaxInlinePayload {
		return rawJSON(b), nil
	}
	return json.RawMessage("null"), &client.PayloadRef{Bytes: len(b), URL: path}
}

// runPayloadPath is the route that serves a run's input or output (kind).
func runPayloadPath(id, kind string) string {
	return "/v1/runs/" + url.PathEscape(id) + "/" + kind
}

// stepOutputPath is the route that serves a step's output.
func stepOutputPath(id, step string) string {
	return "/v1/runs/" + url.PathEscape(id) + "/steps/" + url.PathEscape(step) + "/output"
}

// include is what a listing of runs holds of their payloads.
type include struct{ input, output bool }

// includeParam reads ?include=input,output (repeated or comma-separated).
func includeParam(q url.Values) (include, error) {
	var inc include
	for _, v := range q["include"] {
		for _, f := range strings.Split(v, ",") {
			switch strings.TrimSpace(f) {
			case "input":
				inc.input = true
			case "output":
				inc.output = true
			default:
				return include{}, problemf(http.StatusBadRequest, CodeInvalidParameter, "include %q is not input or output", clip.String(f))
			}
		}
	}
	return inc, nil
}

// toListedRuns converts a page of runs with the payloads inc asks for,
// each inline or a reference.
func toListedRuns(rs []persistence.Run, inc include) []client.Run {
	out := make([]client.Run, len(rs))
	for i, r := range rs {
		c := toRun(r)
		if !inc.input {
			c.Input, c.InputRef = nil, nil
		}
		if !inc.output {
			c.Output, c.OutputRef = nil, nil
		}
		out[i] = c
	}
	return out
}

// getRunInput serves a run's input whole: GET /v1/runs/{id}/input.
func (s *server) getRunInput(w http.ResponseWriter, r *http.Request) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	run, err := s.e.GetRun(r.Context(), id)
	if err != nil {
		return withRun(err, id)
	}
	return writePayload(w, run.Input)
}

// getRunOutput serves a run's result whole (RunDetail's output): GET
// /v1/runs/{id}/output.
func (s *server) getRunOutput(w http.ResponseWriter, r *http.Request) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	run, err := s.e.GetRun(r.Context(), id)
	if err != nil {
		return withRun(err, id)
	}
	if run.Output != nil {
		return writePayload(w, run.Output)
	}
	info, err := s.e.Get(r.Context(), id)
	if err != nil {
		return withRun(err, id)
	}
	return writePayload(w, info.Output())
}

// getStepOutput serves a step's output whole: GET
// /v1/runs/{id}/steps/{step}/output.
func (s *server) getStepOutput(w http.ResponseWriter, r *http.Request) error {
	id, err := s.runID(r, "id")
	if err != nil {
		return err
	}
	step, err := stepName(r)
	if err != nil {
		return err
	}
	if _, err := s.e.GetRun(r.Context(), id); err != nil {
		return withRun(err, id)
	}
	st, err := s.e.GetStep(r.Context(), id, step)
	if err != nil {
		return withRun(err, id)
	}
	return writePayload(w, st.Output)
}

// writePayload answers with a stored JSON payload as it is (null for
// none), without copying it.
func writePayload(w http.ResponseWriter, b []byte) error {
	if len(b) == 0 {
		b = []byte("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return nil
}

// runOutput returns a run's result for its detail: inline, or a
// reference when it is large (without building it).
func runOutput(info engine.RunInfo) (json.RawMessage, *client.PayloadRef) {
	if n := info.OutputSize(); n > MaxInlinePayload {
		return json.RawMessage("null"), &client.PayloadRef{Bytes: n, URL: runPayloadPath(info.Run.ID, "output")}
	}
	return rawJSON(info.Output()), nil
}

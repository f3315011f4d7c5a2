package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/internal/clip"
	"github.com/dagflow/dagflow/internal/names"
)

// Checks of path and query parameters: a bad value is a 400 naming it.

// maxRunIDLen bounds a run id in a path.
const maxRunIDLen = 100

// workflowName returns the {name} path value, a workflow name.
func workflowName(r *http.Request, param string) (string, error) {
	name := r.PathValue(param)
	if !names.Valid(name) {
		return "", problemf(http.StatusBadRequest, CodeInvalidName, "workflow name %q is not valid: want %s", clip.String(name), names.Rule)
	}
	return name, nil
}

// scheduleName returns the {name} path value, a schedule name.
func scheduleName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !names.Valid(name) {
		return "", problemf(http.StatusBadRequest, CodeInvalidName, "schedule name %q is not valid: want %s", clip.String(name), names.Rule)
	}
	return name, nil
}

// queueName returns the {name} path value, a queue name.
func queueName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !names.Valid(name) {
		return "", problemf(http.StatusBadRequest, CodeInvalidName, "queue name %q is not valid: want %s", clip.String(name), names.Rule)
	}
	return name, nil
}

// stepName returns the {step} path value, a step name.
func stepName(r *http.Request) (string, error) {
	name := r.PathValue("step")
	if !names.Valid(name) {
		return "", problemf(http.StatusBadRequest, CodeInvalidName, "step name %q is not valid: want %s", clip.String(name), names.Rule)
	}
	return name, nil
}

// runID returns the run a run id path value names: 1 to 100 letters,
// digits, '-', '_', '.' or ':' (run ids are UUIDs), a whole id or a
// unique prefix of one (engine.ResolveRunID: a shared prefix is a 409
// ambiguous_id listing the matches).
func (s *server) runID(r *http.Request, param string) (string, error) {
	id := r.PathValue(param)
	if err := checkRunID(id); err != nil {
		return "", err
	}
	return s.e.ResolveRunID(r.Context(), id)
}

func checkRunID(id string) error {
	ok := len(id) > 0 && len(id) <= maxRunIDLen
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
	}
	if !ok {
		return problemf(http.StatusBadRequest, CodeInvalidName, "run id %q is not valid: want 1 to %d letters, digits, '-', '_', '.' or ':'", clip.String(id), maxRunIDLen)
	}
	return nil
}

// queryValues returns the query, refusing parameters the route does not
// take (a typo would otherwise silently widen a listing).
func queryValues(r *http.Request, allowed ...string) (url.Values, error) {
	q := r.URL.Query()
	for k := range q {
		known := false
		for _, a := range allowed {
			if k == a {
				known = true
				break
			}
		}
		if !known {
			return nil, problemf(http.StatusBadRequest, CodeInvalidParameter, "unknown query parameter %q (this route takes: %s)", clip.String(k), strings.Join(allowed, ", "))
		}
	}
	return q, nil
}

// single returns a query parameter given at most once.
func single(q url.Values, name string) (string, error) {
	vs := q[name]
	if len(vs) > 1 {
		return "", problemf(http.StatusBadRequest, CodeInvalidParameter, "query parameter %q is given %d times; give it once", name, len(vs))
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0], nil
}

// maxLimit is the largest page a listing serves.
const maxLimit = 1000

// limitParam returns the limit parameter: 1..1000, 0 when absent (the
// engine's default).
func limitParam(q url.Values) (int, error) {
	s, err := single(q, "limit")
	if err != nil || s == "" {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		return 0, problemf(http.StatusBadRequest, CodeInvalidParameter, "limit %q is not a number from 1 to %d", clip.String(s), maxLimit)
	}
	return n, nil
}

// timeParam returns an RFC 3339 time parameter, zero when absent.
func timeParam(q url.Values, name string) (time.Time, error) {
	s, err := single(q, name)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, problemf(http.StatusBadRequest, CodeInvalidParameter, "%s %q is not an RFC 3339 time (like 2030-01-02T15:04:05Z)", name, clip.String(s))
	}
	return t, nil
}

// nameParam returns an optional name parameter (workflow, schedule).
func nameParam(q url.Values, name string) (string, error) {
	s, err := single(q, name)
	if err != nil || s == "" {
		return "", err
	}
	if !names.Valid(s) {
		return "", problemf(http.StatusBadRequest, CodeInvalidName, "%s %q is not valid: want %s", name, clip.String(s), names.Rule)
	}
	return s, nil
}

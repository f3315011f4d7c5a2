package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/persistence"
)

// maxShown is the most of a JSON value (a run's input or output, a
// step's output) a page shows, in bytes of its indented text. Indenting
// grows a value with its depth (20 KB of nested arrays is 200 MB
// indented), so a page cuts the text here and links to the whole value.
const maxShown = 64 << 10

// shownValue is a JSON value as a page shows it.
type shownValue struct {
	// Text is the value indented, at most maxShown bytes of it.
	Text string
	// Cut says Text is not all of it; Bytes is the value's size and URL
	// the route that serves it whole.
	Cut   bool
	Bytes int
	URL   string
}

// show returns what a page shows of a JSON value (nil for none), linking
// to url for the whole value.
func show(b []byte, url string) *shownValue {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	v := &shownValue{Bytes: len(b), URL: url}
	if json.Valid(b) {
		v.Text, v.Cut = indent(b, maxShown)
	} else {
		v.Text, v.Cut = cut(string(b), maxShown), len(b) > maxShown
	}
	return v
}

// tooLarge is what a page shows of a value it does not read at all (a
// run's result larger than the page would show anything of).
func tooLarge(n int, url string) *shownValue {
	return &shownValue{Cut: true, Bytes: n, URL: url}
}

// indent returns b (valid JSON) indented by two spaces, as json.Indent
// does, and stops once the text is limit bytes long: it returns the text
// and whether it stopped before the end.
func indent(b []byte, limit int) (string, bool) {
	var out strings.Builder
	depth := 0
	inString, escaped := false, false
	newline := func() {
		out.WriteByte('\n')
		for i := 0; i < depth && out.Len() < limit; i++ {
			out.WriteString("  ")
		}
	}
	for i := 0; i < len(b); i++ {
		if out.Len() >= limit {
			return cut(out.String(), limit), true
		}
		c := b[i]
		if inString {
			out.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			inString = true
			out.WriteByte(c)
		case '{', '[':
			out.WriteByte(c)
			if j := skipSpace(b, i+1); j < len(b) && (b[j] == '}' || b[j] == ']') {
				out.WriteByte(b[j]) // an empty one stays "[]"
				i = j
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			out.WriteByte(c)
		case ',':
			out.WriteByte(c)
			newline()
		case ':':
			out.WriteString(": ")
		default:
			out.WriteByte(c)
		}
	}
	if out.Len() > limit {
		return cut(out.String(), limit), true
	}
	return out.String(), false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// cut returns s cut to at most n bytes, at a character's start.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// payloadURL is the dashboard's route that serves a run's payload whole:
// kind "input" or "output" of the run, or with a step, its output.
func (d *Dashboard) payloadURL(runID, step, kind string) string {
	if step != "" {
		return d.path("/runs/" + urlPathEscape(runID) + "/steps/" + urlPathEscape(step) + "/output")
	}
	return d.path("/runs/" + urlPathEscape(runID) + "/" + kind)
}

// runPayload serves a run's input or output whole, redacted as on its
// page: GET /runs/{id}/input and /runs/{id}/output. Like the page it shows
// a run's output only once it succeeded.
func (d *Dashboard) runPayload(kind string) func(w http.ResponseWriter, r *http.Request, s *session) error {
	return func(w http.ResponseWriter, r *http.Request, s *session) error {
		ctx := r.Context()
		id := r.PathValue("id")
		run, err := d.e.GetRun(ctx, id)
		if errors.Is(err, persistence.ErrRunNotFound) {
			return &httpError{status: http.StatusNotFound, msg: "There is no run " + truncate(id) + "."}
		}
		if err != nil {
			return err
		}
		p := Payload{Workflow: run.Workflow, RunID: run.ID, Kind: kind}
		if kind == "input" {
			return writeValue(w, d.redact(p, run.Input))
		}
		if run.Status != persistence.RunSucceeded {
			return writeValue(w, nil)
		}
		if run.Output != nil {
			return writeValue(w, d.redact(p, run.Output))
		}
		ri, err := d.e.Get(ctx, id)
		if err != nil {
			return err
		}
		return writeValue(w, d.redact(p, ri.Output()))
	}
}

// stepPayload serves a step's output whole, redacted as on its run's
// page: GET /runs/{id}/steps/{step}/output.
func (d *Dashboard) stepPayload(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx := r.Context()
	id, step := r.PathValue("id"), r.PathValue("step")
	if !names.Valid(step) {
		return &httpError{status: http.StatusBadRequest, msg: "Step name " + truncate(step) + " is not valid."}
	}
	run, err := d.e.GetRun(ctx, id)
	if errors.Is(err, persistence.ErrRunNotFound) {
		return &httpError{status: http.StatusNotFound, msg: "There is no run " + truncate(id) + "."}
	}
	if err != nil {
		return err
	}
	st, err := d.e.GetStep(ctx, id, step)
	if errors.Is(err, persistence.ErrStepNotFound) {
		return &httpError{status: http.StatusNotFound, msg: "Run " + truncate(id) + " has no step " + truncate(step) + "."}
	}
	if err != nil {
		return err
	}
	return writeValue(w, d.redact(Payload{Workflow: run.Workflow, RunID: run.ID, Step: step, Kind: "output"}, st.Output))
}

// redact is Config.Redact for a value there is (a page redacts no
// absent one).
func (d *Dashboard) redact(p Payload, b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return d.cfg.Redact(p, b)
}

// writeValue answers with a JSON value as it is (null for none).
func writeValue(w http.ResponseWriter, b []byte) error {
	if len(b) == 0 {
		b = []byte("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return nil
}

package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/internal/clip"
)

// Reading requests: the JSON body, and the path as errors quote it.

// echoPath is the request's path as an error message quotes it: secrets
// redacted, a long path cut.
func echoPath(r *http.Request) string { return clip.String(redactPath(r.URL.Path)) }

// decodeBody decodes a JSON request body into v: an empty body leaves v
// as it is; a body that is not JSON, has unknown fields or trailing data,
// or is over the limit is a problem naming what was wrong.
func decodeBody(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return problemf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type %q is not application/json", clip.String(ct))
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return problemf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the request body is over the limit of %d bytes", mbe.Limit)
		}
		return problemf(http.StatusBadRequest, CodeBadRequest, "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		var pe *time.ParseError
		switch {
		case errors.As(err, &se):
			return problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body is not valid JSON: %v (at byte %d)", err, se.Offset)
		case errors.As(err, &te):
			return problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body's field %q must be %s, not %s", te.Field, te.Type, te.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body is not valid JSON: it ends early")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.TrimPrefix(err.Error(), "json: unknown field ")
			if uq, uerr := strconv.Unquote(field); uerr == nil {
				field = strconv.Quote(clip.String(uq))
			}
			return problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body has an unknown field %s", field)
		case errors.As(err, &pe):
			return problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body has a time %q that is not RFC 3339 (like 2030-01-02T15:04:05Z)", clip.String(pe.Value))
		}
		return problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body is not valid: %v", err)
	}
	if dec.More() {
		return problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body has data after its JSON value")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return problemf(http.StatusBadRequest, CodeInvalidJSON, "the request body has data after its JSON value")
	}
	return nil
}

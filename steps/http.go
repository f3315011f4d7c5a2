package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits of the built-in HTTP step that it does not set itself.
const (
	// DefaultHTTPMaxResponseBytes caps the response body an [HTTP] step
	// reads: 1 MiB. A larger successful response is a permanent failure.
	DefaultHTTPMaxResponseBytes = 1 << 20
	// DefaultHTTPMaxRetryAfter caps the delay a response's Retry-After
	// may ask for: 5 minutes.
	DefaultHTTPMaxRetryAfter = 5 * time.Minute
	// httpErrorSnippet is how much of a failed response's body its error
	// quotes.
	httpErrorSnippet = 256
)

// HTTPMethods are the methods an [HTTP] step may use.
var HTTPMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// HTTP is the built-in step that calls an HTTP endpoint: `kind: http` in
// a YAML workflow, or a [Handler] of its own in Go. Every attempt sends
// the step's idempotency key ([Context].IdempotencyKey, the same on every
// attempt) as the Idempotency-Key header.
//
// The response decides the outcome:
//
//   - 2xx: success. A body that is JSON is the step's output as it is; any
//     other body is the output as a JSON string of its text; an empty
//     body is no output; a header value the body echoes is blanked (see
//     below). A body over MaxResponseBytes is a permanent failure.
//   - 3xx: redirects are not followed (the step's headers, secrets
//     included, would go to another address): a permanent failure naming
//     the Location.
//   - 408, 429, 5xx and network errors (timeouts included): a retry, after
//     the response's Retry-After (seconds or an HTTP date) capped by
//     MaxRetryAfter when it has one, else after the step's backoff.
//   - any other status: a permanent failure (the step is dead-lettered).
//
// Failures quote the status and the first bytes of the body, and a
// redirect its Location, each cut to a few hundred bytes. The step's
// header values are blanked, as "[redacted]", out of everything it stores
// (errors and output) before anything is cut: every value taken from the
// environment, and the whole value of every header of 8 bytes or more
// but Accept, Accept-Encoding, Accept-Language, Content-Type and
// User-Agent. A JSON output with a value blanked is encoded again (its
// object keys sorted), so it stays JSON.
type HTTP struct {
	// URL is the absolute http or https address to call.
	URL string
	// Method is one of [HTTPMethods]; empty means POST with a Body, GET
	// without.
	Method string
	// Headers are sent with every attempt. A value may hold ${env:NAME}
	// references, replaced by the environment variable's value at each
	// attempt (an unset variable is a permanent failure).
	Headers map[string]string
	// HeadersFromEnv maps a header to the environment variable holding its
	// whole value.
	HeadersFromEnv map[string]string
	// Body builds the JSON request body for an attempt (nil: no body).
	// Content-Type: application/json goes with it unless Headers set one.
	Body func(ctx context.Context, sc Context) (json.RawMessage, error)
	// MaxResponseBytes caps the response body read (0:
	// [DefaultHTTPMaxResponseBytes]).
	MaxResponseBytes int64
	// MaxRetryAfter caps the wait a Retry-After asks for (0:
	// [DefaultHTTPMaxRetryAfter]).
	MaxRetryAfter time.Duration
	// Client sends the requests (nil: a client that follows no redirect).
	// The attempt's context bounds each request: its deadline is the
	// step's timeout.
	Client *http.Client
	// Now tells the time, to read a Retry-After date (nil: time.Now).
	Now func() time.Time
	// LookupEnv reads the environment (nil: os.LookupEnv).
	LookupEnv func(string) (string, bool)
}

// HTTPConfigError is a problem with an [HTTP] step's settings. Field is
// the setting, as named in YAML ("url", "method", "headers",
// "headers_from_env", "max_response_bytes", "max_retry_after").
type HTTPConfigError struct {
	Field  string
	Reason string
}

// Error returns "steps: http <field>: <reason>".
func (e *HTTPConfigError) Error() string { return "steps: http " + e.Field + ": " + e.Reason }

var (
	// headerToken is an HTTP header name (RFC 9110 token).
	headerToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// envName is an environment variable's name.
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// envRef is a ${env:NAME} reference; its name is checked with envName.
	envRef = regexp.MustCompile(`\$\{env:([^}]*)\}`)
)

// Check reports every problem of the settings, each an
// *[HTTPConfigError] (joined with errors.Join), or nil. A step that fails
// its check fails every attempt permanently; the YAML loader refuses it.
func (h *HTTP) Check() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &HTTPConfigError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch u, err := url.Parse(h.URL); {
	case h.URL == "":
		bad("url", "missing")
	case err != nil:
		bad("url", "%q does not parse: %v", h.URL, errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		bad("url", "%q: want an absolute http or https URL", h.URL)
	case u.Host == "":
		bad("url", "%q has no host", h.URL)
	}
	if h.Method != "" && !slices.Contains(HTTPMethods, h.Method) {
		bad("method", "%q: want one of %s", h.Method, strings.Join(HTTPMethods, ", "))
	}
	seen := map[string]bool{}
	checkName := func(field, name string) bool {
		switch canon := http.CanonicalHeaderKey(name); {
		case !headerToken.MatchString(name):
			bad(field, "%q is not a header name", name)
		case canon == "Idempotency-Key":
			bad(field, "%q is set by the step: the step's idempotency key", name)
		case canon == "Host" || canon == "Content-Length":
			bad(field, "%q is set by the client", name)
		case seen[canon]:
			bad(field, "%q is set twice", name)
		default:
			seen[canon] = true
			return true
		}
		return false
	}
	for _, name := range sortedKeys(h.Headers) {
		if !checkName("headers", name) {
			continue
		}
		for _, m := range envRef.FindAllStringSubmatch(h.Headers[name], -1) {
			if !envName.MatchString(m[1]) {
				bad("headers", "%q: ${env:%s}: %q is not a variable name", name, m[1], m[1])
			}
		}
	}
	for _, name := range sortedKeys(h.HeadersFromEnv) {
		if !checkName("headers_from_env", name) {
			continue
		}
		if v := h.HeadersFromEnv[name]; !envName.MatchString(v) {
			bad("headers_from_env", "%q: %q is not a variable name", name, v)
		}
	}
	if h.MaxResponseBytes < 0 {
		bad("max_response_bytes", "%d is negative", h.MaxResponseBytes)
	}
	if h.MaxRetryAfter < 0 {
		bad("max_retry_after", "%s is negative", h.MaxRetryAfter)
	}
	return errors.Join(errs...)
}

// HeaderNames returns the names of the headers the step sets, canonical
// and sorted, without their values: what a stored definition may show.
func (h *HTTP) HeaderNames() []string {
	var names []string
	for n := range h.Headers {
		names = append(names, http.CanonicalHeaderKey(n))
	}
	for n := range h.HeadersFromEnv {
		names = append(names, http.CanonicalHeaderKey(n))
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// EffectiveMethod is the method the step uses (see Method).
func (h *HTTP) EffectiveMethod() string {
	switch {
	case h.Method != "":
		return h.Method
	case h.Body != nil:
		return "POST"
	}
	return "GET"
}

// noRedirects is the default client: a redirect is the step's answer.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Handle sends one attempt's request and turns the response into the
// step's output or error (see [HTTP]).
func (h *HTTP) Handle(ctx context.Context, sc Context) (json.RawMessage, error) {
	method := h.EffectiveMethod()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("steps: step %q: %s %s: %s", sc.Step, method, h.URL, fmt.Sprintf(format, args...))
	}
	if err := h.Check(); err != nil {
		return nil, Permanent(fmt.Errorf("steps: step %q: %s", sc.Step, unprefixed(err)))
	}
	headers, env, err := h.resolveHeaders()
	if err != nil {
		return nil, Permanent(fmt.Errorf("steps: step %q: %w", sc.Step, err))
	}
	red := newRedactor(headers, env)
	var body io.Reader
	if h.Body != nil {
		b, err := h.Body(ctx, sc)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
		if headers.Get("Content-Type") == "" {
			headers.Set("Content-Type", "application/json")
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, h.URL, body)
	if err != nil {
		return nil, Permanent(fail("%v", err))
	}
	if headers.Get("Accept") == "" {
		headers.Set("Accept", "application/json")
	}
	headers.Set("Idempotency-Key", sc.IdempotencyKey)
	req.Header = headers
	client := h.Client
	if client == nil {
		client = noRedirects
	}
	resp, err := client.Do(req)
	if err != nil {
		// A network error or the attempt's timeout: try again. The
		// *url.Error repeats method and URL; keep its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fail("%v", err)
	}
	defer resp.Body.Close()
	limit := h.MaxResponseBytes
	if limit == 0 {
		limit = DefaultHTTPMaxResponseBytes
	}
	// The status line is the server's: it may echo a secret, or be long.
	status := capped(red.text(resp.Status), httpErrorSnippet)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, h.statusError(resp, status, red, fail)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fail("%s: reading the body: %v", status, err)
	}
	if int64(len(b)) > limit {
		return nil, Permanent(fail("%s: response body larger than %d bytes (max_response_bytes)", status, limit))
	}
	switch {
	case len(bytes.TrimSpace(b)) == 0:
		return nil, nil
	case json.Valid(b):
		return red.json(b), nil
	}
	// Not JSON: the text, as a JSON string (invalid UTF-8 becomes U+FFFD).
	s, err := json.Marshal(red.text(string(b)))
	if err != nil {
		return nil, Permanent(fail("%s: encoding the body: %v", status, err))
	}
	return s, nil
}

// statusError is the error of a response that is not a success. What
// the server chose (the status line, the Location, the body) has the
// step's secrets blanked, then is cut to httpErrorSnippet bytes.
func (h *HTTP) statusError(resp *http.Response, status string, red *redactor, fail func(string, ...any) error) error {
	// Read past the cut by a secret's length, to blank one across it.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, int64(httpErrorSnippet+max(red.longest()-1, 0))))
	text := red.snippet(snippet, httpErrorSnippet)
	msg := status
	if text != "" {
		msg += ": " + text
	}
	code := resp.StatusCode
	switch {
	case code >= 300 && code <= 399:
		loc := capped(red.text(resp.Header.Get("Location")), httpErrorSnippet)
		return Permanent(fail("%s: redirect to %s not followed (point url at the final address)", status, loc))
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		err := fail("%s", msg)
		if d, ok := h.retryAfter(resp.Header.Get("Retry-After")); ok {
			return RetryAfter(d, err)
		}
		return err
	}
	return Permanent(fail("%s", msg))
}

// retryAfter reads a Retry-After value, delay-seconds or an HTTP date,
// capped by MaxRetryAfter; a date in the past is no wait.
func (h *HTTP) retryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	limit := h.MaxRetryAfter
	if limit == 0 {
		limit = DefaultHTTPMaxRetryAfter
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(limit/time.Second) {
			return limit, true
		}
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		now := time.Now
		if h.Now != nil {
			now = h.Now
		}
		d = max(at.Sub(now()), 0)
	} else {
		return 0, false
	}
	return min(d, limit), true
}

// resolveHeaders builds the attempt's headers, the environment read, and
// returns the values taken from the environment (to keep them out of
// errors).
func (h *HTTP) resolveHeaders() (http.Header, []string, error) {
	lookup := os.LookupEnv
	if h.LookupEnv != nil {
		lookup = h.LookupEnv
	}
	hdr := make(http.Header, len(h.Headers)+len(h.HeadersFromEnv)+3)
	var secrets []string
	get := func(header, name string) (string, error) {
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("header %q: environment variable %q is not set", header, name)
		}
		if v != "" {
			secrets = append(secrets, v)
		}
		return v, nil
	}
	for _, name := range sortedKeys(h.Headers) {
		var err error
		v := envRef.ReplaceAllStringFunc(h.Headers[name], func(ref string) string {
			s, e := get(name, envRef.FindStringSubmatch(ref)[1])
			if e != nil && err == nil {
				err = e
			}
			return s
		})
		if err != nil {
			return nil, nil, err
		}
		hdr.Set(name, v)
	}
	for _, name := range sortedKeys(h.HeadersFromEnv) {
		v, err := get(name, h.HeadersFromEnv[name])
		if err != nil {
			return nil, nil, err
		}
		hdr.Set(name, v)
	}
	return hdr, secrets, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

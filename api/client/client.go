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

package steps_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/steps"
)

// seen is one request an httptest server received.
type seen struct {
	Method, Path, Body string
	Header             http.Header
}

// server answers with respond and records every request.
func server(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{Method: r.Method, Path: r.URL.Path, Body: string(b), Header: r.Header.Clone()})
		mu.Unlock()
		respond(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got...)
	}
}

func reply(status int, body string, headers ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

var httpCtx = steps.Context{RunID: "r-1", Workflow: "wf", Step: "charge", Attempt: 1}

// TestHTTPSuccess: a 2xx JSON body is the output as it is; the request
// carries the step's idempotency key, the configured headers (values from
// the environment resolved), the body and the method.
func TestHTTPSuccess(t *testing.T) {
	srv, got := server(t, reply(201, `{"charge":"ch_1","amount":12}`))
	env := map[string]string{"PAY_TOKEN": "s3cret", "PAY_KEY": "k-9"}
	h := &steps.HTTP{
		URL:            srv.URL + "/charges",
		Method:         "POST",
		Headers:        map[string]string{"Authorization": "Bearer ${env:PAY_TOKEN}", "X-Plain": "yes"},
		HeadersFromEnv: map[string]string{"X-Api-Key": "PAY_KEY"},
		Body: func(_ context.Context, sc steps.Context) (json.RawMessage, error) {
			return json.RawMessage(`{"order":"` + sc.RunID + `"}`), nil
		},
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	}
	out, err := steps.Call(context.Background(), h, httpCtx)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if string(out) != `{"charge":"ch_1","amount":12}` {
		t.Errorf("output = %s, want the response body", out)
	}
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	for name, want := range map[string]string{
		"Idempotency-Key": "r-1/charge", "Authorization": "Bearer s3cret", "X-Plain": "yes",
		"X-Api-Key": "k-9", "Content-Type": "application/json", "Accept": "application/json",
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if r.Method != "POST" || r.Path != "/charges" || r.Body != `{"order":"r-1"}` {
		t.Errorf("request %s %s %q, want POST /charges {\"order\":\"r-1\"}", r.Method, r.Path, r.Body)
	}
}

// TestHTTPOutputs: an empty body is no output; a body that is not JSON is
// the output as a JSON string; a body over the cap is a permanent failure.
func TestHTTPOutputs(t *testing.T) {
	tests := []struct {
		name    string
		respond func(http.ResponseWriter, *http.Request)
		max     int64
		want    string
		wantErr string
	}{
		{name: "no content", respond: reply(204, ""), want: ""},
		{name: "text", respond: reply(200, "ok\n"), want: `"ok\n"`},
		{name: "json array", respond: reply(200, `[1,2]`), want: `[1,2]`},
		{name: "at the cap", respond: reply(200, `"12345678"`), max: 10, want: `"12345678"`},
		{name: "over the cap", respond: reply(200, `"123456789"`), max: 10, wantErr: "larger than 10 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, tt.respond)
			h := &steps.HTTP{URL: srv.URL, MaxResponseBytes: tt.max}
			out, err := steps.Call(context.Background(), h, httpCtx)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !steps.IsPermanent(err) {
					t.Fatalf("error = %v (permanent: %v), want a permanent error with %q", err, steps.IsPermanent(err), tt.wantErr)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Errorf("output = %q, %v; want %q", out, err, tt.want)
			}
		})
	}
}

// TestHTTPFailures: 4xx (but 408 and 429) and 3xx are permanent; 5xx, 408,
// 429 and network errors are retried, after Retry-After when the response
// has one (seconds or an HTTP date), capped by MaxRetryAfter.
func TestHTTPFailures(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		respond   func(http.ResponseWriter, *http.Request)
		permanent bool
		delay     time.Duration // with retryAfter
		hasDelay  bool
		want      string // in the message
	}{
		{name: "400", respond: reply(400, `{"error":"bad card"}`), permanent: true, want: `400 Bad Request: {"error":"bad card"}`},
		{name: "404", respond: reply(404, ""), permanent: true, want: "404 Not Found"},
		{name: "redirect", respond: reply(302, "", "Location", "https://elsewhere.example/x"), permanent: true, want: "redirect to https://elsewhere.example/x not followed"},
		{name: "500", respond: reply(500, "boom"), want: "500 Internal Server Error: boom"},
		{name: "503 seconds", respond: reply(503, "", "Retry-After", "7"), delay: 7 * time.Second, hasDelay: true, want: "503"},
		{name: "408", respond: reply(408, ""), want: "408"},
		{name: "429 seconds", respond: reply(429, "", "Retry-After", "3"), delay: 3 * time.Second, hasDelay: true, want: "429"},
		{name: "429 date", respond: reply(429, "", "Retry-After", now.Add(45*time.Second).Format(http.TimeFormat)), delay: 45 * time.Second, hasDelay: true},
		{name: "429 past date", respond: reply(429, "", "Retry-After", now.Add(-time.Hour).Format(http.TimeFormat)), delay: 0, hasDelay: true},
		{name: "429 capped", respond: reply(429, "", "Retry-After", "86400"), delay: time.Minute, hasDelay: true},
		{name: "429 unparsable", respond: reply(429, "", "Retry-After", "soon")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, tt.respond)
			h := &steps.HTTP{URL: srv.URL, MaxRetryAfter: time.Minute, Now: func() time.Time { return now }}
			_, err := steps.Call(context.Background(), h, httpCtx)
			if err == nil {
				t.Fatal("no error")
			}
			if got := steps.IsPermanent(err); got != tt.permanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, got, tt.permanent)
			}
			d, ok := steps.RetryDelay(err)
			if ok != tt.hasDelay || d != tt.delay {
				t.Errorf("RetryDelay(%v) = %v, %v; want %v, %v", err, d, ok, tt.delay, tt.hasDelay)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), `steps: step "charge": GET `+srv.URL) {
				t.Errorf("error %q: want it to start with the step, method and url and contain %q", err, tt.want)
			}
		})
	}

	// Nothing listens: a network error, retried with the backoff.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	_, err := steps.Call(context.Background(), &steps.HTTP{URL: srv.URL}, httpCtx)
	if _, has := steps.RetryDelay(err); err == nil || steps.IsPermanent(err) || has {
		t.Errorf("connection refused: %v (permanent %v); want a plain, retried error", err, steps.IsPermanent(err))
	}
}

// TestHTTPSecrets: a secret header value never shows in an error, even
// when the server echoes it; a variable that is not set is a permanent
// error naming it and the header.
func TestHTTPSecrets(t *testing.T) {
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		io.WriteString(w, "you sent "+r.Header.Get("Authorization")+" and "+r.Header.Get("X-Api-Key"))
	})
	env := map[string]string{"TOKEN": "tok-secret", "KEY": "key-secret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	h := &steps.HTTP{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer ${env:TOKEN}"},
		HeadersFromEnv: map[string]string{"X-Api-Key": "KEY"}, LookupEnv: lookup}
	_, err := steps.Call(context.Background(), h, httpCtx)
	if err == nil || strings.Contains(err.Error(), "tok-secret") || strings.Contains(err.Error(), "key-secret") {
		t.Errorf("error %v shows a secret header value", err)
	}

	h = &steps.HTTP{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer ${env:MISSING}"}, LookupEnv: lookup}
	_, err = steps.Call(context.Background(), h, httpCtx)
	if err == nil || !steps.IsPermanent(err) || !strings.Contains(err.Error(), `"MISSING"`) || !strings.Contains(err.Error(), `"Authorization"`) {
		t.Errorf("unset variable: %v; want a permanent error naming MISSING and Authorization", err)
	}
}

// TestHTTPCheck: a bad configuration is found before any request, each
// problem naming its field.
func TestHTTPCheck(t *testing.T) {
	tests := []struct {
		name  string
		h     steps.HTTP
		field string
	}{
		{name: "no url", h: steps.HTTP{}, field: "url"},
		{name: "relative url", h: steps.HTTP{URL: "/charges"}, field: "url"},
		{name: "ftp url", h: steps.HTTP{URL: "ftp://x.example/"}, field: "url"},
		{name: "bad method", h: steps.HTTP{URL: "http://x.example", Method: "FETCH"}, field: "method"},
		{name: "lower-case method", h: steps.HTTP{URL: "http://x.example", Method: "post"}, field: "method"},
		{name: "bad header name", h: steps.HTTP{URL: "http://x.example", Headers: map[string]string{"Bad Name": "x"}}, field: "headers"},
		{name: "idempotency key header", h: steps.HTTP{URL: "http://x.example", Headers: map[string]string{"idempotency-key": "x"}}, field: "headers"},
		{name: "bad env reference", h: steps.HTTP{URL: "http://x.example", Headers: map[string]string{"A": "${env:}"}}, field: "headers"},
		{name: "bad env name", h: steps.HTTP{URL: "http://x.example", HeadersFromEnv: map[string]string{"A": "1X"}}, field: "headers_from_env"},
		{name: "header twice", h: steps.HTTP{URL: "http://x.example", Headers: map[string]string{"A": "x"}, HeadersFromEnv: map[string]string{"a": "X"}}, field: "headers_from_env"},
		{name: "negative cap", h: steps.HTTP{URL: "http://x.example", MaxResponseBytes: -1}, field: "max_response_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Check()
			var ce *steps.HTTPConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Check() = %v; want an *HTTPConfigError on %q", err, tt.field)
			}
			if !strings.HasPrefix(err.Error(), "steps: http "+tt.field+": ") {
				t.Errorf("message %q does not name the field", err)
			}
			if _, err := steps.Call(context.Background(), &tt.h, httpCtx); !steps.IsPermanent(err) {
				t.Errorf("running the bad step: %v; want a permanent error", err)
			}
		})
	}
	ok := steps.HTTP{URL: "https://x.example/a?b=c", Method: "PATCH",
		Headers: map[string]string{"Authorization": "Bearer ${env:TOKEN}"}, HeadersFromEnv: map[string]string{"X-Key": "API_KEY"}}
	if err := ok.Check(); err != nil {
		t.Errorf("Check() of a good step: %v", err)
	}
}

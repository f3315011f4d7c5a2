package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
)

// TestKeylessWritesNeedAPreflightHeader: without a key, a write that a
// web page of another localhost port could send without a CORS preflight
// (a text/plain or form body, or no body and no header) is refused with a
// 415 naming the headers it needs, and changes nothing; the same write
// with Content-Type: application/json or X-Dagflow-Request passes, as do
// the Go client's writes.
func TestKeylessWritesNeedAPreflightHeader(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	send := func(method, path, ctype, body string, header ...string) (int, client.Problem) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, env.srv.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		// What a page of another localhost port sends.
		req.Header.Set("Origin", "http://localhost:3000")
		for _, h := range header {
			k, v, _ := strings.Cut(h, ": ")
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var p client.Problem
		if resp.StatusCode >= 400 {
			p = rawResp{status: resp.StatusCode, header: resp.Header, body: b}.problem(t, resp.StatusCode, api.CodeUnsupportedMedia)
		}
		return resp.StatusCode, p
	}
	for _, tc := range []struct{ method, path, ctype, body string }{
		{"POST", "/v1/workflows/order/runs", "text/plain", `{"input":{}}`},
		{"POST", "/v1/workflows/order/runs", "application/x-www-form-urlencoded", `a=b`},
		{"POST", "/v1/workflows/order/runs", "multipart/form-data; boundary=x", "--x--"},
		{"POST", "/v1/queues/default/pause", "text/plain", "x"},
		{"POST", "/v1/queues/default/pause", "", ""},
		{"POST", "/v1/runs/0190f0d8-0000-7000-8000-000000000000/cancel", "", ""},
		{"DELETE", "/v1/api-keys/ci", "", ""},
	} {
		code, p := send(tc.method, tc.path, tc.ctype, tc.body)
		if code != http.StatusUnsupportedMediaType || !strings.Contains(p.Detail, "X-Dagflow-Request") || !strings.Contains(p.Detail, "application/json") {
			t.Errorf("%s %s (%q): %d %q, want 415 naming the headers", tc.method, tc.path, tc.ctype, code, p.Detail)
		}
	}
	if n := countRuns(t, env); n != 0 {
		t.Fatalf("%d runs made by refused requests", n)
	}
	paused, err := env.Engine.PausedQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(paused) != 0 {
		t.Fatalf("queues %v were paused by refused requests", paused)
	}

	// JSON, or the header, passes.
	if code, p := send("POST", "/v1/workflows/order/runs", "application/json", `{"input":{"order_id":"o-1","customer":"c@example.com","sku":"SKU-1","quantity":1,"total":150}}`); code != http.StatusCreated {
		t.Errorf("a JSON trigger: %d %s", code, p.Detail)
	}
	if code, p := send("POST", "/v1/queues/default/pause", "", "", "X-Dagflow-Request: 1"); code != http.StatusOK {
		t.Errorf("a pause with X-Dagflow-Request: %d %s", code, p.Detail)
	}
	if _, err := env.anon.ResumeQueue(t.Context(), "default"); err != nil {
		t.Errorf("the client's resume: %v", err)
	}
}

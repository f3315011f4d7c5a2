package steps_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/steps"
)

// leaked returns the first substring of secret, 8 bytes or longer, that
// s holds, or "".
func leaked(s, secret string) string {
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(s, secret[i:i+8]) {
			return secret[i : i+8]
		}
	}
	return ""
}

// TestHTTPSecretAtTheCut: a failed response that echoes a secret header
// value across the end of the quoted body (256 bytes) shows none of it,
// whether the value came from the environment or is written in the
// step, and wherever it starts around the cut.
func TestHTTPSecretAtTheCut(t *testing.T) {
	const token = "tok-0123456789abcdefghijklmnopqrstuvwxyzABCD" // 45 bytes
	const literal = "lit-ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponm"
	for _, secret := range []string{token, literal} {
		for start := 200; start <= 256; start++ {
			srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(401)
				io.WriteString(w, strings.Repeat("x", start)+r.Header.Get("X-Token")+strings.Repeat("y", 100))
			})
			h := &steps.HTTP{URL: srv.URL, Headers: map[string]string{"X-Token": "${env:TOKEN}"},
				LookupEnv: func(string) (string, bool) { return token, true }}
			if secret == literal {
				h.Headers = map[string]string{"X-Token": literal}
			}
			_, err := steps.Call(context.Background(), h, httpCtx)
			if err == nil || !steps.IsPermanent(err) {
				t.Fatalf("start %d: %v; want a permanent error", start, err)
			}
			if l := leaked(err.Error(), secret); l != "" {
				t.Fatalf("start %d: the error %q shows %q of the secret", start, err, l)
			}
			if start < 250 && !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("start %d: the error %q does not say what was blanked", start, err)
			}
		}
	}
}

// TestHTTPOutputRedacted: a 2xx response that echoes a configured header
// value, written in the step or from the environment, as JSON (escaped
// or not) or as text, is stored with the value blanked; the output stays
// valid JSON, and a body without one is the output as it is. Short
// literal values (a version, a flag) and content-negotiation headers are
// not secrets and are kept.
func TestHTTPOutputRedacted(t *testing.T) {
	const lit = "lit-key/0123456789abcdef"
	const tok = "tok-s3cret-from-env"
	tests := []struct {
		name, body, want string
	}{
		{name: "json", body: `{"echo":"` + lit + `","n":1.50,"t":"Bearer ` + tok + `"}`, want: `{"echo":"[redacted]","n":1.50,"t":"[redacted]"}`},
		{name: "escaped", body: `{"echo":"lit-key\/0123456789abcdef","u":"\u0074ok-s3cret-from-env"}`, want: `{"echo":"[redacted]","u":"[redacted]"}`},
		{name: "key", body: `{"` + tok + `":true}`, want: `{"[redacted]":true}`},
		{name: "text", body: "you sent " + lit, want: `"you sent [redacted]"`},
		{name: "clean", body: `{ "b": 2, "a": "v1", "type": "application/json" }`, want: `{ "b": 2, "a": "v1", "type": "application/json" }`},
		{name: "clean escaped", body: `{"q":"say \"hi\""}`, want: `{"q":"say \"hi\""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := server(t, reply(200, tt.body))
			h := &steps.HTTP{URL: srv.URL,
				Headers: map[string]string{"X-Api-Key": lit, "Authorization": "Bearer ${env:TOK}", "X-Version": "v1",
					"Content-Type": "application/json"},
				LookupEnv: func(string) (string, bool) { return tok, true }}
			out, err := steps.Call(context.Background(), h, httpCtx)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want || !json.Valid(out) {
				t.Errorf("output = %s; want %s", out, tt.want)
			}
			if r := got(); len(r) != 1 || r[0].Header.Get("X-Api-Key") != lit || r[0].Header.Get("Authorization") != "Bearer "+tok {
				t.Errorf("requests %+v; want one with the header values as configured", r)
			}
		})
	}
}

// TestHTTPLiteralHeaderInError: a literal header value echoed by a
// failed response is blanked from the error.
func TestHTTPLiteralHeaderInError(t *testing.T) {
	const lit = "Basic dXNlcjpwYXNzd29yZA=="
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		io.WriteString(w, "you sent "+r.Header.Get("Authorization"))
	})
	h := &steps.HTTP{URL: srv.URL, Headers: map[string]string{"Authorization": lit}}
	_, err := steps.Call(context.Background(), h, httpCtx)
	if err == nil || leaked(err.Error(), lit) != "" || !strings.Contains(err.Error(), "500 Internal Server Error: you sent [redacted]") {
		t.Errorf("error %v; want the 500 with the header value blanked", err)
	}
}

// TestHTTPRemoteValuesCapped: a redirect's Location and a status line of
// megabytes reach the error (which is logged and stored) cut to a few
// hundred bytes, with their size; a secret in the Location is blanked.
func TestHTTPRemoteValuesCapped(t *testing.T) {
	const tok = "tok-in-the-location-0123"
	long := "https://elsewhere.example/" + tok + "/" + strings.Repeat("a", 3<<20)
	srv, _ := server(t, reply(302, "", "Location", long))
	h := &steps.HTTP{URL: srv.URL, Headers: map[string]string{"X-Token": tok}}
	_, err := steps.Call(context.Background(), h, httpCtx)
	if err == nil || !steps.IsPermanent(err) || len(err.Error()) > 1024 {
		t.Fatalf("error of %d bytes (permanent %v); want a permanent error under 1 KiB", len(fmt.Sprint(err)), steps.IsPermanent(err))
	}
	want := "redirect to https://elsewhere.example/[redacted]/aaa"
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("(%d bytes)", len(long)-len(tok)+len("[redacted]"))) {
		t.Errorf("error %q; want the start of the Location, blanked, and its size", err)
	}

	srv, _ = server(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		writeRaw(buf, "HTTP/1.1 500 "+strings.Repeat("b", 3<<20)+"\r\nContent-Length: 0\r\n\r\n")
	})
	_, err = steps.Call(context.Background(), &steps.HTTP{URL: srv.URL}, httpCtx)
	if err == nil || steps.IsPermanent(err) || len(err.Error()) > 1024 || !strings.Contains(err.Error(), "500 bbb") {
		t.Errorf("long status line: error of %d bytes (permanent %v); want a retried error under 1 KiB", len(fmt.Sprint(err)), steps.IsPermanent(err))
	}
}

func writeRaw(buf *bufio.ReadWriter, s string) {
	buf.WriteString(s)
	buf.Flush()
}

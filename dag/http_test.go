package dag_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/steps"
)

const httpYAML = `name: pay
steps:
  - name: price
    handler: order.reserve
  - name: charge
    kind: http
    url: https://pay.example/charges
    method: PUT
    headers:
      Authorization: Bearer literal-secret
      X-Token: "${env:PAY_TOKEN}"
    headers_from_env: {X-Api-Key: PAY_KEY}
    body: '{"order": input.id, "amount": steps.price.output.total, "currency": input.currency ?? "EUR"}'
    max_response_bytes: 4096
    max_retry_after: 30s
    timeout: 10s
    needs: price
`

// TestLoadYAMLHTTP: a kind: http step needs no registered handler; it
// becomes a *steps.HTTP with its settings, its body template reads the
// input and its dependencies' outputs, and the definition records the
// kind, url, method and header names but no header value.
func TestLoadYAMLHTTP(t *testing.T) {
	w, err := dag.LoadYAML([]byte(httpYAML), "pay.yaml", registry(t))
	if err != nil {
		t.Fatal(err)
	}
	s := w.Step("charge")
	h, ok := s.Handler.(*steps.HTTP)
	if !ok {
		t.Fatalf("handler of charge is %T, want *steps.HTTP", s.Handler)
	}
	if h.URL != "https://pay.example/charges" || h.Method != "PUT" || h.MaxResponseBytes != 4096 || h.MaxRetryAfter != 30*time.Second ||
		h.Headers["X-Token"] != "${env:PAY_TOKEN}" || h.HeadersFromEnv["X-Api-Key"] != "PAY_KEY" || s.Timeout != 10*time.Second {
		t.Errorf("http step settings: %+v (timeout %s)", h, s.Timeout)
	}
	body, err := h.Body(context.Background(), steps.Context{Step: "charge", Input: json.RawMessage(`{"id":"o-1"}`),
		Outputs: map[string]json.RawMessage{"price": json.RawMessage(`{"total":12.5}`)}})
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if diff := cmp.Diff(map[string]any{"order": "o-1", "amount": 12.5, "currency": "EUR"}, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}

	d := w.Definition()
	sd := d.Steps[1]
	want := &dag.HTTPDefinition{URL: "https://pay.example/charges", Method: "PUT", Headers: []string{"Authorization", "X-Api-Key", "X-Token"}}
	if sd.Kind != "http" || !cmp.Equal(sd.HTTP, want) {
		t.Errorf("definition of charge: kind %q, http %+v; want http, %+v", sd.Kind, sd.HTTP, want)
	}
	if d.Steps[0].Kind != "" || d.Steps[0].HTTP != nil {
		t.Errorf("definition of a handler step has kind %q, http %+v", d.Steps[0].Kind, d.Steps[0].HTTP)
	}
	spec, _ := json.Marshal(d)
	for _, secret := range []string{"literal-secret", "PAY_TOKEN", "PAY_KEY"} {
		if strings.Contains(string(spec), secret) {
			t.Errorf("the stored definition holds %q: %s", secret, spec)
		}
	}
	// Built again from the stored definition (a node without the file),
	// the plan keeps its version.
	p, err := dag.FromDefinition(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Definition().Hash() != d.Hash() {
		t.Errorf("FromDefinition changes the version: %+v", p.Definition())
	}
	if p.Step("charge").HasHandler() {
		t.Error("a plan built from the definition alone has the http step's handler")
	}

	// The body cannot be evaluated on this run's data: a permanent
	// failure naming the step and the body.
	bad, err := dag.LoadYAML([]byte(strings.Replace(httpYAML, `input.currency ?? "EUR"`, `input.n + 1`, 1)), "pay.yaml", registry(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Step("charge").Handler.(*steps.HTTP).Body(context.Background(), steps.Context{Step: "charge", Input: json.RawMessage(`{"n":"x"}`)})
	if err == nil || !steps.IsPermanent(err) || !strings.Contains(err.Error(), `step "charge": body`) {
		t.Errorf("body on bad data: %v; want a permanent error naming the step and body", err)
	}
	// No body: a GET, no Body.
	w2, err := dag.LoadYAML([]byte("name: ping\nsteps:\n  - {name: ping, kind: http, url: 'http://svc.internal/ping'}\n"), "ping.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := w2.Step("ping").Handler.(*steps.HTTP); h.Body != nil || h.EffectiveMethod() != "GET" {
		t.Errorf("http step without body: %+v", h)
	}
}

func TestLoadYAMLHTTPErrors(t *testing.T) {
	const head = "name: pay\nsteps:\n  - {name: price, handler: order.reserve}\n"
	tests := []struct {
		name    string
		yaml    string
		wantMsg string
	}{
		{
			name:    "missing url",
			yaml:    head + "  - name: charge\n    kind: http\n",
			wantMsg: `dag: pay.yaml:4:5: steps[1].url: step "charge": missing field: an http step needs a url`,
		},
		{
			name:    "bad url",
			yaml:    head + "  - name: charge\n    kind: http\n    url: /charges\n",
			wantMsg: `dag: pay.yaml:6:10: steps[1].url: step "charge": invalid http step: url "/charges": want an absolute http or https URL`,
		},
		{
			name:    "bad method",
			yaml:    head + "  - name: charge\n    kind: http\n    url: http://x.example\n    method: FETCH\n",
			wantMsg: `dag: pay.yaml:7:13: steps[1].method: step "charge": invalid http step: method "FETCH": want one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS`,
		},
		{
			name:    "bad template",
			yaml:    head + "  - name: charge\n    kind: http\n    url: http://x.example\n    body: '{\"a\": input.id +}'\n",
			wantMsg: `dag: pay.yaml:7:11: steps[1].body: step "charge": invalid http step: body does not compile: unexpected token Bracket("}") (1:17)`,
		},
		{
			name:    "body reads a step it does not depend on",
			yaml:    head + "  - name: charge\n    kind: http\n    url: http://x.example\n    body: 'steps.price.output'\n",
			wantMsg: `dag: pay.yaml:7:11: steps[1].body: step "charge": invalid http step: body reads step "price", which is not a dependency (add it to after or needs)`,
		},
		{
			name:    "bad header name",
			yaml:    head + "  - name: charge\n    kind: http\n    url: http://x.example\n    headers: {'Bad Name': x}\n",
			wantMsg: `dag: pay.yaml:7:14: steps[1].headers: step "charge": invalid http step: headers "Bad Name" is not a header name`,
		},
		{
			name:    "header value not a string",
			yaml:    head + "  - name: charge\n    kind: http\n    url: http://x.example\n    headers: {X-A: [1]}\n",
			wantMsg: `dag: pay.yaml:7:20: steps[1].headers.X-A: want a string, got a list`,
		},
		{
			name:    "handler and kind",
			yaml:    head + "  - name: charge\n    kind: http\n    handler: order.ship\n    url: http://x.example\n",
			wantMsg: `dag: pay.yaml:6:14: steps[1].handler: step "charge": invalid http step: a kind: http step has no handler`,
		},
		{
			name:    "unknown kind",
			yaml:    head + "  - name: charge\n    kind: grpc\n    url: http://x.example\n",
			wantMsg: `dag: pay.yaml:5:11: steps[1].kind: step "charge": unknown kind "grpc" (want http, or a handler without kind)`,
		},
		{
			name:    "http field without kind",
			yaml:    head + "  - name: charge\n    handler: order.ship\n    url: http://x.example\n",
			wantMsg: `dag: pay.yaml:6:10: steps[1].url: step "charge": invalid http step: url is a field of kind: http steps`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dag.LoadYAML([]byte(tt.yaml), "pay.yaml", registry(t))
			if err == nil {
				t.Fatalf("LoadYAML() = nil error; want %q", tt.wantMsg)
			}
			if got := err.Error(); got != tt.wantMsg {
				t.Errorf("LoadYAML() error\n got: %s\nwant: %s", got, tt.wantMsg)
			}
			var ye *dag.YAMLError
			if !errors.As(err, &ye) {
				t.Errorf("not a *YAMLError: %T", err)
			}
		})
	}
}

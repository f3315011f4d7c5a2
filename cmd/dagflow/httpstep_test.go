package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// TestServeRunsYAMLOnlyHTTPWorkflow: `dagflow serve --workflows DIR`
// runs a workflow declared in YAML alone, whose kind: http steps call
// another service: triggered over the API, it calls the service with the
// step's idempotency key, a header from the environment and the body
// rendered from the input and the upstream step's output, and the run
// succeeds with the service's answers as outputs. The stored definition
// shows the url and method, never the secret.
func TestServeRunsYAMLOnlyHTTPWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Setenv("DAGFLOW_TEST_SHIP_TOKEN", "ship-s3cret")

	var mu sync.Mutex
	var got []*http.Request
	var bodies []string
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, string(b))
		mu.Unlock()
		switch r.URL.Path {
		case "/quote":
			io.WriteString(w, `{"price":42,"carrier":"dhl"}`)
		case "/labels":
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"label":"L-1"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer svc.Close()

	dir := t.TempDir()
	yaml := `name: shipping
steps:
  - name: quote
    kind: http
    url: ` + svc.URL + `/quote
  - name: label
    kind: http
    method: POST
    url: ` + svc.URL + `/labels
    headers_from_env: {Authorization: DAGFLOW_TEST_SHIP_TOKEN}
    body: '{"order": input.order_id, "carrier": steps.quote.output.carrier}'
    needs: quote
`
	if err := os.WriteFile(filepath.Join(dir, "shipping.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := newServeEnv(t, ctx)
	u, errb, stop := env.startServe(t, ctx, "--listen", "127.0.0.1:0", "--workflows", dir)

	code, body := get(t, "POST", u+"/v1/workflows/shipping/runs", "", `{"input":{"order_id":"o-7"}}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/workflows/shipping/runs: %d %s", code, body)
	}
	var r client.Run
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		run, err := env.store.RunGet(ctx, r.ID)
		return err == nil && run.Status == persistence.RunSucceeded
	}, "the YAML-only run did not succeed on serve: %s", errb)
	label, err := env.store.StepGet(ctx, r.ID, "label")
	if err != nil || string(label.Output) != `{"label":"L-1"}` {
		t.Errorf("label output %s (%v), want the service's answer", label.Output, err)
	}
	mu.Lock()
	if len(got) != 2 || got[1].Header.Get("Idempotency-Key") != r.ID+"/label" || got[1].Header.Get("Authorization") != "ship-s3cret" ||
		bodies[1] != `{"carrier":"dhl","order":"o-7"}` {
		t.Errorf("requests: %d; the label call: key %q, auth %q, body %q", len(got), got[len(got)-1].Header.Get("Idempotency-Key"),
			got[len(got)-1].Header.Get("Authorization"), bodies[len(bodies)-1])
	}
	mu.Unlock()

	code, body = get(t, "GET", u+"/v1/workflows/shipping", "", "")
	if code != http.StatusOK || !strings.Contains(body, `"kind":"http"`) || !strings.Contains(body, svc.URL+"/labels") ||
		!strings.Contains(body, "Authorization") || strings.Contains(body, "ship-s3cret") || strings.Contains(body, "DAGFLOW_TEST_SHIP_TOKEN") {
		t.Errorf("GET /v1/workflows/shipping: %d %s; want the kind, url and header name, no secret", code, body)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, errb)
	}
	if strings.Contains(errb.String(), "ship-s3cret") {
		t.Errorf("serve logged the secret:\n%s", errb)
	}
}

// TestWorkflowsDirErrors: a bad YAML file in --workflows stops the node
// before it starts, naming the file, step and field; a file redefining
// the example workflow that --demo registers beside it is refused too.
func TestWorkflowsDirErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	for _, tc := range []struct{ file, yaml, want string }{
		{"x.yaml", "name: x\nsteps:\n  - {name: call, kind: http, method: FETCH, url: 'http://a.example'}\n",
			`x.yaml:3:38: steps[0].method: step "call": invalid http step: method "FETCH"`},
		{"x.yaml", "name: x\nsteps:\n  - {name: call, kind: http}\n", `x.yaml:3:5: steps[0].url: step "call": missing field: an http step needs a url`},
		{"x.yaml", "name: order\nsteps:\n  - {name: call, kind: http, url: 'http://a.example'}\n", `workflow "order" is a --demo workflow`},
		{"x.txt", "name: x\n", "no *.yaml or *.yml file"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errb := runCLI(t, ctx, append([]string{"worker", "--demo", "--workflows", dir}, env.flags...)...)
		if code != 1 || !strings.Contains(errb, tc.want) || !strings.Contains(errb, dir) {
			t.Errorf("worker --workflows with %s %q: exit %d, %q; want 1 naming the directory and %q", tc.file, tc.yaml, code, errb, tc.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if code, _, errb := runCLI(t, ctx, append([]string{"worker", "--workflows", missing}, env.flags...)...); code != 1 || !strings.Contains(errb, missing) {
		t.Errorf("worker --workflows on a missing directory: exit %d, %q; want 1 naming it", code, errb)
	}
	if code, _, errb := runCLI(t, ctx, append([]string{"serve", "--no-workers", "--workflows", missing}, env.flags...)...); code != 2 || !strings.Contains(errb, "--no-workers") {
		t.Errorf("serve --no-workers --workflows: exit %d, %q; want a usage error", code, errb)
	}
}

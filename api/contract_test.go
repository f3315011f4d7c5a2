package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/dagflow/dagflow/api"
)

func init() {
	// /openapi.yaml answers YAML: check it is a string, as the spec says.
	openapi3filter.RegisterBodyDecoder("application/yaml", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		return string(b), err
	})
}

// contract validates requests and answers against an OpenAPI document.
type contract struct {
	doc    *openapi3.T
	router routers.Router

	mu       sync.Mutex
	failures []string
	checked  int
}

// newContract loads and validates spec.
func newContract(t testing.TB, spec []byte) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("spec is not valid OpenAPI: %v", err)
	}
	// Match paths on any host: the test servers listen on random ports.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return &contract{doc: doc, router: router}
}

// check validates one exchange and returns what is wrong with it, if
// anything: a request the spec refuses must get a 4xx answer (the server
// refuses it too), and every answer must be one the spec describes for
// the route; a request on a route the spec does not have must get a 404
// or 405 problem.
func (c *contract) check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) &&
			resp.Header.Get("Content-Type") == "application/problem+json" {
			return nil
		}
		return fmt.Errorf("%s %s is not in the spec (%v) but was answered %d", req.Method, req.URL.Path, err, resp.StatusCode)
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		MultiError:         true,
	}
	in := &openapi3filter.RequestValidationInput{Request: req.Clone(context.Background()), PathParams: params, Route: route, Options: opts}
	in.Request.Body = io.NopCloser(bytes.NewReader(reqBody))
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	if reqErr != nil && resp.StatusCode < 400 {
		return fmt.Errorf("%s %s: the spec refuses the request (%v) but the server answered %d", req.Method, req.URL.Path, reqErr, resp.StatusCode)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s %s: answer %d does not match the spec: %v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode, err, truncateBody(respBody))
	}
	return nil
}

func truncateBody(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// transport returns a RoundTripper that validates every exchange through
// base and fails t on a mismatch.
func (c *contract) transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		var reqBody []byte
		if req.Body != nil {
			b, err := io.ReadAll(req.Body)
			req.Body.Close()
			if err != nil {
				return nil, err
			}
			reqBody = b
			req.Body = io.NopCloser(bytes.NewReader(b))
		}
		resp, err := base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		respBody, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(respBody))
		cerr := c.check(req, reqBody, resp, respBody)
		c.mu.Lock()
		c.checked++
		if cerr != nil {
			c.failures = append(c.failures, cerr.Error())
		}
		c.mu.Unlock()
		if cerr != nil {
			t.Errorf("contract: %v", cerr)
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRoutesMatchSpec fails when a route is served but not in the spec,
// or in the spec but not served.
func TestRoutesMatchSpec(t *testing.T) {
	c := newContract(t, api.OpenAPI())
	var inSpec []string
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			inSpec = append(inSpec, method+" "+path)
		}
	}
	var served []string
	for _, rt := range api.Routes() {
		served = append(served, rt.Method+" "+rt.Path)
	}
	sort.Strings(inSpec)
	sort.Strings(served)
	for _, r := range served {
		if !slices.Contains(inSpec, r) {
			t.Errorf("route %s is served but not in api/openapi.yaml", r)
		}
	}
	for _, r := range inSpec {
		if !slices.Contains(served, r) {
			t.Errorf("operation %s is in api/openapi.yaml but not served", r)
		}
	}
	// Each operation's security matches its route's scope: the routes
	// without a scope are the ones the spec marks as needing no key.
	for _, rt := range api.Routes() {
		op := c.doc.Paths.Find(rt.Path).GetOperation(rt.Method)
		public := op.Security != nil && len(*op.Security) == 0
		if public != (rt.Scope == "") {
			t.Errorf("%s %s: scope %q, but the spec says public=%v", rt.Method, rt.Path, rt.Scope, public)
		}
		if rt.Scope != "" && !strings.Contains(op.Description, "Needs the "+string(rt.Scope)+" scope") {
			t.Errorf("%s %s: the spec's description does not say it needs the %s scope: %q", rt.Method, rt.Path, rt.Scope, op.Description)
		}
	}
}

// TestTamperedSpecCatchesBrokenAnswer shows the validator is not
// vacuous: with a spec whose Run needs a field the server never sends,
// and whose run status may only be "succeeded", the answers of a real
// trigger are refused.
func TestTamperedSpecCatchesBrokenAnswer(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	id := triggerOrder(t, env, `{"n":1}`, "")
	good := env.raw(t, "GET", "/v1/runs/"+id, "")

	tampered := string(api.OpenAPI())
	tampered = strings.Replace(tampered,
		"required: [id, workflow, version, status, start_at, created_at, updated_at]",
		"required: [id, workflow, version, status, start_at, created_at, updated_at, owner]", 1)
	if tampered == string(api.OpenAPI()) {
		t.Fatal("the tampering did not apply: the Run schema changed; update this test")
	}
	bad := newContract(t, []byte(tampered))
	req, _ := http.NewRequest("GET", env.srv.URL+"/v1/runs/"+id, nil)
	resp := &http.Response{StatusCode: good.status, Header: good.header}
	err := bad.check(req, nil, resp, good.body)
	if err == nil || !strings.Contains(err.Error(), "owner") {
		t.Fatalf("tampered spec: check = %v, want an error about the missing \"owner\"", err)
	}
	// The real spec accepts the same exchange.
	if err := env.contract.check(req, nil, resp, good.body); err != nil {
		t.Fatalf("real spec: %v", err)
	}
	// A status the spec does not list for the route is refused too.
	resp418 := &http.Response{StatusCode: http.StatusTeapot, Header: good.header}
	if err := env.contract.check(req, nil, resp418, good.body); err == nil {
		t.Fatal("an answer with an undocumented status passed the contract")
	}
	// And a field of the wrong type.
	var m map[string]any
	if err := json.Unmarshal(good.body, &m); err != nil {
		t.Fatal(err)
	}
	m["run"].(map[string]any)["version"] = "one"
	broken, _ := json.Marshal(m)
	if err := env.contract.check(req, nil, resp, broken); err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("a run whose version is a string: check = %v, want an error naming version", err)
	}
}

// TestSpecOperationsReachTheirHandlers drives the real handler: no
// operation of the spec may be answered by the mux's fallbacks (a "no
// route" 404 or a 405), which a route table that matches the spec while
// the mux does not would give.
func TestSpecOperationsReachTheirHandlers(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	params := strings.NewReplacer("{name}", "order", "{id}", "nope", "{run}", "nope", "{step}", "charge", "{key}", "nobody")
	n := 0
	for path, item := range env.contract.doc.Paths.Map() {
		for method := range item.Operations() {
			body := ""
			if method == http.MethodPost {
				body = "{}"
			}
			r := env.raw(t, method, params.Replace(path), body)
			n++
			if r.status == http.StatusMethodNotAllowed {
				t.Errorf("%s %s: the mux answers 405: %s", method, path, r.body)
			}
			if r.status == http.StatusNotFound && strings.Contains(string(r.body), "no route for") {
				t.Errorf("%s %s: the mux has no route: %s", method, path, r.body)
			}
		}
	}
	if n != len(api.Routes()) {
		t.Fatalf("drove %d operations, the handler has %d routes", n, len(api.Routes()))
	}
	// The fallbacks do answer what is not routed, so the checks above can fail.
	if r := env.raw(t, "GET", "/v1/nothing", ""); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "no route for") {
		t.Fatalf("GET /v1/nothing: %d %s", r.status, r.body)
	}
	env.raw(t, "PATCH", "/v1/runs", "").problem(t, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
}

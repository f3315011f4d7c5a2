package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/backendtest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/steps"
)

// backend is one pair of stores the API tests run on.
type backend struct {
	name string
	opts func(t testing.TB) enginetest.Options
}

// backends are the embedded default (SQLite + miniredis) and the real
// services (MariaDB + Redis on loopback; CI=true fails when they are
// down): backendtest's.
func backends() []backend {
	var out []backend
	for _, b := range backendtest.All() {
		out = append(out, backend{name: b.Name, opts: b.Options})
	}
	return out
}

// eachBackend runs f as a subtest on every backend.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// orderWorkflow is reserve -> charge -> ship (on queue "shipping"). A
// step named in the input's "fail" fails permanently (it goes dead at
// once) until healed is set; a step named in "block" waits until its
// context ends.
func orderWorkflow(t testing.TB, healed *atomic.Bool) *dag.Workflow {
	t.Helper()
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		var in struct {
			Fail  string `json:"fail"`
			Block string `json:"block"`
		}
		if len(sc.Input) > 0 {
			_ = json.Unmarshal(sc.Input, &in)
		}
		if in.Block == sc.Step {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if in.Fail == sc.Step && !healed.Load() {
			return nil, steps.Permanent(fmt.Errorf("%s failed as asked", sc.Step))
		}
		return json.Marshal(map[string]string{"step": sc.Step})
	})
	wf, err := dag.New("order").
		Step("reserve", h).
		Step("charge", h, dag.After("reserve")).
		Step("ship", h, dag.After("charge"), dag.Queue("shipping")).
		Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return wf
}

// apiEnv is an engine with the API in front of it, on a loopback test
// server whose every request and answer is validated against the spec.
type apiEnv struct {
	*enginetest.Env
	srv      *httptest.Server
	contract *contract
	logs     *syncBuffer
	// anon is a client without a key (the handler allows anonymous
	// requests unless the test asked for keys).
	anon *client.Client
	http *http.Client
	// adminClient, when set, is what the helpers use instead of anon.
	adminClient *client.Client
	// healed makes the order workflow's "fail" steps succeed.
	healed *atomic.Bool
}

type envOptions struct {
	// keys makes the handler refuse requests without a key.
	keys bool
	// configure adjusts the handler's options.
	configure func(*api.Options)
	// workflows replaces the order workflow.
	workflows []*dag.Workflow
	// engine adjusts the engine's config.
	engine func(*engine.Config)
	// peer, when set, makes the API's engine another node of peer's
	// cluster (same store, Redis and prefix), with no workers and only
	// the workflows given.
	peer *enginetest.Env
}

func newAPIEnv(t testing.TB, b backend, eo envOptions) *apiEnv {
	t.Helper()
	healed := &atomic.Bool{}
	var o enginetest.Options
	if eo.peer != nil {
		p := eo.peer
		o = enginetest.Options{Store: p.Store, Redis: p.Redis, Prefix: p.Prefix, Clock: p.Clock,
			Workflows: eo.workflows, Configure: func(c *engine.Config) {
				c.NoWorkers = true
				if eo.engine != nil {
					eo.engine(c)
				}
			}}
	} else {
		o = b.opts(t)
		o.Workflows = eo.workflows
		if o.Workflows == nil {
			o.Workflows = []*dag.Workflow{orderWorkflow(t, healed)}
		}
		o.Configure = eo.engine
	}
	env := enginetest.New(t, o)
	logs := &syncBuffer{}
	ho := api.Options{
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		AllowAnonymous: !eo.keys,
		Now:            env.Clock.Now,
	}
	if eo.configure != nil {
		eo.configure(&ho)
	}
	srv := httptest.NewServer(api.NewHandler(env.Engine, ho))
	t.Cleanup(srv.Close)
	ct := newContract(t, api.OpenAPI())
	// The timeout covers the contract check too, which compiles a JSON
	// Schema validator for every exchange (kin-openapi caches none):
	// under -race on two busy cores, 200 concurrent answers checked at
	// once took 29 s. It is there to end a hung call, not to time one.
	hc := &http.Client{Transport: ct.transport(t, http.DefaultTransport), Timeout: 3 * time.Minute}
	t.Cleanup(hc.CloseIdleConnections)
	anon, err := client.New(srv.URL, client.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return &apiEnv{Env: env, srv: srv, contract: ct, logs: logs, anon: anon, http: hc, healed: healed}
}

// client returns a client sending key.
func (a *apiEnv) client(t testing.TB, key string) *client.Client {
	t.Helper()
	c, err := client.New(a.srv.URL, client.Options{Key: key, HTTPClient: a.http})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rawResp is an answer to a raw request.
type rawResp struct {
	status int
	header http.Header
	body   []byte
}

// problem decodes the answer as a problem, failing the test unless it is
// one with the wanted status and code.
func (r rawResp) problem(t testing.TB, status int, code string) client.Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.body)
	}
	var p client.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	if p.Status != status || p.Code != code || p.Detail == "" || p.Title == "" || p.Type != "urn:dagflow:problem:"+code {
		t.Fatalf("problem %+v, want status %d code %s with a type, title and detail", p, status, code)
	}
	return p
}

// decode decodes a JSON answer with the wanted status into v.
func (r rawResp) decode(t testing.TB, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// raw sends a request through the validating transport. header is a list
// of "Name: value" lines.
func (a *apiEnv) raw(t testing.TB, method, path string, body string, header ...string) rawResp {
	t.Helper()
	r, err := a.rawDo(method, path, body, nil, header...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rawDo sends a request through the validating transport and returns an
// error rather than failing a test, for use off the test's goroutine.
// edit, when not nil, changes the request before it is sent (its Host).
func (a *apiEnv) rawDo(method, path string, body string, edit func(*http.Request), header ...string) (rawResp, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, rd)
	if err != nil {
		return rawResp{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	} else if method != http.MethodGet && method != http.MethodHead {
		// A program's write without a body, as the Go client sends it
		// (a keyless server refuses one without: TestKeylessWritesNeedAPreflightHeader).
		req.Header.Set(api.PreflightHeader, "1")
	}
	for _, h := range header {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if edit != nil {
		edit(req)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return rawResp{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawResp{}, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return rawResp{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// waitStatus waits for a run to reach a status.
func (a *apiEnv) waitStatus(t testing.TB, id string, want string) client.RunDetail {
	t.Helper()
	var d client.RunDetail
	testenv.Eventually(t, 30*time.Second, func() bool {
		var err error
		d, err = a.anonOrAdmin().GetRun(context.Background(), id)
		if err != nil {
			t.Fatalf("get run %s: %v", id, err)
		}
		return d.Run.Status == want
	}, "run %s did not become %s", id, want)
	return d
}

// anonOrAdmin is the client the helpers use.
func (a *apiEnv) anonOrAdmin() *client.Client {
	if a.adminClient != nil {
		return a.adminClient
	}
	return a.anon
}

// problemOf returns err's *client.Problem, failing the test unless it has
// the wanted status and code.
func problemOf(t testing.TB, err error, status int, code string) *client.Problem {
	t.Helper()
	var p *client.Problem
	if !errors.As(err, &p) {
		t.Fatalf("error %v, want a *client.Problem %d %s", err, status, code)
	}
	if p.Status != status || p.Code != code {
		t.Fatalf("problem %+v, want %d %s", p, status, code)
	}
	return p
}

// syncBuffer is a log sink for concurrent writers.
type syncBuffer = testenv.SyncBuffer

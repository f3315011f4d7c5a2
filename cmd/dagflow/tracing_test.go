package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// collector is a fake OTLP/HTTP trace collector: it decodes every
// ExportTraceServiceRequest posted to /v1/traces.
type collector struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []*tracepb.Span
	services map[string]bool // service.name of the resources
	bad      []string        // requests it could not take
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{services: map[string]bool{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			c.bad = append(c.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+errString(err))
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					c.services[kv.GetValue().GetStringValue()] = true
				}
			}
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// received returns the spans received so far, and the requests refused.
func (c *collector) received() ([]*tracepb.Span, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...), append([]string(nil), c.bad...)
}

// spanAttr returns a span's string (or int, as text) attribute.
func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v := kv.GetValue().GetStringValue(); v != "" {
				return v
			}
			return strconv.FormatInt(kv.GetValue().GetIntValue(), 10)
		}
	}
	return ""
}

// runSpans returns, of spans, the trigger span of run id and the spans
// in its trace.
func runSpans(t *testing.T, spans []*tracepb.Span, id string) (trigger *tracepb.Span, trace []*tracepb.Span) {
	t.Helper()
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "dagflow.trigger ") && spanAttr(s, "dagflow.run_id") == id {
			trigger = s
		}
	}
	if trigger == nil {
		return nil, nil
	}
	for _, s := range spans {
		if bytes.Equal(s.TraceId, trigger.TraceId) {
			trace = append(trace, s)
		}
	}
	return trigger, trace
}

// TestDevExportsTraces: dev --once --otlp-endpoint exports the spans of
// its runs to the collector, flushed before it exits: each run one trace,
// its trigger span (PRODUCER) the parent of its steps' spans (CONSUMER),
// under the service name dagflow.
func TestDevExportsTraces(t *testing.T) {
	col := newCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "dev.db")
	code, out, errb := runCLI(t, ctx, "dev", "--once", "--db", db, "--runs", "2", "--otlp-endpoint", col.srv.URL)
	if code != 0 {
		t.Fatalf("dev --once exited %d:\n%s\n%s", code, out, errb)
	}
	if !strings.Contains(out, "traces exported over OTLP/HTTP to "+col.srv.URL+"/v1/traces") {
		t.Errorf("dev does not say where its traces go:\n%s", out)
	}
	spans, bad := col.received()
	if len(bad) > 0 {
		t.Fatalf("the collector refused requests: %v", bad)
	}
	triggers := 0
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "dagflow.trigger ") {
			continue
		}
		triggers++
		id := spanAttr(s, "dagflow.run_id")
		_, trace := runSpans(t, spans, id)
		steps := 0
		for _, sp := range trace {
			if strings.HasPrefix(sp.Name, "dagflow.step ") {
				steps++
				if !bytes.Equal(sp.ParentSpanId, s.SpanId) || sp.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
					t.Errorf("run %s: span %q kind %v parent %x, want a consumer child of the trigger span %x", id, sp.Name, sp.Kind, sp.ParentSpanId, s.SpanId)
				}
			}
		}
		if s.Kind != tracepb.Span_SPAN_KIND_PRODUCER || steps < 3 {
			t.Errorf("run %s: trigger span kind %v, %d step spans in its trace; want producer, at least 3", id, s.Kind, steps)
		}
	}
	if triggers != 2 {
		t.Errorf("%d trigger spans exported, want 2 (one per run); %d spans", triggers, len(spans))
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if !col.services["dagflow"] || len(col.services) != 1 {
		t.Errorf("service names %v, want dagflow", col.services)
	}
}

// TestServeExportsTraces: serve, configured by the standard environment
// variables, exports the spans of a run triggered over its API with a
// traceparent header: the trigger span is a child of the caller's span
// and the steps are in the caller's trace; OTEL_SERVICE_NAME names the
// service. The last spans are flushed when serve stops.
func TestServeExportsTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	col := newCollector(t)
	t.Setenv(envOTLPEndpoint, col.srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "shop-engine")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	u, errb, stop := env.startServe(t, ctx, "--listen", "127.0.0.1:0", "--demo")

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u+"/v1/workflows/order/runs",
		strings.NewReader(`{"input":{"order_id":"t-1","customer":"c@example.com","sku":"SKU-1","quantity":1,"total":150}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST a run: %d %s", resp.StatusCode, body)
	}
	var r client.Run
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		run, err := env.store.RunGet(ctx, r.ID)
		return err == nil && run.Status == persistence.RunSucceeded
	}, "the run triggered over HTTP did not succeed on serve's workers")
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, errb)
	}
	// Stopped: every span was flushed.
	spans, bad := col.received()
	if len(bad) > 0 {
		t.Fatalf("the collector refused requests: %v", bad)
	}
	trigger, trace := runSpans(t, spans, r.ID)
	if trigger == nil {
		t.Fatalf("no trigger span for run %s among %d spans", r.ID, len(spans))
	}
	if got := hex.EncodeToString(trigger.TraceId); got != traceID {
		t.Errorf("trigger span in trace %s, want the caller's %s", got, traceID)
	}
	if got := hex.EncodeToString(trigger.ParentSpanId); got != parentID {
		t.Errorf("trigger span's parent %s, want the caller's span %s", got, parentID)
	}
	steps := map[string]bool{}
	for _, s := range trace {
		if strings.HasPrefix(s.Name, "dagflow.step ") && bytes.Equal(s.ParentSpanId, trigger.SpanId) {
			steps[spanAttr(s, "dagflow.step")] = true
		}
	}
	if len(steps) < 3 {
		t.Errorf("step spans of the run in the caller's trace: %v, want every step of the order", steps)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if !col.services["shop-engine"] {
		t.Errorf("service names %v, want OTEL_SERVICE_NAME's shop-engine", col.services)
	}
}

// TestTracingConfiguration: no endpoint, no tracing; OTEL_SDK_DISABLED
// and OTEL_TRACES_EXPORTER=none turn the environment's endpoint off; a
// bad --otlp-endpoint is a usage error naming the flag.
func TestTracingConfiguration(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		env  map[string]string
		flag string
		on   bool
	}{
		{name: "nothing configured"},
		{name: "endpoint", env: map[string]string{envOTLPEndpoint: "http://127.0.0.1:1"}, on: true},
		{name: "traces endpoint", env: map[string]string{envOTLPTracesEndpoint: "http://127.0.0.1:1/v1/traces"}, on: true},
		{name: "sdk disabled", env: map[string]string{envOTLPEndpoint: "http://127.0.0.1:1", envSDKDisabled: "true"}},
		{name: "exporter none", env: map[string]string{envOTLPEndpoint: "http://127.0.0.1:1", envTracesExporter: "none"}},
		{name: "flag", flag: "http://127.0.0.1:1", on: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{envOTLPEndpoint, envOTLPTracesEndpoint, envSDKDisabled, envTracesExporter} {
				t.Setenv(k, tc.env[k])
			}
			tr, err := openTracing(ctx, tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			if on := tr != nil; on != tc.on {
				t.Errorf("tracing on: %v, want %v", on, tc.on)
			}
			if tr != nil {
				tctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				tr.tp.Shutdown(tctx)
			}
		})
	}
	for _, bad := range []string{"localhost:4318", "ftp://collector", "http://", "http://user:s3cret@collector:4318"} {
		code, out, errb := runCLI(t, ctx, "worker", "--otlp-endpoint", bad)
		if code != 2 || !strings.Contains(errb, "--otlp-endpoint") {
			t.Errorf("worker --otlp-endpoint %q: exit %d, stderr %q; want a usage error naming the flag", bad, code, errb)
		}
		if strings.Contains(out+errb, "s3cret") {
			t.Errorf("worker --otlp-endpoint %q printed the password: %q %q", bad, out, errb)
		}
	}
	// The environment's endpoints get the same checks, naming the
	// variable; a password in one is refused, never printed; only
	// OTLP/HTTP with protobuf is spoken.
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{envOTLPEndpoint: "collector:4318"}, envOTLPEndpoint},
		{map[string]string{envOTLPTracesEndpoint: "ftp://collector/v1/traces"}, envOTLPTracesEndpoint},
		{map[string]string{envOTLPEndpoint: "https://user:s3cret@collector:4318"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{map[string]string{envOTLPEndpoint: "http://127.0.0.1:1", envOTLPProtocol: "grpc"}, envOTLPProtocol},
		{map[string]string{envOTLPEndpoint: "http://127.0.0.1:1", envOTLPTracesProtocol: "http/json"}, envOTLPTracesProtocol},
	} {
		for _, k := range []string{envOTLPEndpoint, envOTLPTracesEndpoint, envOTLPProtocol, envOTLPTracesProtocol} {
			t.Setenv(k, tc.env[k])
		}
		tr, err := openTracing(ctx, "")
		if err == nil {
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			tr.tp.Shutdown(tctx)
			cancel()
			t.Errorf("env %v: tracing opened, want an error naming %s", tc.env, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("env %v: error %q, want it to name %s and not the password", tc.env, err, tc.want)
		}
	}
	for _, k := range []string{envOTLPEndpoint, envOTLPTracesEndpoint, envOTLPProtocol, envOTLPTracesProtocol} {
		t.Setenv(k, "")
	}
	// What the banner shows has no query (a token may be there).
	t.Setenv(envOTLPTracesEndpoint, "http://127.0.0.1:1/v1/traces?api-key=k3y")
	tr, err := openTracing(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.tp.Shutdown(ctx)
	if d := tr.describe(); strings.Contains(d, "k3y") || !strings.Contains(d, "http://127.0.0.1:1/v1/traces") {
		t.Errorf("banner %q: want the endpoint without its query", d)
	}
}

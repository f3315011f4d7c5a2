package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
)

// The caller's span in the W3C headers of the tests below.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
	callerParent  = "00-" + callerTraceID + "-" + callerSpanID + "-01"
	callerState   = "vendor=opaque"
)

// triggerWithHeaders posts a run of the order workflow with headers and
// returns it.
func triggerWithHeaders(t *testing.T, a *apiEnv, header ...string) client.Run {
	t.Helper()
	r := a.raw(t, http.MethodPost, "/v1/workflows/order/runs", `{"input":{"n":1}}`, header...)
	if r.status != http.StatusCreated {
		t.Fatalf("trigger: status %d, want 201; body %s", r.status, r.body)
	}
	var run client.Run
	if err := json.Unmarshal(r.body, &run); err != nil {
		t.Fatal(err)
	}
	return run
}

// triggerSpan returns the trigger span of run id.
func triggerSpan(t *testing.T, exp *tracetest.InMemoryExporter, id string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range exp.GetSpans().Snapshots() {
		if !strings.HasPrefix(s.Name(), "dagflow.trigger ") {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == "dagflow.run_id" && kv.Value.AsString() == id {
				return s
			}
		}
	}
	t.Fatalf("no trigger span for run %s", id)
	return nil
}

// TestTriggerJoinsCallersTrace: POST /v1/workflows/{name}/runs with a W3C
// traceparent (and tracestate) makes the run's trigger span a child of
// the caller's span, and the run's stored trace context is in the
// caller's trace; without the header, or with a malformed one, the run
// starts a trace of its own.
func TestTriggerJoinsCallersTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	a := newAPIEnv(t, backends()[0], envOptions{engine: func(c *engine.Config) { c.TracerProvider = tp }})

	t.Run("traceparent", func(t *testing.T) {
		run := triggerWithHeaders(t, a, "traceparent: "+callerParent, "tracestate: "+callerState)
		s := triggerSpan(t, exp, run.ID)
		if got := s.SpanContext().TraceID().String(); got != callerTraceID {
			t.Errorf("trigger span in trace %s, want the caller's %s", got, callerTraceID)
		}
		if got := s.Parent().SpanID().String(); got != callerSpanID || !s.Parent().IsRemote() {
			t.Errorf("trigger span's parent %s (remote %v), want the caller's span %s, remote", got, s.Parent().IsRemote(), callerSpanID)
		}
		if got := s.SpanContext().TraceState().String(); got != callerState {
			t.Errorf("trigger span's tracestate %q, want the caller's %q", got, callerState)
		}
		// The run carries the trigger span's context: every step is in
		// the caller's trace.
		want := "00-" + callerTraceID + "-" + s.SpanContext().SpanID().String() + "-01"
		if got := run.Metadata[engine.MetadataTraceparent]; got != want {
			t.Errorf("run's traceparent %q, want the trigger span's %q", got, want)
		}
		d := a.waitStatus(t, run.ID, "succeeded")
		if d.Run.Metadata[engine.MetadataTracestate] != callerState {
			t.Errorf("run's tracestate %q, want %q", d.Run.Metadata[engine.MetadataTracestate], callerState)
		}
		// The last step's span ends after the commit that finished the
		// run: wait for it.
		n := 0
		testenv.Eventually(t, 10*time.Second, func() bool {
			n = 0
			for _, sp := range exp.GetSpans().Snapshots() {
				if strings.HasPrefix(sp.Name(), "dagflow.step order/") && sp.SpanContext().TraceID().String() == callerTraceID {
					n++
				}
			}
			return n >= 3
		}, "step spans in the caller's trace: want 3")
		if n != 3 {
			t.Errorf("%d step spans in the caller's trace, want 3", n)
		}
	})
	for name, header := range map[string][]string{
		"no header": nil,
		"malformed": {"traceparent: 00-not-a-trace-01"},
		"zero ids":  {"traceparent: 00-00000000000000000000000000000000-0000000000000000-01"},
	} {
		t.Run(name, func(t *testing.T) {
			run := triggerWithHeaders(t, a, header...)
			s := triggerSpan(t, exp, run.ID)
			if s.Parent().IsValid() {
				t.Errorf("trigger span has parent %s, want a root span", s.Parent().SpanID())
			}
			if got := s.SpanContext().TraceID().String(); got == callerTraceID {
				t.Errorf("trigger span in the caller's trace %s", got)
			}
			if tp := run.Metadata[engine.MetadataTraceparent]; !strings.Contains(tp, s.SpanContext().TraceID().String()) {
				t.Errorf("run's traceparent %q, want the trigger span's trace %s", tp, s.SpanContext().TraceID())
			}
		})
	}
}

// TestTriggerTraceparentWithoutTracing: an engine without a
// TracerProvider takes the header and stores no trace context.
func TestTriggerTraceparentWithoutTracing(t *testing.T) {
	a := newAPIEnv(t, backends()[0], envOptions{})
	run := triggerWithHeaders(t, a, "traceparent: "+callerParent)
	if _, ok := run.Metadata[engine.MetadataTraceparent]; ok {
		t.Errorf("run metadata %v: a traceparent stored by an engine that does not trace", run.Metadata)
	}
}

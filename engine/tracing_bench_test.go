package engine

import (
	"context"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/persistence"
)

// discardExporter drops the spans it is given: the benchmarks measure
// making, ending and batching spans, as dagflow bench --tracing does.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// benchTracer is a tracer on an SDK provider whose batched spans are
// dropped.
func benchTracer(b *testing.B) *tracer {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	return newTracer(tp, "node-1")
}

// benchClaim is a claimed attempt of a run triggered by a tracing node.
func benchClaim() persistence.StepClaimResult {
	return persistence.StepClaimResult{
		Run: persistence.Run{ID: "01a23413-3e4d-7ebe-b800-de2b31aafb40", Workflow: "order", Metadata: map[string]string{
			MetadataTraceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme",
		}},
		Step: persistence.StepRun{RunID: "01a23413-3e4d-7ebe-b800-de2b31aafb40", Step: "charge", Queue: "default", Attempt: 1, MaxAttempts: 3},
	}
}

// BenchmarkTracedAttempt is what tracing adds to one step's attempt: its
// span started, its outcome noted, the commit that recorded it linked,
// the span ended, and a share of its completion transaction's span (one
// per 64 attempts).
func BenchmarkTracedAttempt(b *testing.B) {
	t := benchTracer(b)
	res := benchClaim()
	const taskID = "01a23413-3e4d-7ebe-b800-de2b31aafb40/charge/1"
	ctx := context.Background()
	batch := make([]*completion, 64)
	for i := range batch {
		batch[i] = &completion{}
	}
	var commit trace.SpanContext
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		actx, _ := t.startAttempt(ctx, res, taskID, false)
		t.outcome(actx, "succeeded", nil)
		c := batch[i%len(batch)]
		c.span = t.attemptSpan(actx)
		if i%len(batch) == len(batch)-1 {
			span := t.startBatch(batch)
			commit = span.SpanContext()
			t.endBatch(span, 0, nil)
		}
		t.committed(actx, commit)
		t.endAttempt(actx)
	}
	// The process's CPU time, the span processor's goroutine and the
	// collector included: on a shared machine a steadier figure than
	// the wall clock's ns/op.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkTracedAttemptUnsampled is what tracing adds to an attempt of
// a run whose trace the sampler dropped (its stored traceparent says not
// sampled, and the provider's sampler is the parent-based one): under a
// ratio sampler, most attempts cost this, not BenchmarkTracedAttempt.
func BenchmarkTracedAttemptUnsampled(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	t := newTracer(tp, "node-1")
	res := benchClaim()
	res.Run.Metadata[MetadataTraceparent] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	const taskID = "01a23413-3e4d-7ebe-b800-de2b31aafb40/charge/1"
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		actx, _ := t.startAttempt(ctx, res, taskID, false)
		t.outcome(actx, "succeeded", nil)
		if sc := t.attemptSpan(actx); sc.IsValid() {
			b.Fatal("an unsampled attempt offered its span to the commit")
		}
		t.endAttempt(actx)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process used so far (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestTracedAttemptAllocations bounds what tracing allocates per attempt
// (with an SDK provider): the engine's part is its attemptTrace and the
// remote parent's context; the rest is the SDK's (its span, its context,
// the attribute array, the de-duplication map, the snapshot). A change
// that makes the SDK copy the attributes more than once (attributes
// given at the start again, or the outcome set in a call of its own)
// shows here.
func TestTracedAttemptAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	defer tp.Shutdown(context.Background())
	tr := newTracer(tp, "node-1")
	res := benchClaim()
	ctx := context.Background()
	const taskID = "01a23413-3e4d-7ebe-b800-de2b31aafb40/charge/1"
	for range 10 { // the pools and the step's span description
		actx, _ := tr.startAttempt(ctx, res, taskID, false)
		tr.endAttempt(actx)
	}
	const want = 10
	got := testing.AllocsPerRun(1000, func() {
		actx, _ := tr.startAttempt(ctx, res, taskID, false)
		tr.outcome(actx, "succeeded", nil)
		tr.endAttempt(actx)
	})
	if got > want {
		t.Errorf("a traced attempt allocates %v times, want at most %d", got, want)
	}
}

// TestParseTraceparent: the engine's reading of a run's traceparent
// agrees with the W3C propagator's on valid, malformed and other-version
// values.
func TestParseTraceparent(t *testing.T) {
	tr := newTracer(sdktrace.NewTracerProvider(), "node-1")
	for _, tc := range []struct{ tp, ts string }{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", "vendor=opaque,other=x"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "not a tracestate"},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", ""},
		// Reserved flag bits: the propagator refuses version 00 with any.
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736x00f067aa0ba902b7-01", ""},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", ""},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", ""},
		{"", ""},
	} {
		md := map[string]string{MetadataTraceparent: tc.tp}
		if tc.ts != "" {
			md[MetadataTracestate] = tc.ts
		}
		got := tr.runParent(md)
		want := trace.SpanContextFromContext(tr.prop.Extract(context.Background(), propagation.MapCarrier(md)))
		if !got.Equal(want) || got.IsRemote() != want.IsRemote() {
			t.Errorf("traceparent %q tracestate %q: got %v %v, the propagator %v %v", tc.tp, tc.ts, got, got.IsRemote(), want, want.IsRemote())
		}
	}
	if sc := tr.runParent(map[string]string{"tenant": "acme"}); sc.IsValid() {
		t.Errorf("a run without a traceparent has parent %v", sc)
	}
}

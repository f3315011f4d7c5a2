package engine

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// OpenTelemetry tracing (Config.TracerProvider). A run is one trace:
//
//   - Trigger and TriggerTx make a PRODUCER span, "dagflow.trigger
//     <workflow>", child of the caller's span, and store its W3C trace
//     context with the run, in the run's metadata under the reserved keys
//     MetadataTraceparent and MetadataTracestate. Every claim returns the
//     run's metadata, so no schema change and no extra read is needed,
//     and every node, after any crash or retry, parents its spans there.
//   - Each attempt of a step is a CONSUMER span, "dagflow.step
//     <workflow>/<step>" ("dagflow.compensate <workflow>/<step>" for a
//     compensation), child of the trigger span, with the run id, step,
//     attempt, queue, node and outcome, and the messaging attributes
//     that apply (system "dagflow", operation type "process", operation
//     name "run" or "compensate", the queue as destination, the task id
//     as message id). The handler's context carries it.
//   - Each completion transaction of the committers (the group commit of
//     successes and skips, of many runs at once) is a span,
//     "dagflow.commit", in a trace of its own, linked to the attempts it
//     records, and each of those attempts links back to it: one span per
//     transaction rather than one per step, which would double the spans
//     a step costs; the wait for the commit is inside the attempt's span,
//     which ends once its outcome is recorded.
//
// Links between the attempts of a step: a new attempt that took over a
// lost one (its node died or froze past its lease) records the lost
// attempt, which its own node could not end, as a span of its own (the
// lost worker's node, its start and the takeover time, outcome "lost"),
// and links to it. A retry after a failure links to the failed attempt's
// span when this node ran it; another node's span id is not stored
// (that would mean a column written on every failure), so such a retry
// carries dagflow.previous_attempt only, and sits beside it under the
// trigger span.
//
// Sampling: a span the sampler does not record costs its ids only. An
// attempt's attributes and links are made when its span ends, and only
// if it is recorded; a commit span links the recorded attempts, and is
// not made for a transaction that records none.
//
// With a nil TracerProvider e.tracer is nil and every helper returns at
// once: tracing costs a nil check.

// Reserved run metadata keys holding the W3C trace context of the span
// that triggered the run. The engine writes them when it traces, and
// keeps them out of steps.Context.Metadata; the run's metadata as read
// back (Get, Runs, the HTTP API) shows them, which tells an operator the
// run's trace id. A caller that triggers without tracing (over the HTTP
// API, say) may set MetadataTraceparent itself to put the run in its
// trace.
const (
	MetadataTraceparent = "traceparent"
	MetadataTracestate  = "tracestate"
)

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/dagflow/dagflow/engine"

// maxPrevSpans bounds the failed attempts whose span contexts a node
// keeps for the retry's link.
const maxPrevSpans = 4096

// maxStepSpans bounds the (workflow, step, queue) span descriptions a
// node keeps; past it they are made afresh.
const maxStepSpans = 4096

// tracer makes the engine's spans. A nil *tracer traces nothing.
type tracer struct {
	t    trace.Tracer
	node string
	prop propagation.TraceContext

	mu   sync.Mutex
	prev map[string]trace.SpanContext // task id of a failed attempt -> its span

	// steps is read on every attempt without a lock (a map never
	// changed once stored) and copied, under stepsMu, to add a step.
	stepsMu sync.Mutex
	steps   atomic.Pointer[map[stepSpanKey]*stepSpan]
}

func newTracer(tp trace.TracerProvider, node string) *tracer {
	if tp == nil {
		return nil
	}
	t := &tracer{t: tp.Tracer(tracerName), node: node, prev: map[string]trace.SpanContext{}}
	t.steps.Store(&map[stepSpanKey]*stepSpan{})
	return t
}

// stepSpanKey names what the spans of a step's attempts share.
type stepSpanKey struct {
	workflow, step, queue string
	compensation          bool
}

// stepSpan is what every attempt span of a step shares, made once per
// node: its name and the attributes that do not change between
// attempts. An attempt adds its run id, task id and attempt number.
type stepSpan struct {
	name  string
	attrs []attribute.KeyValue // never changed once made
}

// stepSpan returns the shared part of the spans of a step's attempts.
func (t *tracer) stepSpan(workflow, step, queue string, compensation bool) *stepSpan {
	k := stepSpanKey{workflow: workflow, step: step, queue: queue, compensation: compensation}
	if ss := (*t.steps.Load())[k]; ss != nil {
		return ss
	}
	verb, op := "dagflow.step ", "run"
	if compensation {
		verb, op = "dagflow.compensate ", "compensate"
	}
	ss := &stepSpan{
		name: verb + workflow + "/" + step,
		attrs: []attribute.KeyValue{
			attrSystem, attrProcess, semconv.MessagingOperationName(op), semconv.MessagingDestinationName(queue),
			keyWorkflow.String(workflow), keyStep.String(step), keyQueue.String(queue),
			keyCompensation.Bool(compensation), keyNode.String(t.node),
		},
	}
	t.stepsMu.Lock()
	defer t.stepsMu.Unlock()
	old := *t.steps.Load()
	if prev := old[k]; prev != nil {
		return prev
	}
	next := make(map[stepSpanKey]*stepSpan, len(old)+1)
	if len(old) < maxStepSpans {
		maps.Copy(next, old)
	}
	next[k] = ss
	t.steps.Store(&next)
	return ss
}

// attrBufs holds the buffers in which attempts put their spans'
// attributes for the SDK to copy.
var attrBufs = sync.Pool{New: func() any {
	b := make([]attribute.KeyValue, 0, 16)
	return &b
}}

// consumerKind is the attempt spans' kind option, made once, and
// consumerStart the options of an attempt span's start: a slice made
// once rather than one per call.
var (
	consumerKind  = trace.WithSpanKind(trace.SpanKindConsumer)
	consumerStart = []trace.SpanStartOption{consumerKind}
)

var (
	attrSystem  = semconv.MessagingSystemKey.String("dagflow")
	attrProcess = semconv.MessagingOperationTypeProcess
	attrCreate  = semconv.MessagingOperationTypeCreate
)

// Attribute keys of the engine's spans.
const (
	keyRunID        = attribute.Key("dagflow.run_id")
	keyWorkflow     = attribute.Key("dagflow.workflow")
	keyStep         = attribute.Key("dagflow.step")
	keyAttempt      = attribute.Key("dagflow.attempt")
	keyQueue        = attribute.Key("dagflow.queue")
	keyNode         = attribute.Key("dagflow.node")
	keyOutcome      = attribute.Key("dagflow.outcome")
	keyCompensation = attribute.Key("dagflow.compensation")
	keyPrevAttempt  = attribute.Key("dagflow.previous_attempt")
	keyCreated      = attribute.Key("dagflow.created")
	keyBatch        = attribute.Key("dagflow.commit.batch_size")
	keyRecordedBy   = attribute.Key("dagflow.recorded_by")
	keyClaimed      = attribute.Key("dagflow.commit.claimed")
)

// startTrigger starts the span of a Trigger or TriggerTx call.
func (t *tracer) startTrigger(ctx context.Context, workflow string) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	return t.t.Start(ctx, "dagflow.trigger "+workflow, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrSystem, attrCreate, keyWorkflow.String(workflow), keyNode.String(t.node),
			semconv.MessagingOperationName("trigger")))
}

// endTrigger ends a trigger span with the run it made (or found, for a
// repeated idempotency key) or its error.
func (t *tracer) endTrigger(span trace.Span, runID string, created bool, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(keyRunID.String(runID), semconv.MessagingMessageID(runID), keyCreated.Bool(created))
	}
	span.End()
}

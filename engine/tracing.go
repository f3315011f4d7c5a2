package engine

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/persistence"
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

// inject returns md with the trace context of ctx's span under the
// reserved keys: a copy, the caller's map is left alone. Without a valid
// span in ctx (or without tracing) it returns md.
func (t *tracer) inject(ctx context.Context, md map[string]string) map[string]string {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return md
	}
	out := make(map[string]string, len(md)+2)
	for k, v := range md {
		out[k] = v
	}
	delete(out, MetadataTracestate) // a caller's stale one must not survive
	t.prop.Inject(ctx, propagation.MapCarrier(out))
	return out
}

// userMetadata is the run metadata handlers see: without the reserved
// trace keys. The map is copied only when it holds one.
func userMetadata(md map[string]string) map[string]string {
	_, tp := md[MetadataTraceparent]
	_, ts := md[MetadataTracestate]
	if !tp && !ts {
		return md
	}
	n := len(md)
	if tp {
		n--
	}
	if ts {
		n--
	}
	if n == 0 {
		return nil // a traced run without metadata of its own: no copy
	}
	out := make(map[string]string, n)
	for k, v := range md {
		if k != MetadataTraceparent && k != MetadataTracestate {
			out[k] = v
		}
	}
	return out
}

// attemptTrace is the span of one attempt. It is also the attempt's
// context (the engine's, with the span): one allocation for both.
type attemptTrace struct {
	context.Context
	span    trace.Span
	step    *stepSpan
	parent  trace.SpanContext // the run's: the trigger span's
	runID   string
	taskID  string
	attempt int
	outcome string
	// commit is the span of the completion transaction that recorded
	// (or last tried to record) the outcome.
	commit trace.SpanContext
	// logAttrs are the attributes of the attempt's logger: kept here,
	// they cost no allocation of their own.
	logAttrs [2]slog.Attr
}

type attemptKey struct{}

// Value implements context.Context: the attempt for attemptKey.
func (at *attemptTrace) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return at
	}
	return at.Context.Value(key)
}

// startAttempt starts the span of a claimed attempt, child of the run's
// trigger span, and returns the attempt's context and the attributes to
// add to its logger: the trace and span ids.
//
// The span starts with its name and kind only: its attributes are set
// once, when it ends (endAttempt), and only if the sampler records it.
// One SetAttributes of all of them makes the SDK copy them once into an
// array of the right size, where attributes given at the start are
// copied into the start's config, then into the span, then grown for
// the outcome; and a span the sampler drops costs no attribute at all.
func (t *tracer) startAttempt(ctx context.Context, res persistence.StepClaimResult, taskID string, compensation bool) (context.Context, []slog.Attr) {
	if t == nil {
		return ctx, nil
	}
	attempt := res.Step.Attempt
	if compensation {
		attempt = res.Step.CompAttempt
	}
	ss := t.stepSpan(res.Run.Workflow, res.Step.Step, res.Step.Queue, compensation)
	at := &attemptTrace{step: ss, parent: t.runParent(res.Run.Metadata), runID: res.Step.RunID, taskID: taskID, attempt: attempt}
	// The handler's context: the engine's (its cancellation) with the
	// span, the one the SDK returns, over the run's parent.
	at.Context, at.span = t.t.Start(trace.ContextWithRemoteSpanContext(ctx, at.parent), ss.name, consumerStart...)
	if attempt > 1 {
		// The failed attempt's span context is taken out whether or not
		// this one is recorded: the map only holds what a retry may read.
		prev := taskRef{RunID: res.Step.RunID, Step: res.Step.Step, Compensation: compensation, Attempt: attempt - 1}.String()
		t.mu.Lock()
		sc, ok := t.prev[prev]
		delete(t.prev, prev)
		t.mu.Unlock()
		if ok && at.span.IsRecording() {
			at.span.AddLink(trace.Link{Attributes: []attribute.KeyValue{keyPrevAttempt.Int(attempt - 1)}, SpanContext: sc})
		}
	}
	if !at.span.SpanContext().IsValid() {
		return at, nil
	}
	// Formatted only if the attempt logs: most log nothing.
	at.logAttrs = [2]slog.Attr{slog.Any("trace_id", traceIDOf{at}), slog.Any("span_id", spanIDOf{at})}
	return at, at.logAttrs[:]
}

// runParent returns the span context stored with a run (the trigger
// span's), remote; the zero one when the run has none. The common
// traceparent, version 00 as this engine writes it, is read without the
// propagator's allocations; anything else goes through it.
func (t *tracer) runParent(md map[string]string) trace.SpanContext {
	tp, ok := md[MetadataTraceparent]
	if !ok {
		return trace.SpanContext{}
	}
	if sc, ok := parseTraceparent(tp, md[MetadataTracestate]); ok {
		return sc
	}
	return trace.SpanContextFromContext(t.prop.Extract(context.Background(), propagation.MapCarrier(md)))
}

// parseTraceparent reads a W3C traceparent of version 00
// ("00-<32 hex>-<16 hex>-<2 hex>", lower case) and its tracestate. ok is
// false for anything else, valid or not, which the propagator then
// judges; a traceparent it reads but whose ids are zero is invalid.
func parseTraceparent(tp, ts string) (sc trace.SpanContext, ok bool) {
	if len(tp) != 55 || tp[0] != '0' || tp[1] != '0' || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	if !unhex(cfg.TraceID[:], tp[3:35]) || !unhex(cfg.SpanID[:], tp[36:52]) {
		return trace.SpanContext{}, false
	}
	var flags [1]byte
	// Version 00 defines the sampled (01) and random (02) bits; a flags
	// byte with others set is left to the propagator, which refuses it.
	if !unhex(flags[:], tp[53:55]) || flags[0] > 0x03 {
		return trace.SpanContext{}, false
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0])
	cfg.Remote = true
	if ts != "" {
		state, err := trace.ParseTraceState(ts)
		if err != nil {
			return trace.SpanContext{}, false
		}
		cfg.TraceState = state
	}
	sc = trace.NewSpanContext(cfg)
	if !sc.IsValid() {
		return trace.SpanContext{}, true
	}
	return sc, true
}

// unhex decodes lower-case hex src into dst (len(src) == 2*len(dst)).
func unhex(dst []byte, src string) bool {
	for i := range dst {
		hi, lo := hexVal(src[2*i]), hexVal(src[2*i+1])
		if hi > 15 || lo > 15 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func hexVal(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 255
}

// traceIDOf and spanIDOf log an attempt's trace and span ids as hex.
type (
	traceIDOf struct{ at *attemptTrace }
	spanIDOf  struct{ at *attemptTrace }
)

// LogValue implements slog.LogValuer.
func (v traceIDOf) LogValue() slog.Value {
	return slog.StringValue(v.at.span.SpanContext().TraceID().String())
}

// LogValue implements slog.LogValuer.
func (v spanIDOf) LogValue() slog.Value {
	return slog.StringValue(v.at.span.SpanContext().SpanID().String())
}

// attemptOf returns the attempt span in ctx, or nil.
func attemptOf(ctx context.Context) *attemptTrace {
	if at, ok := ctx.(*attemptTrace); ok {
		return at
	}
	at, _ := ctx.Value(attemptKey{}).(*attemptTrace)
	return at
}

// outcome notes how the attempt in ctx ended (the span ends with
// endAttempt): "succeeded", "skipped", "retrying", "dead", "aborted",
// "stale" (its lease was taken over), "compensated", ... The first call
// wins: a success that the store refuses as stale says stale.
func (t *tracer) outcome(ctx context.Context, outcome string, err error) {
	if t == nil {
		return
	}
	at := attemptOf(ctx)
	if at == nil || at.outcome != "" {
		return
	}
	at.outcome = outcome
	if err != nil {
		at.span.RecordError(err)
		at.span.SetStatus(codes.Error, firstLine(err))
	}
}

// retried keeps the span context of a failed attempt (taskID) that will
// be tried again, for the retry's link when this node claims it.
func (t *tracer) retried(ctx context.Context, taskID string) {
	if t == nil {
		return
	}
	at := attemptOf(ctx)
	if at == nil || !at.span.IsRecording() {
		return // a span the sampler dropped is not linked to
	}
	t.mu.Lock()
	if len(t.prev) >= maxPrevSpans {
		clear(t.prev) // retries of other nodes' claims are never read back
	}
	t.prev[taskID] = at.span.SpanContext()
	t.mu.Unlock()
}

// endAttempt ends the attempt span of ctx, with its attributes (see
// startAttempt). An attempt that recorded no outcome ends as "released":
// Stop handed it back, or the store could not be reached and it is
// tried again.
func (t *tracer) endAttempt(ctx context.Context) {
	if t == nil {
		return
	}
	at := attemptOf(ctx)
	if at == nil {
		return
	}
	if !at.span.IsRecording() {
		at.span.End()
		return
	}
	if at.outcome == "" {
		at.outcome = "released"
	}
	if at.commit.IsValid() {
		at.span.AddLink(trace.Link{SpanContext: at.commit})
	}
	// SetAttributes copies them: the buffer is reused.
	buf := attrBufs.Get().(*[]attribute.KeyValue)
	attrs := append(append((*buf)[:0], at.step.attrs...),
		semconv.MessagingMessageID(at.taskID), keyRunID.String(at.runID), keyAttempt.Int(at.attempt), keyOutcome.String(at.outcome))
	if at.attempt > 1 {
		attrs = append(attrs, keyPrevAttempt.Int(at.attempt-1))
	}
	at.span.SetAttributes(attrs...)
	clear(attrs) // the pool keeps no strings alive
	*buf = attrs[:0]
	attrBufs.Put(buf)
	at.span.End()
}

// lost records, as a span of its own, an earlier attempt of the step
// that lost its worker (a node that died or froze past its lease cannot
// end its span), and links the attempt in ctx to it.
func (t *tracer) lost(ctx context.Context, a persistence.Attempt, now time.Time) {
	if t == nil {
		return
	}
	at := attemptOf(ctx)
	if at == nil {
		return
	}
	end := now
	if a.FinishedAt != nil {
		end = *a.FinishedAt
	}
	// The step's shared attributes name this node; the lost attempt ran on
	// another (recorded_by names this one). Rare: a copy is fine here.
	attrs := make([]attribute.KeyValue, 0, len(at.step.attrs)+6)
	for _, kv := range at.step.attrs {
		if kv.Key != keyNode {
			attrs = append(attrs, kv)
		}
	}
	attrs = append(attrs, semconv.MessagingMessageID(at.taskID), keyRunID.String(at.runID),
		keyAttempt.Int(a.Attempt), keyNode.String(a.Worker), keyOutcome.String("lost"), keyRecordedBy.String(t.node))
	_, span := t.t.Start(trace.ContextWithRemoteSpanContext(context.Background(), at.parent), at.step.name, consumerKind, trace.WithTimestamp(a.StartedAt),
		trace.WithAttributes(attrs...))
	span.SetStatus(codes.Error, "the attempt lost its worker")
	span.End(trace.WithTimestamp(end))
	at.span.AddLink(trace.Link{SpanContext: span.SpanContext(), Attributes: []attribute.KeyValue{keyPrevAttempt.Int(a.Attempt)}})
}

// attemptSpan returns the span context of the attempt in ctx, for the
// commit of its outcome; the zero one without tracing, or when the
// sampler does not record the attempt.
func (t *tracer) attemptSpan(ctx context.Context) trace.SpanContext {
	if t == nil {
		return trace.SpanContext{}
	}
	if at := attemptOf(ctx); at != nil && at.span.IsRecording() {
		return at.span.SpanContext()
	}
	return trace.SpanContext{}
}

// startBatch starts the span of one completion transaction, linked to
// the recorded attempts whose outcomes it records (the SDK keeps up to
// its SpanLimits.LinkCountLimit, 128 by default, and counts the rest as
// dropped); nil without tracing, and when the sampler recorded none of
// them: the span would describe attempts no trace holds.
func (t *tracer) startBatch(batch []*completion) trace.Span {
	if t == nil {
		return nil
	}
	n := 0
	for _, c := range batch {
		if c.span.IsValid() {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	links := make([]trace.Link, 0, n)
	for _, c := range batch {
		if c.span.IsValid() {
			links = append(links, trace.Link{SpanContext: c.span})
		}
	}
	_, span := t.t.Start(context.Background(), "dagflow.commit", trace.WithLinks(links...),
		trace.WithAttributes(keyNode.String(t.node), keyBatch.Int(len(batch))))
	return span
}

// endBatch ends a completion transaction's span; err is the
// transaction's.
func (t *tracer) endBatch(span trace.Span, claimed int, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, firstLine(err))
	} else {
		span.SetAttributes(keyClaimed.Int(claimed))
	}
	span.End()
}

// committed notes the span of the transaction that recorded the outcome
// of the attempt in ctx; endAttempt links the attempt to it.
func (t *tracer) committed(ctx context.Context, commit trace.SpanContext) {
	// A commit span the sampler dropped is not linked to.
	if t == nil || !commit.IsValid() || !commit.IsSampled() {
		return
	}
	if at := attemptOf(ctx); at != nil {
		// Linked when the span ends, on a shallow stack (see runClaimed).
		at.commit = commit
	}
}

// TraceLogHandler wraps h so that a record logged with a context that
// carries a valid OpenTelemetry span gets the trace_id and span_id
// attributes (as hex strings), which lets a log search find a trace and
// the reverse. Records without a span, and loggers that already carry
// trace_id (the engine adds it to a step's logger, steps.Context.Logger,
// when it traces), pass as they are.
func TraceLogHandler(h slog.Handler) slog.Handler {
	if h == nil {
		h = slog.DiscardHandler
	}
	return &traceLog{h: h}
}

type traceLog struct {
	h   slog.Handler
	has bool // trace_id is among the handler's attributes already
}

// Enabled implements slog.Handler.
func (l *traceLog) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (l *traceLog) Handle(ctx context.Context, r slog.Record) error {
	if !l.has && ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r = r.Clone()
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return l.h.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (l *traceLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := l.has
	for _, a := range attrs {
		if a.Key == "trace_id" {
			has = true
		}
	}
	return &traceLog{h: l.h.WithAttrs(attrs), has: has}
}

// WithGroup implements slog.Handler.
func (l *traceLog) WithGroup(name string) slog.Handler {
	return &traceLog{h: l.h.WithGroup(name), has: l.has}
}

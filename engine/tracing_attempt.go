package engine

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/persistence"
)

// The spans of a step's attempts: one per attempt, which is also the
// handler's context, its outcome, and the links to a failed attempt
// before it and to a lost one it took over.

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

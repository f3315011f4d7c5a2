package engine

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The span of a completion transaction, "dagflow.commit", linked to the
// attempts whose outcomes it records and they to it.

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

package engine

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

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

package engine

import (
	"context"
	"log/slog"
	"sync"
)

// withLazy returns base with attrs, as base.With would, but the attributes
// reach base's handler (which formats them, for a text or JSON handler)
// only when the logger first handles a record. Every step gets a logger
// with its run, step and attempt, and most steps log nothing.
func withLazy(base *slog.Logger, attrs ...slog.Attr) *slog.Logger {
	return slog.New(&lazyAttrs{base: base.Handler(), attrs: attrs})
}

// lazyAttrs is the handler of withLazy.
type lazyAttrs struct {
	base  slog.Handler
	attrs []slog.Attr
	once  sync.Once
	h     slog.Handler
}

func (l *lazyAttrs) handler() slog.Handler {
	l.once.Do(func() { l.h = l.base.WithAttrs(l.attrs) })
	return l.h
}

// Enabled implements slog.Handler.
func (l *lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return l.base.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (l *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return l.handler().Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (l *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return l.handler().WithAttrs(attrs)
}

// WithGroup implements slog.Handler.
func (l *lazyAttrs) WithGroup(name string) slog.Handler {
	return l.handler().WithGroup(name)
}

package engine

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The trigger span's W3C trace context travels with the run, in its
// metadata under the reserved keys: written at the trigger, kept out of
// what handlers see, and read back by every attempt's claim.

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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dagflow/dagflow/engine"
)

// Tracing in serve, worker and dev: the engine's spans (engine.Config.
// TracerProvider) are exported over OTLP/HTTP when an endpoint is
// configured, by --otlp-endpoint or by the standard OpenTelemetry
// environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, their _HEADERS, _TIMEOUT and TLS
// companions, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES). With none, the node
// traces nothing and pays nothing for it.

// Environment variables that decide whether the node traces.
const (
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envTracesExporter     = "OTEL_TRACES_EXPORTER"
	envSDKDisabled        = "OTEL_SDK_DISABLED"
)

// otlpTracesPath is the OTLP/HTTP path of traces, added to an endpoint
// given without a path (as OTEL_EXPORTER_OTLP_ENDPOINT is).
const otlpTracesPath = "/v1/traces"

// tracingFlushTimeout bounds the export of the last spans at exit.
const tracingFlushTimeout = 5 * time.Second

// tracing is a node's span export; a nil *tracing traces nothing.
type tracing struct {
	tp       *sdktrace.TracerProvider
	endpoint string // where spans go, for the banner
}

// openTracing makes the node's TracerProvider when an OTLP endpoint is
// configured: flag (--otlp-endpoint) first, then the environment. It
// returns nil when none is, or when OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none say not to trace.
func openTracing(ctx context.Context, flag string) (*tracing, error) {
	if flag == "" {
		if strings.EqualFold(os.Getenv(envSDKDisabled), "true") || strings.EqualFold(os.Getenv(envTracesExporter), "none") {
			return nil, nil
		}
		if os.Getenv(envOTLPEndpoint) == "" && os.Getenv(envOTLPTracesEndpoint) == "" {
			return nil, nil
		}
	}
	var opts []otlptracehttp.Option
	endpoint := os.Getenv(envOTLPTracesEndpoint)
	if endpoint == "" && os.Getenv(envOTLPEndpoint) != "" {
		endpoint = strings.TrimSuffix(os.Getenv(envOTLPEndpoint), "/") + otlpTracesPath
	}
	if flag != "" {
		u, err := url.Parse(flag)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("--otlp-endpoint %q: want an http:// or https:// URL, such as http://localhost:4318", flag)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = otlpTracesPath
		}
		endpoint = u.String()
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter to %s: %w", endpoint, err)
	}
	// The service name is "dagflow" unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise (detectors later in the
	// list win).
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "dagflow")),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The sampler is the SDK's default, which reads OTEL_TRACES_SAMPLER
	// and OTEL_TRACES_SAMPLER_ARG (parent-based, always on, when unset).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &tracing{tp: tp, endpoint: endpoint}, nil
}

// provider is the engine's TracerProvider: nil without tracing.
func (t *tracing) provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

// describe says where spans go, for the banner; "" without tracing.
func (t *tracing) describe() string {
	if t == nil {
		return ""
	}
	return "traces exported over OTLP/HTTP to " + t.endpoint
}

// shutdown exports the spans not sent yet (within tracingFlushTimeout)
// and stops the exporter. A failure is logged: the node's work is done.
func (t *tracing) shutdown(logger *slog.Logger) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		logger.Warn("tracing: the last spans could not be exported", "endpoint", t.endpoint, "err", err)
	}
}

// otlpEndpointHelp is the --otlp-endpoint flag's help.
const otlpEndpointHelp = "export traces over OTLP/HTTP to this collector URL (http://host:4318; /v1/traces is added to a URL without a path); " +
	"default: the OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT environment variables; none: no tracing"

// nodeLogger is the text logger of a node at level; with tracing, a
// record logged with a span's context carries its trace_id and span_id.
func nodeLogger(w io.Writer, level slog.Level, tr *tracing) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
	if tr != nil {
		h = engine.TraceLogHandler(h)
	}
	return slog.New(h)
}

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

	"go.opentelemetry.io/otel"
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
	envOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// otlpProtocol is the one OTLP protocol the node speaks.
const otlpProtocol = "http/protobuf"

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
	for _, k := range []string{envOTLPTracesProtocol, envOTLPProtocol} {
		if p := os.Getenv(k); p != "" && p != otlpProtocol {
			return nil, fmt.Errorf("tracing: %s=%q: dagflow exports traces over OTLP/HTTP only (%s)", k, p, otlpProtocol)
		}
	}
	var opts []otlptracehttp.Option
	var endpoint *url.URL
	switch {
	case flag != "":
		u, err := checkEndpoint(flag)
		if err != nil {
			return nil, usagef("--otlp-endpoint: %v", err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = otlpTracesPath
		}
		endpoint = u
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	case os.Getenv(envOTLPTracesEndpoint) != "":
		u, err := checkEndpoint(os.Getenv(envOTLPTracesEndpoint))
		if err != nil {
			return nil, fmt.Errorf("tracing: %s: %w", envOTLPTracesEndpoint, err)
		}
		endpoint = u
	default:
		u, err := checkEndpoint(os.Getenv(envOTLPEndpoint))
		if err != nil {
			return nil, fmt.Errorf("tracing: %s: %w", envOTLPEndpoint, err)
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + otlpTracesPath
		endpoint = u
	}
	// What the banner and the logs show: no query, which may hold a token.
	shown := *endpoint
	shown.RawQuery, shown.ForceQuery = "", false
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter to %s: %w", shown.String(), err)
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
	return &tracing{tp: tp, endpoint: shown.String()}, nil
}

// checkEndpoint reads a collector URL: http or https with a host, and no
// user or password, which the exporter would not send (credentials go in
// OTEL_EXPORTER_OTLP_HEADERS) and which must not reach a banner or a log.
// Its errors never repeat the URL, which may hold a secret.
func checkEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("want an http:// or https:// URL with a host, such as http://localhost:4318")
	}
	if u.User != nil {
		return nil, errors.New("a user or password in the URL is not sent to the collector: put the credentials in OTEL_EXPORTER_OTLP_HEADERS (Authorization=...)")
	}
	return u, nil
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
	if tr == nil {
		return slog.New(h)
	}
	logger := slog.New(engine.TraceLogHandler(h))
	// The SDK reports failed exports to a process-wide handler, by default
	// the standard log package: send them to the node's log instead.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: exporting spans failed", "err", err)
	}))
	return logger
}

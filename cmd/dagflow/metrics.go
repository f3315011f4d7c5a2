package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Prometheus metrics of serve, worker and dev: /metrics on the API
// server, under the API's authentication (a read key, or none on a
// loopback server without keys), or, with --metrics-listen, on a server
// of its own that serves /metrics alone, without authentication: bind
// it to an address only the monitoring network reaches.

// metricsRegistry returns a registry with the Go runtime's and the
// process's collectors, to which the engine adds its own.
func metricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metricsHandler serves reg in the Prometheus text format, logging the
// errors of a scrape.
func metricsHandler(reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg, // promhttp_metric_handler_errors_total
	})
}

// metricsServer serves /metrics alone on its own address
// (--metrics-listen).
type metricsServer struct {
	srv *http.Server
	l   net.Listener
	url string
}

// listenMetrics listens on addr for /metrics of reg.
func listenMetrics(addr string, reg *prometheus.Registry, logger *slog.Logger) (*metricsServer, error) {
	if _, err := net.ResolveTCPAddr("tcp", addr); err != nil {
		return nil, usagef("--metrics-listen %q: %v (want host:port, such as 0.0.0.0:9090)", addr, err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricsHandler(reg, logger))
	return &metricsServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		l:   l,
		url: "http://" + l.Addr().String() + "/metrics",
	}, nil
}

// serve serves until close; an error that ends it early is logged: the
// node goes on without its metrics rather than stop its steps.
func (m *metricsServer) serve(logger *slog.Logger) {
	go func() {
		if err := m.srv.Serve(m.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serving /metrics failed", "url", m.url, "err", err)
		}
	}()
}

// close stops the server at once: a scrape cut short is retried by
// Prometheus.
func (m *metricsServer) close() {
	if m == nil {
		return
	}
	m.srv.Close()
}

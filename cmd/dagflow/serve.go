package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// defaultListen is where serve and dev listen unless --listen says
// otherwise: loopback, where no API key is needed until one is created.
const defaultListen = "127.0.0.1:8080"

// The HTTP server's limits. The API has no streaming route: every answer
// is one JSON document written at once, so a write timeout is safe.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

type serveFlags struct {
	w         workerFlags
	listen    string
	noWorkers bool
	maxBody   int64
	// secureCookie is --dashboard-secure-cookie.
	secureCookie bool
}

// newServeCmd is `dagflow serve`: an engine node, as `dagflow worker`
// runs it, with the HTTP API (package api) on --listen.
func newServeCmd(sec *secrets) *cobra.Command {
	var s serveFlags
	cmd := withBackends(&cobra.Command{
		Use:   "serve",
		Short: "run an engine node with the HTTP API until SIGINT/SIGTERM",
		Long: "Run an engine node on Redis + MySQL with the HTTP API (/v1, /healthz, /readyz,\n" +
			"/openapi.yaml, /metrics) on --listen, until SIGINT/SIGTERM.\n\n" +
			"/metrics (Prometheus) follows the API's authentication rules (a key of the read scope);\n" +
			"with --metrics-listen it is served there instead, alone and without authentication.\n\n" +
			"Every /v1 route needs an API key (dagflow apikeys create). With no key in the store,\n" +
			"serve listens only on a loopback address, and serves local requests there without\n" +
			"keys until a key is created (within a second, no restart). A proxy or tunnel in front\n" +
			"of such a server lets whoever reaches it in without a key: create a key first.\n\n" +
			"The node registers the workflows of --workflows DIR (YAML files, whose kind: http\n" +
			"steps call other services without Go code; --demo adds the example order workflow of\n" +
			"`dagflow dev`) and runs their steps, as `dagflow worker` does; given none, or with\n" +
			"--no-workers, it registers nothing and runs no step: it knows the\n" +
			"workflows from the definitions other nodes stored, and triggers and inspects them.\n" +
			"The first signal stops it gracefully within --shutdown-timeout (one deadline: the\n" +
			"server's requests first, then the node's steps); a second signal exits at once.\n\n" + redisURLHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), &s, cmd.Flags().Changed("queues"), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}, &s.w.b, sec)
	s.w.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&s.listen, "listen", defaultListen, "address of the HTTP API, host:port (port 0: any free port)")
	fs.BoolVar(&s.noWorkers, "no-workers", false, "register no workflow and run no step: serve the API from the stored definitions")
	fs.Int64Var(&s.maxBody, "max-body-bytes", api.DefaultMaxBodyBytes, "largest request body the API accepts")
	fs.BoolVar(&s.secureCookie, "dashboard-secure-cookie", false, "mark the dashboard's session cookie Secure on every answer, for a TLS proxy that sends no X-Forwarded-Proto (default: Secure over TLS or with X-Forwarded-Proto: https)")
	return cmd
}

func runServe(ctx context.Context, s *serveFlags, queuesGiven bool, stdout, stderr io.Writer) error {
	if s.noWorkers && queuesGiven {
		return usagef("--queues with --no-workers: a node without workers works no queue")
	}
	if s.noWorkers && s.w.workflowsDir != "" {
		return usagef("--workflows with --no-workers: a node without workers registers no workflow")
	}
	if s.noWorkers && s.w.demo {
		return usagef("--demo with --no-workers: a node without workers registers no workflow")
	}
	if s.maxBody < 1 {
		return usagef("--max-body-bytes %d: must be at least 1", s.maxBody)
	}
	tr, err := openTracing(ctx, s.w.otlpEndpoint)
	if err != nil {
		return err
	}
	logger := nodeLogger(stderr, slog.LevelInfo, tr)
	defer tr.shutdown(logger)
	reg := metricsRegistry()
	o := api.Options{Logger: logger, MaxBodyBytes: s.maxBody, DashboardSecureCookie: s.secureCookie}
	var ms *metricsServer
	if s.w.metricsListen != "" {
		if ms, err = listenMetrics(s.w.metricsListen, reg, logger); err != nil {
			return err
		}
		defer ms.close()
	} else {
		o.Metrics = metricsHandler(reg, logger)
	}
	n, err := openNode(ctx, &s.w, queuesGiven, s.noWorkers, logger, reg, tr)
	if err != nil {
		return err
	}
	defer n.close()
	srv, err := listenAPI(ctx, n.e, s.listen, o, logger)
	if err != nil {
		return err
	}
	if err := n.e.Start(ctx); err != nil {
		srv.l.Close()
		return keyringHint(err)
	}
	served := srv.serve()
	fmt.Fprintf(stdout, "dagflow serve: API on %s%s\n", srv.url, srv.authNote())
	fmt.Fprintf(stdout, "dagflow serve: dashboard on %s/%s\n", srv.url, srv.dashboardNote())
	if ms != nil {
		ms.serve(logger)
		fmt.Fprintf(stdout, "dagflow serve: metrics on %s (no authentication)\n", ms.url)
	} else {
		fmt.Fprintf(stdout, "dagflow serve: metrics on %s/metrics (the API's authentication: a read key)\n", srv.url)
	}
	if tr != nil {
		fmt.Fprintf(stdout, "dagflow serve: %s\n", tr.describe())
	}
	if s.noWorkers {
		fmt.Fprintf(stdout, "dagflow serve: node %s runs no step (--no-workers); SIGTERM stops it\n", n.e.NodeID())
	} else {
		fmt.Fprintf(stdout, "dagflow serve: node %s running (queues %s); SIGTERM stops it\n", n.e.NodeID(), strings.Join(n.queues, ","))
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	return errors.Join(serveErr, shutdownWithin(srv, n.e.Stop, s.w.shutdown, stopGrace))
}

// shutdownWithin stops the API server, letting the requests being served
// finish, and then the engine, both by one deadline, timeout from now:
// the time the server's requests take is not given to the engine again.
func shutdownWithin(srv *apiServer, stop func(context.Context) error, timeout, grace time.Duration) error {
	deadline := time.Now().Add(timeout)
	return errors.Join(srv.shutdown(deadline, timeout), stopBy(stop, deadline, timeout, grace))
}

// apiServer is the HTTP API of an engine node, as serve and dev run it.
type apiServer struct {
	srv       *http.Server
	l         net.Listener
	url       string // http://host:port, the port resolved
	anonymous bool   // no key in the store: requests without one are let in
}

// listenAPI listens on addr for the API of e. When the store holds an API
// key that is not revoked, every /v1 request needs one; when it holds
// none, listenAPI refuses an address that is not loopback and otherwise
// lets local requests in without a key (api.Options.AllowAnonymous),
// saying so in the log, until a key is created: the handler sees it
// within a second and requires keys from then on.
func listenAPI(ctx context.Context, e *engine.Engine, addr string, o api.Options, logger *slog.Logger) (*apiServer, error) {
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, usagef("--listen %q: %v (want host:port, such as %s)", addr, err, defaultListen)
	}
	loopback := tcp.IP != nil && tcp.IP.IsLoopback()
	keys, err := activeKeys(ctx, e.Store())
	if err != nil {
		return nil, err
	}
	if keys == 0 {
		if !loopback {
			return nil, fmt.Errorf("--listen %s is not a loopback address and the store holds no API key: "+
				"create one first (dagflow apikeys create --scope operate --name NAME), or listen on 127.0.0.1", addr)
		}
		o.AllowAnonymous = true
	}
	l, err := net.ListenTCP("tcp", tcp)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	if o.AllowAnonymous {
		logger.Warn("the store holds no API key: serving the API without authentication, on loopback only, "+
			"until a key is created with `dagflow apikeys create` (requests need keys within a second of it, no restart); "+
			"a proxy or tunnel in front of this server lets whoever reaches it in without a key: create a key first", "listen", l.Addr().String())
	}
	h := api.NewHandler(e, o)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// A graceful shutdown waits for open requests: the dashboard's event
	// streams would hold it to its deadline.
	srv.RegisterOnShutdown(h.CloseStreams)
	return &apiServer{
		srv:       srv,
		l:         l,
		url:       "http://" + l.Addr().String(),
		anonymous: o.AllowAnonymous,
	}, nil
}

// activeKeys counts the API keys of st that are not revoked.
func activeKeys(ctx context.Context, st persistence.Store) (int, error) {
	keys, err := api.ListKeys(ctx, st)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		if k.RevokedAt == nil {
			n++
		}
	}
	return n, nil
}

// authNote says, after the URL, whether requests need a key.
func (s *apiServer) authNote() string {
	if s.anonymous {
		return " (no API key needed until one is created: loopback, and the store holds none)"
	}
	return " (requests need an API key: Authorization: Bearer <key>)"
}

// dashboardNote says, after the dashboard's URL, whether it needs a
// login.
func (s *apiServer) dashboardNote() string {
	if s.anonymous {
		return " (no login needed until an API key is created)"
	}
	return " (log in with an API key)"
}

// serve serves the API until shutdown; the channel gets the error that
// ended it early, if any.
func (s *apiServer) serve() <-chan error {
	done := make(chan error, 1)
	go func() {
		err := s.srv.Serve(s.l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else if err != nil {
			err = fmt.Errorf("serving the API on %s: %w", s.url, err)
		}
		done <- err
	}()
	return done
}

// shutdown stops accepting requests and waits, until deadline, for those
// being served; timeout is the flag's value, for the error.
func (s *apiServer) shutdown(deadline time.Time, timeout time.Duration) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
		return fmt.Errorf("the API's requests did not finish within %v: %w", timeout, err)
	}
	return nil
}

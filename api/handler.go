package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/api/dashboard"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/clip"
)

// DefaultMaxBodyBytes is the default limit of a request body: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// Options configure the handler. Zero values mean the documented defaults.
type Options struct {
	// Logger receives one line per request (method, path, status,
	// duration, the key's name; never the key or the Authorization
	// header) and the causes of 5xx answers. Default: discard.
	Logger *slog.Logger
	// MaxBodyBytes limits a request body; a larger one is answered 413.
	// Default DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// AllowAnonymous serves requests without an Authorization header with
	// the admin scope, for as long as Keys holds no API key that is not
	// revoked: the handler asks the store at most once a second (by
	// Now), and from the first key it sees on, every /v1 request needs a
	// key until the handler is made again. Set it only when no one but
	// the local user can reach the handler: `dagflow serve` and `dagflow
	// dev` set it only when they listen on a loopback address with no API
	// key configured. Even then it lets in only requests whose Host is a
	// loopback IP or "localhost" (so that a web page cannot reach it by
	// DNS rebinding), and refuses a request other than GET or HEAD whose
	// Origin is another host's or whose Sec-Fetch-Site is "cross-site"
	// (so that a web page cannot post to it), and a /v1 write with
	// neither Content-Type application/json nor an X-Dagflow-Request
	// header (so that a page of another localhost port cannot send one
	// without a CORS preflight). A request with an Authorization header
	// is always checked.
	AllowAnonymous bool
	// BasePath is the path prefix the handler is mounted under when a
	// server strips it before the handler sees the request
	// (http.StripPrefix("/dagflow", h)): it starts the Location headers
	// of created runs. Default "" (mounted at the root). A trailing "/"
	// is dropped and a missing leading one added.
	BasePath string
	// Keys is where API keys are kept. Default: the engine's store.
	Keys KeyStore
	// Now is the clock of the key cache and of queue ages. Default
	// time.Now.
	Now func() time.Time
	// Metrics, when set, is served at GET /metrics (a Prometheus
	// handler, promhttp's) under the API's authentication: a key of the
	// read scope, or none where AllowAnonymous lets requests in. It is
	// not part of the JSON API (nor of openapi.yaml). Default: no
	// /metrics route.
	Metrics http.Handler
	// NoDashboard turns the web dashboard off: by default the handler
	// serves it at "/" (package api/dashboard), under the same API keys
	// (a login form exchanges a key for a session cookie) and the same
	// keyless loopback mode as /v1.
	NoDashboard bool
	// DashboardSecureCookie marks the dashboard's session cookie Secure
	// on every answer. By default it is Secure only when the request
	// came over TLS or a proxy says it forwarded it from HTTPS
	// (X-Forwarded-Proto: https, or Forwarded: proto=https); set this
	// behind a proxy that terminates TLS and sends neither, so browsers
	// never send the cookie in clear.
	DashboardSecureCookie bool
	// Redact, when set, returns what the dashboard may show of a run's
	// input or output, or a step's output (p says which), on every page
	// and live update. Default: the value as it is. The JSON API is not
	// redacted: a key that may read /v1 reads the payloads as stored.
	Redact func(p Payload, data json.RawMessage) json.RawMessage
}

// Payload says which run input or output Options.Redact is given.
type Payload = dashboard.Payload

func (o Options) withDefaults(e *engine.Engine) Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Keys == nil {
		o.Keys = e.APIKeys()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.BasePath = strings.TrimRight(o.BasePath, "/")
	if o.BasePath != "" && !strings.HasPrefix(o.BasePath, "/") {
		o.BasePath = "/" + o.BasePath
	}
	return o
}

// server holds what the route handlers share.
type server struct {
	e    *engine.Engine
	o    Options
	log  *slog.Logger
	auth *authenticator
}

// NewHandler returns the HTTP API of e: /v1 (JSON), /healthz, /readyz and
// /openapi.yaml, and the web dashboard at / (unless Options.NoDashboard;
// see package api/dashboard). Mount it in your own server, and let its
// shutdown end the dashboard's event streams (Handler.CloseStreams):
//
//	h := api.NewHandler(e, api.Options{Logger: log})
//	srv := &http.Server{Addr: ":8080", Handler: h, ReadHeaderTimeout: 5 * time.Second}
//	srv.RegisterOnShutdown(h.CloseStreams)
//
// Every /v1 route needs a bearer API key (see CreateKey) of the scope that
// Routes lists, unless Options.AllowAnonymous lets requests without one
// in. Errors are RFC 9457 problem details (application/problem+json).
func NewHandler(e *engine.Engine, o Options) *Handler {
	o = o.withDefaults(e)
	s := &server{
		e:    e,
		o:    o,
		log:  o.Logger,
		auth: &authenticator{store: o.Keys, now: o.Now, ttl: keyCacheTTL, cache: map[[32]byte]cachedKey{}, anonymous: o.AllowAnonymous},
	}
	mux := http.NewServeMux()
	methods := map[string][]string{}
	for _, rt := range s.routes() {
		mux.Handle(rt.Method+" "+rt.Path, s.wrap(rt))
		methods[rt.Path] = append(methods[rt.Path], rt.Method)
	}
	if o.Metrics != nil {
		rt := Route{Method: "GET", Path: "/metrics", Scope: ScopeRead, handle: func(w http.ResponseWriter, r *http.Request) error {
			o.Metrics.ServeHTTP(w, r)
			return nil
		}}
		mux.Handle(rt.Method+" "+rt.Path, s.wrap(rt))
		methods[rt.Path] = append(methods[rt.Path], rt.Method)
	}
	// Answer the paths' other methods, and unknown paths, with problems
	// rather than the mux's plain text.
	for path, ms := range methods {
		allow := allowHeader(ms)
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeProblem(w, problemf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s %s is not allowed; allowed: %s", clip.String(r.Method), echoPath(r), allow))
		})
	}
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, problemf(http.StatusNotFound, CodeNotFound, "%s %s %s", noRoute, clip.String(r.Method), echoPath(r)))
	}
	mux.HandleFunc("/", notFound)
	h := &Handler{}
	if !o.NoDashboard {
		dash, err := dashboard.New(s.dashboardConfig())
		if err != nil {
			// The templates are embedded and parsed by the tests: this
			// is a build defect, not a runtime condition.
			panic(err)
		}
		for _, p := range dashboard.Paths() {
			mux.Handle(p, dash)
		}
		h.dash = dash
	}
	h.h = s.logRequests(mux)
	return h
}

// Handler is the handler NewHandler returns.
type Handler struct {
	h    http.Handler
	dash *dashboard.Dashboard
}

// ServeHTTP serves a request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// CloseStreams ends the dashboard's open event streams (and refuses new
// ones), which a graceful shutdown would otherwise wait for:
//
//	srv.RegisterOnShutdown(h.CloseStreams)
func (h *Handler) CloseStreams() {
	if h.dash != nil {
		h.dash.CloseStreams()
	}
}

// noRoute starts the detail of the 404 answer to a path the API does not
// serve.
const noRoute = "no route for"

func allowHeader(ms []string) string {
	set := map[string]bool{}
	for _, m := range ms {
		set[m] = true
		if m == http.MethodGet {
			set[http.MethodHead] = true
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// Route is one route of the API.
type Route struct {
	// Method is the HTTP method.
	Method string
	// Path is the path in net/http.ServeMux pattern syntax
	// ("/v1/runs/{id}").
	Path string
	// Scope is the least scope a key needs; empty for the routes that need
	// no key (/healthz, /readyz, /openapi.yaml).
	Scope Scope
	// handle serves the route; the error it returns becomes a problem.
	handle func(w http.ResponseWriter, r *http.Request) error
}

// Routes lists every route the handler serves, with the scope each needs.
func Routes() []Route {
	s := &server{}
	rts := s.routes()
	for i := range rts {
		rts[i].handle = nil
	}
	return rts
}

// routes is the route table, the one list of what the API serves (the
// contract test checks it against api/openapi.yaml).
func (s *server) routes() []Route {
	return []Route{
		{Method: "GET", Path: "/healthz", handle: s.healthz},
		{Method: "GET", Path: "/readyz", handle: s.readyz},
		{Method: "GET", Path: "/openapi.yaml", handle: s.openAPI},

		{Method: "GET", Path: "/v1/workflows", Scope: ScopeRead, handle: s.listWorkflows},
		{Method: "GET", Path: "/v1/workflows/{name}", Scope: ScopeRead, handle: s.getWorkflow},
		{Method: "POST", Path: "/v1/workflows/{name}/runs", Scope: ScopeOperate, handle: s.triggerRun},

		{Method: "GET", Path: "/v1/runs", Scope: ScopeRead, handle: s.listRuns},
		{Method: "GET", Path: "/v1/runs/{id}", Scope: ScopeRead, handle: s.getRun},
		{Method: "GET", Path: "/v1/runs/{id}/input", Scope: ScopeRead, handle: s.getRunInput},
		{Method: "GET", Path: "/v1/runs/{id}/output", Scope: ScopeRead, handle: s.getRunOutput},
		{Method: "GET", Path: "/v1/runs/{id}/steps/{step}/output", Scope: ScopeRead, handle: s.getStepOutput},
		{Method: "POST", Path: "/v1/runs/{id}/cancel", Scope: ScopeOperate, handle: s.cancelRun},
		{Method: "POST", Path: "/v1/runs/{id}/steps/{step}/signal", Scope: ScopeOperate, handle: s.signalStep},
		{Method: "POST", Path: "/v1/runs/{id}/retry", Scope: ScopeOperate, handle: s.retryRun},
		{Method: "POST", Path: "/v1/runs/{id}/steps/{step}/skip", Scope: ScopeOperate, handle: s.skipStep},
		{Method: "POST", Path: "/v1/runs/{id}/pause", Scope: ScopeOperate, handle: s.pauseRun},
		{Method: "POST", Path: "/v1/runs/{id}/resume", Scope: ScopeOperate, handle: s.resumeRun},

		{Method: "POST", Path: "/v1/events", Scope: ScopeOperate, handle: s.publishEvent},
		{Method: "GET", Path: "/v1/events", Scope: ScopeRead, handle: s.listEvents},

		{Method: "GET", Path: "/v1/dead-letters", Scope: ScopeRead, handle: s.listDeadLetters},
		{Method: "POST", Path: "/v1/dead-letters/{run}/{step}/retry", Scope: ScopeOperate, handle: s.retryDeadLetter},
		{Method: "DELETE", Path: "/v1/dead-letters/{run}/{step}", Scope: ScopeOperate, handle: s.discardDeadLetter},

		{Method: "GET", Path: "/v1/schedules", Scope: ScopeRead, handle: s.listSchedules},
		{Method: "POST", Path: "/v1/schedules", Scope: ScopeAdmin, handle: s.createSchedule},
		{Method: "PUT", Path: "/v1/schedules/{name}", Scope: ScopeAdmin, handle: s.replaceSchedule},
		{Method: "PATCH", Path: "/v1/schedules/{name}", Scope: ScopeAdmin, handle: s.editSchedule},
		{Method: "DELETE", Path: "/v1/schedules/{name}", Scope: ScopeAdmin, handle: s.deleteSchedule},
		{Method: "POST", Path: "/v1/schedules/{name}/pause", Scope: ScopeAdmin, handle: s.pauseSchedule},
		{Method: "POST", Path: "/v1/schedules/{name}/resume", Scope: ScopeAdmin, handle: s.resumeSchedule},
		{Method: "POST", Path: "/v1/schedules/{name}/trigger", Scope: ScopeAdmin, handle: s.triggerSchedule},

		{Method: "GET", Path: "/v1/queues", Scope: ScopeRead, handle: s.listQueues},
		{Method: "POST", Path: "/v1/queues/{name}/pause", Scope: ScopeOperate, handle: s.pauseQueue},
		{Method: "POST", Path: "/v1/queues/{name}/resume", Scope: ScopeOperate, handle: s.resumeQueue},

		{Method: "GET", Path: "/v1/api-keys", Scope: ScopeAdmin, handle: s.listKeys},
		{Method: "POST", Path: "/v1/api-keys", Scope: ScopeAdmin, handle: s.createKey},
		{Method: "DELETE", Path: "/v1/api-keys/{key}", Scope: ScopeAdmin, handle: s.revokeKey},
	}
}

// wrap adds authentication, the body limit and error answers to a route.
func (s *server) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.Scope != "" {
			p, ae := s.authorize(r, rt.Scope)
			if ae != nil {
				if ae.status == http.StatusUnauthorized {
					// RFC 6750 §3.1: a token was sent and refused.
					if r.Header.Get("Authorization") != "" {
						w.Header().Set("WWW-Authenticate", `Bearer realm="dagflow", error="invalid_token"`)
					} else {
						w.Header().Set("WWW-Authenticate", `Bearer realm="dagflow"`)
					}
				}
				if ae.status == http.StatusForbidden {
					w.Header().Set("WWW-Authenticate", `Bearer realm="dagflow", error="insufficient_scope", scope="`+string(rt.Scope)+`"`)
				}
				s.fail(w, r, ae)
				return
			}
			if rec, ok := w.(*statusRecorder); ok {
				rec.key = p.name
			}
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
		}
		if err := rt.handle(w, r); err != nil {
			s.fail(w, r, problemOf(err))
		}
	})
}

// statusClientClosed is what the request log shows for a request whose
// client went away before its answer (nginx's 499); nothing is answered.
const statusClientClosed = 499

// principalKey keys the request's principal in its context.
type principalKey struct{}

// actor is who an operator action of r is recorded as done by: the API
// key's name ("anonymous" for a local request without one).
func actor(r *http.Request) engine.ActionOption {
	p, _ := r.Context().Value(principalKey{}).(principal)
	if p.name == "" {
		return engine.Actor("anonymous")
	}
	return engine.Actor(p.name)
}

// authorize returns the request's principal if it may use a route that
// needs scope.
func (s *server) authorize(r *http.Request, need Scope) (principal, *apiError) {
	h := r.Header.Get("Authorization")
	if h == "" {
		anon, ae := s.auth.anonymousOpen(r.Context())
		if ae != nil {
			return principal{}, ae
		}
		if anon {
			if ae := checkAnonymousAPI(r); ae != nil {
				return principal{}, ae
			}
			return principal{name: "anonymous", scope: ScopeAdmin}, nil
		}
		return principal{}, problemf(http.StatusUnauthorized, CodeUnauthorized, "this route needs an API key: send \"Authorization: Bearer <api key>\"")
	}
	p, ae := s.auth.authenticate(r.Context(), h)
	if ae != nil {
		return principal{}, ae
	}
	if !p.scope.Allows(need) {
		return principal{}, problemf(http.StatusForbidden, CodeForbidden, "API key %q has scope %s; %s %s needs %s", p.name, p.scope, r.Method, echoPath(r), need)
	}
	return p, nil
}

// fail answers with a problem, logging the cause of a 5xx answer. When
// the client went away (the request's context was cancelled) it answers
// nothing and logs at debug level: no one reads the answer, and it is not
// the server's failure.
func (s *server) fail(w http.ResponseWriter, r *http.Request, ae *apiError) {
	if ae.err != nil && errors.Is(ae.err, context.Canceled) && r.Context().Err() != nil {
		s.log.DebugContext(r.Context(), "api: the client went away", "method", r.Method, "path", redactPath(r.URL.Path), "err", ae.err)
		if rec, ok := w.(*statusRecorder); ok {
			rec.status = statusClientClosed
		}
		return
	}
	if ae.status >= 500 && ae.err != nil {
		s.log.ErrorContext(r.Context(), "api: request failed", "method", r.Method, "path", redactPath(r.URL.Path), "status", ae.status, "err", ae.err)
	}
	writeProblem(w, ae)
}

// statusRecorder notes the status and the key's name for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	key    string
	// reads says whether the answer was read from the engine's read
	// replica (engine.Config.ReadStore); nil for requests that write.
	reads *engine.ReadSource
}

// ReplicaLagHeader is the header of an answer read from the engine's read
// replica (engine.Config.ReadStore): how far behind the primary it was,
// in seconds ("0.000" when it had caught up with the node's last
// heartbeat). An answer from the primary has no such header.
const ReplicaLagHeader = "X-Dagflow-Replica-Lag"

// started runs once, before the status line is written.
func (r *statusRecorder) started(code int) {
	r.status = code
	if r.reads == nil {
		return
	}
	if lag, ok := r.reads.Replica(); ok {
		r.Header().Set(ReplicaLagHeader, strconv.FormatFloat(lag.Seconds(), 'f', 3, 64))
	}
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.started(code)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.started(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// quietPaths are logged at Debug: Prometheus's scrapes and the
// orchestrator's health and readiness probes.
var quietPaths = map[string]bool{"/metrics": true, "/healthz": true, "/readyz": true}

// logRequests logs every request, sets the headers every answer carries,
// and turns a panic into a 500 problem. It never logs headers (the
// Authorization header holds the key) nor a path segment that is a key's
// secret (redactPath).
func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
			h.Set("Cache-Control", "no-store")
		}
		rec := &statusRecorder{ResponseWriter: w}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			var ctx context.Context
			ctx, rec.reads = engine.WithReadSource(r.Context())
			r = r.WithContext(ctx)
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "api: handler panicked", "method", r.Method, "path", redactPath(r.URL.Path), "panic", fmt.Sprint(v))
				if rec.status == 0 {
					writeProblem(rec, problemf(http.StatusInternalServerError, CodeInternal, "internal error; the server log has the cause"))
				}
			}
			attrs := []any{"method", r.Method, "path", redactPath(r.URL.Path), "status", rec.status,
				"duration_ms", float64(time.Since(start).Microseconds()) / 1000}
			if rec.key != "" {
				attrs = append(attrs, "key", rec.key)
			}
			// Scrapes and probes come every few seconds: at Info they
			// would drown the requests an operator looks for.
			level := slog.LevelInfo
			if quietPaths[r.URL.Path] {
				level = slog.LevelDebug
			}
			s.log.Log(r.Context(), level, "api: request", attrs...)
		}()
		next.ServeHTTP(rec, r)
	})
}

// writeJSON answers with v as JSON. A failed write (the client went
// away) leaves nothing to answer, so it is not an error.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("api: encode answer: %w", err)
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
	return nil
}

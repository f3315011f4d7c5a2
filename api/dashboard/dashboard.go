package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Scope is what a session may do: the scope of the API key it signed in
// with (client.Scope), read < operate < admin.
type Scope = client.Scope

// The scopes of a session.
const (
	ScopeRead    = client.ScopeRead
	ScopeOperate = client.ScopeOperate
	ScopeAdmin   = client.ScopeAdmin
)

// Principal is who a key belongs to.
type Principal struct {
	// KeyID and Name identify the key; Name is shown on every page.
	KeyID string
	Name  string
	Scope Scope
}

// ErrUnknownKey is what Config.Authenticate returns (wrapped or not) for
// a key that is unknown, malformed or revoked: the login is refused, and
// a session made with it ends.
var ErrUnknownKey = errors.New("dashboard: unknown or revoked API key")

// Payload says what a redacted JSON value is.
type Payload struct {
	// Workflow and RunID are the run the value belongs to.
	Workflow string
	RunID    string
	// Step is the step whose output it is; empty for the run's input and
	// output.
	Step string
	// Kind is "input" or "output".
	Kind string
}

// Config configures a Dashboard. Engine and Authenticate are required.
type Config struct {
	// Engine is what the pages show and act on: an *engine.Engine, or
	// anything with its operator calls (Engine).
	Engine Engine
	// Authenticate checks an API key's secret: the key's principal, an
	// error wrapping ErrUnknownKey for a key that is not valid, or another
	// error when the keys cannot be read. It is called on every request
	// of a session, so it should cache (the API's authenticator trusts a
	// key for a second).
	Authenticate func(ctx context.Context, secret string) (Principal, error)
	// AnonymousOpen reports whether r may come in without a key, with the
	// admin scope (the API's keyless loopback mode), or why not (an error
	// refuses the request with 403: a non-local Host, say). Nil: never.
	AnonymousOpen func(r *http.Request) (bool, error)
	// Redact returns what a page may show of a run's input or a step's
	// output. Default: the value as it is.
	Redact func(p Payload, data json.RawMessage) json.RawMessage
	// Queues lists the queues with their depths. Default: no queue data.
	Queues func(ctx context.Context) ([]client.Queue, error)
	// Logger receives the causes of 5xx answers. Default: discard.
	Logger *slog.Logger
	// BasePath is the path prefix the handler is served under, when a
	// server strips it (links and the cookie's path start with it).
	BasePath string
	// Now is the clock of ages and charts. Default time.Now.
	Now func() time.Time
	// PollInterval is how often the change detector asks the store what
	// changed while a page is open. Default 1 s.
	PollInterval time.Duration
	// Heartbeat is how often an idle event stream gets a comment.
	// Default 15 s.
	Heartbeat time.Duration
	// SessionTTL is how long an idle session lasts. Default 12 h.
	SessionTTL time.Duration
	// SecureCookie marks the session cookie Secure on every answer, not
	// only on requests that came over TLS or that a proxy forwarded from
	// HTTPS (X-Forwarded-Proto: https, Forwarded: proto=https): set it
	// behind a proxy that terminates TLS and sends neither header.
	SecureCookie bool
}

func (c Config) withDefaults() Config {
	if c.Redact == nil {
		c.Redact = func(_ Payload, b json.RawMessage) json.RawMessage { return b }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 12 * time.Hour
	}
	c.BasePath = strings.TrimRight(c.BasePath, "/")
	if c.BasePath != "" && !strings.HasPrefix(c.BasePath, "/") {
		c.BasePath = "/" + c.BasePath
	}
	return c
}

// Dashboard is the dashboard's http.Handler.
type Dashboard struct {
	cfg      Config
	e        Engine
	mux      *http.ServeMux
	pages    map[string]*template.Template
	sessions *sessions
	live     *detector
	stats    *sampler
	static   http.Handler
}

// New returns the dashboard of cfg.Engine. Its change detector runs only
// while a page holds an event stream.
func New(cfg Config) (*Dashboard, error) {
	if e, ok := cfg.Engine.(*engine.Engine); cfg.Engine == nil || (ok && e == nil) {
		return nil, errors.New("dashboard: Config.Engine is nil")
	}
	if cfg.Authenticate == nil {
		return nil, errors.New("dashboard: Config.Authenticate is nil")
	}
	cfg = cfg.withDefaults()
	d := &Dashboard{cfg: cfg, e: cfg.Engine, sessions: newSessions(cfg.SessionTTL, cfg.Now)}
	if err := d.parseTemplates(); err != nil {
		return nil, err
	}
	d.live = newDetector(cfg.Engine.ChangeFeed(), cfg.PollInterval, cfg.Logger)
	d.stats = newSampler(d)
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	d.static = http.StripPrefix("/static/", http.FileServer(http.FS(sub)))
	d.routes()
	return d, nil
}

// Detector returns the change detector's counters (for tests and
// measurements): how many times it asked the store.
func (d *Dashboard) Detector() DetectorStats { return d.live.Stats() }

// Paths lists the paths the dashboard serves, as net/http.ServeMux
// patterns without a method, for a server that mounts it beside other
// routes: "/" alone (the overview), and its pages' and assets' prefixes.
// Other paths are not the dashboard's.
func Paths() []string {
	return []string{"/{$}", "/static/", "/login", "/logout", "/events", "/runs", "/runs/", "/workflows", "/workflows/",
		"/dead-letters", "/dead-letters/", "/schedules", "/schedules/", "/queues", "/queues/", "/nodes"}
}

// CloseStreams ends every open event stream, and refuses new ones: call
// it when the server shuts down (http.Server.RegisterOnShutdown), whose
// graceful shutdown would otherwise wait for the streams, which never end
// by themselves. The pages' script falls back to polling.
func (d *Dashboard) CloseStreams() { d.live.closeOnce.Do(func() { close(d.live.closed) }) }

// ServeHTTP serves the dashboard.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	d.mux.ServeHTTP(w, r)
}

// route is a page or an action and the scope it needs; "" needs no
// session.
type route struct {
	pattern string
	scope   Scope
	handle  func(w http.ResponseWriter, r *http.Request, s *session) error
}

func (d *Dashboard) routes() {
	d.mux = http.NewServeMux()
	d.mux.Handle("GET /static/", http.HandlerFunc(d.serveStatic))
	d.mux.HandleFunc("GET /login", d.loginPage)
	d.mux.HandleFunc("POST /login", d.login)
	for _, rt := range []route{
		{"POST /logout", ScopeRead, d.logout},
		{"GET /events", ScopeRead, d.events},
		{"GET /{$}", ScopeRead, d.overview},
		{"GET /runs", ScopeRead, d.runsPage},
		{"POST /runs/bulk", ScopeOperate, d.bulkRuns},
		{"GET /runs/{id}", ScopeRead, d.runPage},
		{"GET /runs/{id}/input", ScopeRead, d.runPayload("input")},
		{"GET /runs/{id}/output", ScopeRead, d.runPayload("output")},
		{"GET /runs/{id}/steps/{step}/output", ScopeRead, d.stepPayload},
		{"POST /runs/{id}/cancel", ScopeOperate, d.cancelRun},
		{"POST /runs/{id}/retry", ScopeOperate, d.retryRun},
		{"POST /runs/{id}/steps/{step}/retry", ScopeOperate, d.retryStep},
		{"POST /runs/{id}/steps/{step}/rerun", ScopeOperate, d.rerunStep},
		{"POST /runs/{id}/steps/{step}/skip", ScopeOperate, d.skipStep},
		{"POST /runs/{id}/{action}", ScopeOperate, d.runPaused},
		{"GET /workflows", ScopeRead, d.workflowsPage},
		{"GET /workflows/{name}", ScopeRead, d.workflowPage},
		{"POST /workflows/{name}/trigger", ScopeOperate, d.trigger},
		{"GET /dead-letters", ScopeRead, d.deadLettersPage},
		{"POST /dead-letters/bulk", ScopeOperate, d.bulkDeadLetters},
		{"GET /schedules", ScopeRead, d.schedulesPage},
		{"POST /schedules/{name}/{action}", ScopeAdmin, d.scheduleAction},
		{"GET /schedules/new", ScopeAdmin, d.newSchedulePage},
		{"POST /schedules", ScopeAdmin, d.createSchedule},
		{"GET /schedules/{name}/edit", ScopeAdmin, d.editSchedulePage},
		{"POST /schedules/{name}/edit", ScopeAdmin, d.editSchedule},
		{"GET /queues", ScopeRead, d.queuesPage},
		{"POST /queues/{name}/{action}", ScopeOperate, d.queuePaused},
		{"GET /nodes", ScopeRead, d.nodesPage},
	} {
		d.mux.Handle(rt.pattern, d.wrap(rt))
	}
	d.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d.errorPage(w, r, nil, http.StatusNotFound, fmt.Sprintf("There is no page at %s.", r.URL.Path))
	})
}

func (d *Dashboard) serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	d.static.ServeHTTP(w, r)
}

// wrap checks the session, the scope and (for POST) the CSRF token and
// the origin, then serves the route.
func (d *Dashboard) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := d.sessionOf(w, r)
		if err != nil {
			var he *httpError
			if errors.As(err, &he) && he.status == http.StatusUnauthorized {
				if r.Method == http.MethodGet && r.Header.Get("X-Dashboard-Partial") == "" && !strings.HasSuffix(r.URL.Path, "/events") {
					http.Redirect(w, r, d.path("/login?next="+urlQueryEscape(d.path(r.URL.RequestURI()))), http.StatusSeeOther)
					return
				}
			}
			d.fail(w, r, nil, err)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := readForm(w, r, maxFormBytes); err != nil {
				d.fail(w, r, s, err)
				return
			}
			if err := checkCSRF(r, s); err != nil {
				d.fail(w, r, s, err)
				return
			}
		}
		if !s.scope.Allows(rt.scope) {
			d.fail(w, r, s, &httpError{status: http.StatusForbidden,
				msg: fmt.Sprintf("Your key %q has the %s scope; this needs %s.", s.name, s.scope, rt.scope)})
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if s.flash != "" {
			// The page right after an action shows its effect: read the
			// primary, not a read replica that may not have it yet.
			r = r.WithContext(engine.ReadPrimary(r.Context()))
		}
		if err := rt.handle(w, r, s); err != nil {
			d.fail(w, r, s, err)
		}
	})
}

// maxFormBytes bounds a dashboard form's body (a bulk form of maxBulk
// ids fits many times over).
const maxFormBytes = 1 << 20

// readForm reads a POST's form under a body limit of max bytes, set
// before anything reads the body: a body declared larger is refused
// unread (413), one that turns out larger stops at the limit (413), and
// only an application/x-www-form-urlencoded body is taken (415
// otherwise; the dashboard's forms send nothing else, and multipart
// would let a request spill files to disk).
func readForm(w http.ResponseWriter, r *http.Request, max int64) error {
	if r.ContentLength > max {
		return &httpError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("The form is %d bytes; at most %d are taken.", r.ContentLength, max)}
	}
	r.Body = http.MaxBytesReader(w, r.Body, max)
	if ct := r.Header.Get("Content-Type"); ct != "" || r.ContentLength != 0 {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-www-form-urlencoded" {
			return &httpError{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf("The form's Content-Type %q is not application/x-www-form-urlencoded.", truncate(ct))}
		}
	}
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &httpError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("The form is larger than %d bytes.", max)}
		}
		return &httpError{status: http.StatusBadRequest, msg: "The form cannot be read", err: err}
	}
	return nil
}

// httpError is an error answered with its status and message.
type httpError struct {
	status int
	msg    string
	err    error
}

func (e *httpError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *httpError) Unwrap() error { return e.err }

func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	if r.Context().Err() != nil {
		return
	}
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{status: http.StatusInternalServerError, msg: "The dashboard could not answer", err: err}
	}
	if he.status >= 500 {
		d.cfg.Logger.ErrorContext(r.Context(), "dashboard: request failed", "method", r.Method, "path", r.URL.Path, "status", he.status, "err", err)
	}
	msg := he.msg
	if he.status < 500 && he.err != nil {
		msg = he.Error()
	}
	d.errorPage(w, r, s, he.status, msg)
}

func (d *Dashboard) errorPage(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	d.render(w, r, s, status, "error", "Error", map[string]any{"Status": status, "StatusText": http.StatusText(status), "Message": msg})
}

// path prefixes a dashboard path with the base path.
func (d *Dashboard) path(p string) string { return d.cfg.BasePath + p }

// view is what every page template gets.
type view struct {
	Title    string
	Page     string
	Base     string
	Session  bool
	User     string
	Scope    Scope
	CSRF     string
	Data     any
	Now      time.Time
	LiveRun  string
	Partial  bool
	Flash    string
	Anon     bool
	CanAct   bool
	CanAdmin bool
}

// render writes a page; with the X-Dashboard-Partial header (the script's
// refresh) it writes the page's live part only.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, s *session, status int, page, title string, data any) {
	t, ok := d.pages[page]
	if !ok {
		http.Error(w, "dashboard: no template "+page, http.StatusInternalServerError)
		return
	}
	v := view{Title: title, Page: page, Base: d.cfg.BasePath, Session: s != nil, Data: data, Now: d.cfg.Now(),
		Partial: r.Header.Get("X-Dashboard-Partial") != ""}
	if s != nil && !v.Partial {
		v.Flash = d.sessions.takeFlash(s.id)
	}
	if s != nil {
		v.CSRF, v.User, v.Scope = s.csrf, s.name, s.scope
		v.Anon = s.anonymous
		v.CanAct = s.scope.Allows(ScopeOperate)
		v.CanAdmin = s.scope.Allows(ScopeAdmin)
	}
	if m, ok := data.(map[string]any); ok {
		if id, ok := m["LiveRun"].(string); ok {
			v.LiveRun = id
		}
	}
	name := "layout"
	if v.Partial {
		name = "live"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, v); err != nil {
		d.cfg.Logger.ErrorContext(r.Context(), "dashboard: render", "page", page, "err", err)
		http.Error(w, "dashboard: the page could not be drawn; the server log has the cause", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (d *Dashboard) parseTemplates() error {
	d.pages = map[string]*template.Template{}
	entries, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := strings.TrimSuffix(strings.TrimPrefix(e, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New(name).Funcs(d.funcs()).ParseFS(templateFS, "templates/layout.html", e)
		if err != nil {
			return fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		d.pages[name] = t
	}
	return nil
}

// redirect answers a form's POST with a redirect to a page (post,
// redirect, get), leaving flash for the session's next page.
func (d *Dashboard) redirect(w http.ResponseWriter, r *http.Request, to, flash string) error {
	if flash != "" {
		// Kept in the session for its next page, never in the URL.
		if c, err := r.Cookie(cookieName); err == nil {
			d.sessions.setFlash(c.Value, flash)
		}
	}
	http.Redirect(w, r, d.path(to), http.StatusSeeOther)
	return nil
}

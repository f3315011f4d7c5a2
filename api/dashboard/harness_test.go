package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/dashboard"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
	"github.com/dagflow/dagflow/steps"
)

// countingStore counts the change detector's store queries and the
// runs page's (RunList, but not the engine's reconciler's; DefinitionList).
type countingStore struct {
	persistence.Store
	changes atomic.Int64
	keys    atomic.Int64
	runList atomic.Int64
	defList atomic.Int64
}

func (c *countingStore) RunList(ctx context.Context, p persistence.RunListParams) (persistence.RunPage, error) {
	if len(p.Status) != 1 || p.Status[0] != persistence.RunCompensating { // not the engine's reconciler
		c.runList.Add(1)
	}
	return c.Store.RunList(ctx, p)
}

func (c *countingStore) DefinitionList(ctx context.Context, p persistence.DefinitionListParams) ([]persistence.Definition, error) {
	c.defList.Add(1)
	return c.Store.DefinitionList(ctx, p)
}

func (c *countingStore) StepListChanged(ctx context.Context, p persistence.StepListChangedParams) (persistence.StepChanges, error) {
	c.changes.Add(1)
	return c.Store.(persistence.ChangeFeed).StepListChanged(ctx, p)
}

func (c *countingStore) APIKeyList(ctx context.Context) ([]persistence.APIKey, error) {
	c.keys.Add(1)
	return c.Store.APIKeyList(ctx)
}

// env is an engine on the embedded backends with the API (and so the
// dashboard) on an httptest server.
type env struct {
	*enginetest.Env
	srv   *httptest.Server
	store *countingStore
	dash  *dashboard.Dashboard // set by direct
}

// stats are the change detector's counters.
func (e *env) stats() dashboard.DetectorStats { return e.dash.Detector() }

// direct serves a Dashboard made here (keyless, every request let in)
// instead of the API's, for tests that read its detector's counters.
func (e *env) direct(t *testing.T) {
	t.Helper()
	d, err := dashboard.New(dashboard.Config{
		Engine: e.Engine,
		Authenticate: func(context.Context, string) (dashboard.Principal, error) {
			return dashboard.Principal{}, dashboard.ErrUnknownKey
		},
		AnonymousOpen: func(*http.Request) (bool, error) { return true, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.dash = d
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	e.srv = srv
}

type envOptions struct {
	keys   bool // no keyless access
	redact func(api.Payload, json.RawMessage) json.RawMessage
	wfs    []*dag.Workflow
	// secureCookie sets api.Options.DashboardSecureCookie.
	secureCookie bool
	// logger is api.Options.Logger (default: discard).
	logger *slog.Logger
	// real runs the engine on the shared MariaDB (a database of the
	// test's own) and Redis (a key prefix of its own) instead of SQLite
	// and miniredis.
	real bool
	// engine adjusts the engine's config.
	engine func(*engine.Config)
}

// eachBackend runs f on the embedded backends (SQLite, miniredis) and on
// the real ones (MariaDB, Redis), as subtests.
func eachBackend(t *testing.T, f func(t *testing.T, real bool)) {
	t.Run("embedded", func(t *testing.T) { f(t, false) })
	t.Run("mariadb+redis", func(t *testing.T) { f(t, true) })
}

// shopWorkflow is a -> b (needs) and a -> c (after); a step named in the
// input's "fail" fails for good.
func shopWorkflow(t testing.TB) *dag.Workflow {
	t.Helper()
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		var in struct {
			Fail   string `json:"fail"`
			Secret string `json:"secret"`
		}
		if err := json.Unmarshal(sc.Input, &in); err != nil {
			return nil, steps.Permanent(err)
		}
		if in.Fail == sc.Step {
			return nil, steps.Permanent(errors.New(sc.Step + " refused"))
		}
		return json.RawMessage(`{"step":"` + sc.Step + `","token":"` + in.Secret + `"}`), nil
	})
	w, err := dag.New("shop").
		Step("a", h).
		Step("b", h, dag.Needs("a")).
		Step("c", h, dag.After("a")).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	var base persistence.Store
	var rc redis.UniversalClient
	var prefix string
	if o.real {
		st, err := mysql.Open(context.Background(), mysql.Config{DSN: testenv.MySQLDatabase(t), AutoMigrate: true})
		if err != nil {
			t.Fatalf("mysql: %v", err)
		}
		base = st
		c := redis.NewClient(&redis.Options{Addr: testenv.RequireRedis(t)})
		t.Cleanup(func() { c.Close() })
		rc, prefix = c, testenv.KeyPrefix(t)
		testenv.DeleteKeys(t, c, prefix)
	} else {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "dagflow.db"), AutoMigrate: true})
		if err != nil {
			t.Fatal(err)
		}
		base = st
	}
	t.Cleanup(func() { base.Close() })
	cs := &countingStore{Store: base}
	wfs := o.wfs
	if wfs == nil {
		wfs = []*dag.Workflow{shopWorkflow(t)}
	}
	e := enginetest.New(t, enginetest.Options{Store: cs, Redis: rc, Prefix: prefix, Workflows: wfs, Clock: engine.SystemClock, Configure: o.engine})
	h := api.NewHandler(e.Engine, api.Options{AllowAnonymous: !o.keys, Redact: o.redact, DashboardSecureCookie: o.secureCookie, Logger: o.logger})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{Env: e, srv: srv, store: cs}
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects.
type browser struct {
	t  *testing.T
	hc *http.Client
	u  string
}

func (e *env) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(hc.CloseIdleConnections)
	return &browser{t: t, hc: hc, u: e.srv.URL}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.u+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(out)}
}

func (b *browser) get(path string) answer { return b.do("GET", path, nil, nil) }

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token a page carries.
func csrf(t *testing.T, page answer) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("the page has no CSRF token:\n%s", page.body)
	}
	return m[1]
}

var flashRE = regexp.MustCompile(`<p class="flash" role="status">([^<]*)</p>`)

// flash follows a redirect and returns the message the page it leads to
// shows; the message is kept in the session, never in the URL.
func (b *browser) flash(a answer) string {
	b.t.Helper()
	loc := a.header.Get("Location")
	if a.status != http.StatusSeeOther || loc == "" {
		b.t.Fatalf("answer %d to %q, want a redirect", a.status, loc)
	}
	if strings.Contains(loc, "flash") {
		b.t.Errorf("the redirect %q carries its message in the URL", loc)
	}
	m := flashRE.FindStringSubmatch(b.get(loc).body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// login logs b in with key, failing the test unless the dashboard takes
// it.
func (b *browser) login(key string) {
	b.t.Helper()
	a := b.do("POST", "/login", url.Values{"key": {key}, "next": {"/"}}, nil)
	if a.status != http.StatusSeeOther {
		b.t.Fatalf("login: status %d, want 303; body %s", a.status, a.body)
	}
}

// waitRun waits for a run to finish.
func (e *env) waitRun(t *testing.T, id string) engine.RunInfo {
	t.Helper()
	return e.WaitTimeout(t, id, 60*time.Second)
}

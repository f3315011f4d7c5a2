package dashboard_test

import (
	"bytes"
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/bench/seed"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// TestRunsPageOnManyRuns: the runs page's first page (and its filtered
// and next pages) answers in under 200 ms over finished runs in MariaDB,
// and every RunList query it makes reads an index (EXPLAIN). It seeds
// 20,000 runs; with DAGFLOW_BIG=1, 1,000,000 (a few minutes to seed).
func TestRunsPageOnManyRuns(t *testing.T) {
	n := 20000
	if os.Getenv("DAGFLOW_BIG") == "1" {
		n = 1_000_000
	}
	if testing.Short() && n > 20000 {
		t.Skip("DAGFLOW_BIG with -short")
	}
	ctx := context.Background()
	st, err := mysql.Open(ctx, mysql.Config{DSN: testenv.MySQLDatabase(t), AutoMigrate: true})
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	began := time.Now()
	if err := seed.FinishedRuns(ctx, st.DB(), seed.Params{Runs: n, End: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d finished runs in %v", n, time.Since(began).Round(time.Millisecond))
	for _, table := range []string{"workflow_runs", "step_runs"} {
		if _, err := st.DB().ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
			t.Fatal(err)
		}
	}

	// EXPLAIN the page's queries: each reads an index, none sorts.
	for _, p := range []persistence.RunListParams{
		{Limit: 50},
		{Workflow: "order", Limit: 50},
		{Status: []persistence.RunStatus{persistence.RunSucceeded}, Limit: 50},
		{Workflow: "order", Status: []persistence.RunStatus{persistence.RunFailed}, Limit: 50},
		{IdempotencyKey: "order-1001", Limit: 50},
		{CreatedAfter: time.Now().Add(-48 * time.Hour), CreatedBefore: time.Now().Add(-24 * time.Hour), Limit: 50},
	} {
		q, err := st.RunListQuery(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range explainRows(t, st.DB(), q.SQL, q.Args) {
			t.Logf("RunList %+v: table=%s type=%s key=%s rows=%s extra=%s", p, r["table"], r["type"], r["key"], r["rows"], r["Extra"])
			if strings.HasPrefix(r["table"], "<") {
				continue
			}
			if r["key"] == "" || r["type"] == "ALL" || strings.Contains(r["Extra"], "filesort") {
				t.Errorf("RunList %+v reads no index in order: type %s key %q extra %q\n%s", p, r["type"], r["key"], r["Extra"], q.SQL)
			}
		}
	}

	c := redis.NewClient(&redis.Options{Addr: testenv.RequireRedis(t)})
	t.Cleanup(func() { c.Close() })
	prefix := testenv.KeyPrefix(t)
	testenv.DeleteKeys(t, c, prefix)
	e := enginetest.New(t, enginetest.Options{Store: st, Redis: c, Prefix: prefix, Clock: engine.SystemClock,
		Workflows: []*dag.Workflow{shopWorkflow(t)}, Configure: func(c *engine.Config) { c.NoWorkers = true }})
	srv := httptest.NewServer(api.NewHandler(e.Engine, api.Options{AllowAnonymous: true}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) time.Duration {
		t.Helper()
		start := time.Now()
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		if _, err := body.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK || strings.Count(body.String(), `<tr data-run=`) != 50 {
			t.Fatalf("GET %s: %d with %d runs listed, want 50", path, resp.StatusCode, strings.Count(body.String(), `<tr data-run=`))
		}
		return d
	}
	var cursor string
	{
		page, err := e.Engine.Runs(ctx, engine.RunFilter{Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		cursor = page.NextCursor
	}
	for _, path := range []string{"/runs", "/runs?workflow=order", "/runs?status=succeeded", "/runs?cursor=" + cursor} {
		var times []time.Duration
		for range 7 {
			times = append(times, get(path))
		}
		slices.Sort(times)
		t.Logf("GET %s over %d finished runs: median %v, best %v, worst %v", path, n, times[3].Round(time.Microsecond), times[0].Round(time.Microsecond), times[6].Round(time.Microsecond))
		if times[3] >= 200*time.Millisecond {
			t.Errorf("GET %s: median %v over %d runs, want under 200 ms", path, times[3], n)
		}
	}
}

func explainRows(t *testing.T, db *sql.DB, query string, args []any) []map[string]string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for i, c := range cols {
			m[c] = vals[i].String
		}
		out = append(out, m)
	}
	return out
}

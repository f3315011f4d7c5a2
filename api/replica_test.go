package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// TestReadReplica: with engine.Config.ReadStore on a MariaDB replica, the
// API reads runs from the replica while it keeps up, answers a run the
// replica lacks from the primary, shows a frozen replica's stale listing
// (with its lag) until the lag passes ReadStoreMaxLag, then reads the
// primary, goes back to the replica once it has caught up, and reads the
// primary when the replica is gone.
func TestReadReplica(t *testing.T) {
	addr := testenv.RequireRedis(t)
	primary := testenv.StartMariaDB(t, testenv.MariaDBOptions{ServerID: 1, Binlog: true})
	rep := testenv.StartMariaDB(t, testenv.MariaDBOptions{ServerID: 2})
	rep.ReplicateFrom(t, primary)
	db := primary.Database(t)
	ctx := context.Background()

	pst, err := mysql.Open(ctx, mysql.Config{DSN: primary.DSN("root", "", db), AutoMigrate: true})
	if err != nil {
		t.Fatalf("primary store: %v", err)
	}
	t.Cleanup(func() { pst.Close() })
	// The replica's store is opened as an operator would: no migrations;
	// its database arrives by replication.
	var rst *mysql.Store
	testenv.Eventually(t, 30*time.Second, func() bool {
		rst, err = mysql.Open(ctx, mysql.Config{DSN: rep.DSN("root", "", db)})
		if err != nil {
			return false
		}
		v, err := rst.SchemaVersion(ctx)
		if err != nil || v.Check() != nil {
			rst.Close()
			return false
		}
		return true
	}, "the replica has the migrated database %s (last error %v)", db, err)
	t.Cleanup(func() { rst.Close() })

	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	prefix := testenv.KeyPrefix(t)
	testenv.DeleteKeys(t, c, prefix)
	const maxLag = 3 * time.Second
	reg := prometheus.NewRegistry()
	gauge := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("%s is not exported", name)
		return 0
	}
	env := enginetest.New(t, enginetest.Options{
		Store: pst, Redis: c, Prefix: prefix, Clock: engine.SystemClock,
		Workflows: []*dag.Workflow{orderWorkflow(t, new(atomic.Bool))},
		Configure: func(cfg *engine.Config) {
			cfg.Registerer = reg
			cfg.ReadStore = rst
			cfg.NodeHeartbeat = 200 * time.Millisecond
			cfg.ReadStoreMaxLag = maxLag
		},
	})
	srv := httptest.NewServer(api.NewHandler(env.Engine, api.Options{AllowAnonymous: true}))
	t.Cleanup(srv.Close)

	type answer struct {
		lag    string // the X-Dagflow-Replica-Lag header; "" when absent
		runIDs map[string]bool
		status string
	}
	get := func(path string) answer {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		var page struct {
			Runs []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"runs"`
			Run struct {
				Status string `json:"status"`
			} `json:"run"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
		a := answer{lag: resp.Header.Get(api.ReplicaLagHeader), runIDs: map[string]bool{}, status: page.Run.Status}
		for _, r := range page.Runs {
			a.runIDs[r.ID] = true
		}
		if a.lag != "" {
			if _, err := strconv.ParseFloat(a.lag, 64); err != nil || !strings.Contains(a.lag, ".") {
				t.Fatalf("GET %s: %s %q is not seconds", path, api.ReplicaLagHeader, a.lag)
			}
		}
		return a
	}
	finish := func() string {
		t.Helper()
		id := env.Trigger(t, "order", map[string]any{})
		env.Wait(t, id)
		return id
	}

	// Caught up: the listing comes from the replica and has the run.
	first := finish()
	testenv.Eventually(t, 30*time.Second, func() bool {
		a := get("/v1/runs")
		return a.lag != "" && a.runIDs[first]
	}, "GET /v1/runs served by the replica (with %s) and listing run %s", api.ReplicaLagHeader, first)

	// Frozen: the replica applies nothing more.
	rep.Exec(t, "STOP SLAVE SQL_THREAD")
	frozen := time.Now()
	second := finish()
	// A run the replica lacks is read from the primary: no 404, no lag
	// header, the run as it is.
	if a := get("/v1/runs/" + second); a.lag != "" || a.status != "succeeded" {
		t.Fatalf("GET /v1/runs/{new run} on a frozen replica: status %q, lag header %q; want succeeded, read from the primary", a.status, a.lag)
	}
	// The listing is the replica's, stale, with its lag, until the lag
	// passes ReadStoreMaxLag.
	// (The lag measured is at most the time since it froze plus one
	// heartbeat; the check is skipped when this machine was too slow to
	// get here in time.)
	a := get("/v1/runs")
	if since := time.Since(frozen); since < maxLag-time.Second {
		if a.lag == "" || a.runIDs[second] {
			t.Fatalf("GET /v1/runs %v after the replica froze: lag header %q, lists the new run: %v; want the replica's stale page", since, a.lag, a.runIDs[second])
		}
	} else {
		t.Logf("the stale page was not checked: %v passed between freezing the replica and listing", since)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		a := get("/v1/runs")
		return a.lag == "" && a.runIDs[second]
	}, "GET /v1/runs read from the primary once the frozen replica lags over %v", maxLag)
	if lag, ok := env.Engine.ReplicaLag(ctx); ok || lag <= maxLag {
		t.Fatalf("ReplicaLag of the frozen replica = %v, %v; want over %v and not used", lag, ok, maxLag)
	}
	if used, lag := gauge("dagflow_read_replica_used"), gauge("dagflow_read_replica_lag_seconds"); used != 0 || lag <= maxLag.Seconds() {
		t.Fatalf("metrics of the frozen replica: used %v, lag %vs; want 0 and over %v", used, lag, maxLag)
	}

	// Replicating again: the replica catches up and serves again.
	rep.Exec(t, "START SLAVE SQL_THREAD")
	testenv.Eventually(t, 30*time.Second, func() bool {
		a := get("/v1/runs")
		return a.lag != "" && a.runIDs[second]
	}, "GET /v1/runs served by the replica again once it caught up")
	if used := gauge("dagflow_read_replica_used"); used != 1 {
		t.Fatalf("dagflow_read_replica_used = %v once the replica caught up; want 1", used)
	}

	// Gone: reads go to the primary and keep answering.
	rep.Kill()
	third := finish()
	testenv.Eventually(t, 30*time.Second, func() bool {
		a := get("/v1/runs")
		return a.lag == "" && a.runIDs[third]
	}, "GET /v1/runs read from the primary once the replica is gone")
	if got := get("/v1/runs/" + third); got.status != "succeeded" {
		t.Fatalf("GET /v1/runs/{id} with the replica gone: status %q", got.status)
	}
}

// TestReadReplicaConfig: a ReadStoreMaxLag the heartbeats cannot measure
// is refused, naming both settings.
func TestReadReplicaConfig(t *testing.T) {
	env := enginetest.New(t, enginetest.Options{})
	_, err := engine.New(engine.Config{Store: env.Store, Redis: env.Redis, ReadStore: env.Store,
		NodeHeartbeat: time.Second, ReadStoreMaxLag: 1500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "ReadStoreMaxLag 1.5s must be at least twice NodeHeartbeat 1s") {
		t.Fatalf("New with ReadStoreMaxLag under two heartbeats: %v", err)
	}
}

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/testenv"
)

// metricsURL finds the metrics server's URL in what serve or worker
// printed.
var metricsURL = regexp.MustCompile(`metrics on (http://\S+/metrics)`)

// TestServeMetrics: serve's /metrics follows the API's authentication (a
// read key once keys exist) and counts the runs it triggers, with no run
// id in any label.
func TestServeMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	readKey, _ := createKey(t, ctx, env.flags, "read", "prometheus")
	opKey, _ := createKey(t, ctx, env.flags, "operate", "shop")
	u, serveErr, stop := env.startServe(t, ctx, "--listen", "0.0.0.0:0", "--demo")
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	u = "http://127.0.0.1:" + pu.Port()
	if code, body := get(t, "GET", u+"/metrics", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a key: %d %.200s; want 401", code, body)
	}
	order := `{"input":{"order_id":"m-1","customer":"c@example.com","sku":"SKU-1","quantity":1,"total":150}}`
	code, body := get(t, "POST", u+"/v1/workflows/order/runs", opKey, order)
	if code != http.StatusCreated {
		t.Fatalf("POST a run: %d %s", code, body)
	}
	var run struct{ ID string }
	if err := json.Unmarshal([]byte(body), &run); err != nil || run.ID == "" {
		t.Fatalf("POST a run answered %s (%v)", body, err)
	}
	var metrics string
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, metrics = get(t, "GET", u+"/metrics", readKey, "")
		return code == http.StatusOK && strings.Contains(metrics, `dagflow_runs_finished_total{status="succeeded",workflow="order"} 1`)
	}, "no finished order run in /metrics: %d\n%s\nserve's log:\n%s", code, metrics, serveErr)
	for _, want := range []string{
		`dagflow_runs_started_total{workflow="order"} 1`,
		`dagflow_steps_finished_total{status="succeeded",step="reserve",workflow="order"} 1`,
		`dagflow_step_duration_seconds_count{step="reserve",workflow="order"} 1`,
		`dagflow_worker_slots{state="free"}`,
		`dagflow_queue_depth{queue=`,
		`dagflow_dead_letters{workflow="order"} 0`,
		`go_goroutines `,
		`process_cpu_seconds_total `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if strings.Contains(metrics, run.ID) {
		t.Errorf("/metrics carries the run id %s", run.ID)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, serveErr)
	}
}

// TestWorkerMetricsListen: worker --metrics-listen serves /metrics alone
// there, without a key, though the store holds keys; a bad address is a
// usage error naming the flag.
func TestWorkerMetricsListen(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	createKey(t, ctx, env.flags, "read", "prometheus")

	if code, _, errb := runCLI(t, ctx, append([]string{"worker", "--metrics-listen", "nohost"}, env.flags...)...); code != 2 || !strings.Contains(errb, "--metrics-listen") {
		t.Errorf("worker --metrics-listen nohost: exit %d, %q; want a usage error naming the flag", code, errb)
	}

	wctx, stop := context.WithCancel(ctx)
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, append([]string{"worker", "--demo", "--metrics-listen", "127.0.0.1:0"}, env.flags...), &out, &errb)
	}()
	defer func() {
		stop()
		if code := <-done; code != 0 {
			t.Errorf("worker exited %d:\n%s", code, &errb)
		}
	}()
	var mu string
	testenv.Eventually(t, 30*time.Second, func() bool {
		if m := metricsURL.FindStringSubmatch(out.String()); m != nil {
			mu = m[1]
		}
		return mu != ""
	}, "worker printed no metrics URL; stdout %s, stderr %s", &out, &errb)
	code, body := get(t, "GET", mu, "", "")
	if code != http.StatusOK || !strings.Contains(body, `dagflow_worker_slots{state="free"} 10`) ||
		!strings.Contains(body, `dagflow_runs_started_total{workflow="order"} 0`) {
		t.Errorf("GET %s without a key: %d\n%s\nwant 200 with the engine's metrics", mu, code, body)
	}
	if code, _ := get(t, "GET", strings.TrimSuffix(mu, "/metrics")+"/v1/runs", "", ""); code != http.StatusNotFound {
		t.Errorf("the metrics server answers /v1/runs with %d; want 404 (it serves /metrics alone)", code)
	}
}

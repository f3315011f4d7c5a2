package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
)

// BenchmarkTriggerOverHTTP starts runs through POST
// /v1/workflows/order/runs on loopback, with an operate key and a fresh
// idempotency key per call, from 1 and from 16 concurrent clients per CPU
// (b.RunParallel), and reports runs/s and the p50 and p99 latency. The
// node has no workers, so it measures the API and run creation, not the
// steps.
func BenchmarkTriggerOverHTTP(b *testing.B) {
	for _, be := range backends() {
		for _, par := range []int{1, 16} {
			b.Run(be.name+"/clients-per-cpu="+strconv.Itoa(par), func(b *testing.B) { benchTrigger(b, be, par) })
		}
	}
}

// benchTrigger is one BenchmarkTriggerOverHTTP case: par clients per CPU.
func benchTrigger(b *testing.B, be backend, par int) {
	o := be.opts(b)
	o.Workflows = []*dag.Workflow{orderWorkflow(b, new(atomic.Bool))}
	o.Clock = engine.SystemClock
	o.Configure = func(c *engine.Config) { c.NoWorkers = true }
	env := enginetest.New(b, o)
	secret, _, err := api.CreateKey(context.Background(), env.Store, "bench", "operate", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(env.Engine, api.Options{}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	c, err := client.New(srv.URL, client.Options{Key: secret, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var lat []time.Duration
	var seq int64
	b.SetParallelism(par)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			mu.Lock()
			seq++
			n := seq
			mu.Unlock()
			t0 := time.Now()
			_, created, err := c.Trigger(context.Background(), "order", client.TriggerRequest{
				Input:          json.RawMessage(`{"order_id":"o"}`),
				IdempotencyKey: "bench-" + time.Now().Format("150405.000000000") + "-" + strconv.FormatInt(n, 10),
			})
			if err != nil || !created {
				b.Errorf("trigger: created %v, %v", created, err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

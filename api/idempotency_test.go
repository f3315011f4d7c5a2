package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/dagflow/dagflow/api/client"
)

// TestConcurrentIdempotencyKey: 200 concurrent triggers with one key make
// one run; one answer is 201, the others 200, and every answer carries
// the run's id.
func TestConcurrentIdempotencyKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		const n = 200
		var wg sync.WaitGroup
		results := make([]rawResp, n)
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				// No t.Fatal off the test's goroutine: the error is
				// reported below.
				results[i], errs[i] = env.rawDo("POST", "/v1/workflows/order/runs", `{"input":{"order_id":"o-42"}}`, nil, "Idempotency-Key: order-o-42")
			}(i)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		created := 0
		ids := map[string]int{}
		for i, r := range results {
			var run client.Run
			if err := json.Unmarshal(r.body, &run); err != nil || run.ID == "" {
				t.Fatalf("answer %d: %d %s", i, r.status, r.body)
			}
			ids[run.ID]++
			switch r.status {
			case http.StatusCreated:
				created++
			case http.StatusOK:
			default:
				t.Fatalf("answer %d: %d %s", i, r.status, r.body)
			}
		}
		if created != 1 || len(ids) != 1 {
			t.Fatalf("%d answers 201 and %d run ids (%v), want 1 and 1", created, len(ids), ids)
		}
		if got := countRuns(t, env); got != 1 {
			t.Fatalf("%d runs stored, want 1", got)
		}
	})
}

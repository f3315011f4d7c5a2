package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dagflow/dagflow/api"
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

// TestIdempotentInputIsComparedAsJSON: a repeat whose input differs only
// in whitespace or the order of its keys, or that sends null for no
// input, is the same call (200, the same run); another value is a 409.
func TestIdempotentInputIsComparedAsJSON(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		post := func(body, key string) rawResp {
			t.Helper()
			return env.raw(t, "POST", "/v1/workflows/order/runs", body, "Idempotency-Key: "+key)
		}
		var first, again client.Run
		post(`{"input":{"a":1,"b":[2.50,"<x>"]}}`, "k1").decode(t, http.StatusCreated, &first)
		for _, body := range []string{
			`{"input": { "a": 1, "b": [2.50, "<x>"] } }`,
			`{"input":{"b":[2.50,"<x>"],"a":1}}`,
			"{\"input\":\n{\"b\":[2.50,\"\\u003cx>\"],\n\t\"a\":1}}",
		} {
			post(body, "k1").decode(t, http.StatusOK, &again)
			if again.ID != first.ID {
				t.Fatalf("%s: run %s, want %s", body, again.ID, first.ID)
			}
		}
		if !strings.HasPrefix(string(first.Input), `{"a":1,"b":[2.50,"`) {
			t.Fatalf("stored input %s, want the normalised JSON with the numbers' text", first.Input)
		}
		p := post(`{"input":{"a":1,"b":[2.5,"<x>"]}}`, "k1").problem(t, http.StatusConflict, api.CodeIdempotencyConflict)
		if p.RunID != first.ID {
			t.Fatalf("409 names run %q, want %s", p.RunID, first.ID)
		}
		post(`{"input":{"a":2,"b":[2.50,"<x>"]}}`, "k1").problem(t, http.StatusConflict, api.CodeIdempotencyConflict)

		// null is no input.
		var none client.Run
		post(`{"input":null}`, "k2").decode(t, http.StatusCreated, &none)
		for _, body := range []string{`{}`, ``, `{"input": null }`} {
			post(body, "k2").decode(t, http.StatusOK, &again)
			if again.ID != none.ID {
				t.Fatalf("%q: run %s, want %s", body, again.ID, none.ID)
			}
		}
		post(`{"input":{}}`, "k2").problem(t, http.StatusConflict, api.CodeIdempotencyConflict)
	})
}

// TestEmptyIdempotencyKeyIsNoKey: an empty key, in the body or the
// header, is no key: each call makes a run.
func TestEmptyIdempotencyKeyIsNoKey(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	ids := map[string]bool{}
	for _, tc := range []struct{ body, header string }{
		{`{"idempotency_key":""}`, ""},
		{`{"idempotency_key":""}`, ""},
		{`{}`, "Idempotency-Key:"},
		{`{"idempotency_key":""}`, "Idempotency-Key:"},
	} {
		var hdr []string
		if tc.header != "" {
			hdr = append(hdr, tc.header)
		}
		var run client.Run
		env.raw(t, "POST", "/v1/workflows/order/runs", tc.body, hdr...).decode(t, http.StatusCreated, &run)
		if run.IdempotencyKey != "" {
			t.Fatalf("%s %q: run has key %q", tc.body, tc.header, run.IdempotencyKey)
		}
		ids[run.ID] = true
	}
	if len(ids) != 4 {
		t.Fatalf("4 calls with an empty key made %d runs, want 4", len(ids))
	}
}

// TestEventIdempotencyKeyIsRefused: keys starting with "event:" belong to
// the runs events start; a trigger with one, in the body or the header,
// is a 400 naming the reserved prefix.
func TestEventIdempotencyKeyIsRefused(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	for _, tc := range []struct{ body, header string }{
		{`{"idempotency_key":"event:E:order"}`, ""},
		{`{}`, "Idempotency-Key: event:E:order"},
	} {
		var hdr []string
		if tc.header != "" {
			hdr = append(hdr, tc.header)
		}
		r := env.raw(t, "POST", "/v1/workflows/order/runs", tc.body, hdr...)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `reserved for event runs`) {
			t.Fatalf("%s %q: %d %s, want 400 naming the reserved prefix", tc.body, tc.header, r.status, r.body)
		}
	}
}

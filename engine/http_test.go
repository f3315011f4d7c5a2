package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// httpCall is one request seen by the test server.
type httpCall struct {
	key, auth, body string
}

// scripted answers the requests to it with its responses in turn (the
// last one again once they run out) and records them.
type scripted struct {
	mu    sync.Mutex
	calls []httpCall
	resps []func(w http.ResponseWriter)
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.calls = append(s.calls, httpCall{key: r.Header.Get("Idempotency-Key"), auth: r.Header.Get("Authorization"), body: string(b)})
	resp := s.resps[min(len(s.calls), len(s.resps))-1]
	s.mu.Unlock()
	resp(w)
}

func (s *scripted) seen() []httpCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]httpCall(nil), s.calls...)
}

func respond(status int, body string, headers ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// httpWorkflow loads a YAML-only workflow whose one step calls url.
func httpWorkflow(t *testing.T, name, url string) *dag.Workflow {
	t.Helper()
	src := fmt.Sprintf(`name: %s
defaults:
  retry: {max_attempts: 4, initial_backoff: 2s, max_backoff: 2s, jitter: 0}
steps:
  - name: charge
    kind: http
    url: %s
    headers: {Authorization: "Bearer ${env:DAGFLOW_TEST_PAY_TOKEN}"}
    body: '{"order": input.order_id, "amount": input.total}'
`, name, url)
	w, err := dag.LoadYAML([]byte(src), name+".yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestHTTPStep: a YAML-only kind: http step against a local server. A
// 500 is retried with the backoff, a 429 with Retry-After after that
// delay, and the 2xx body is the step's output; every attempt sends the
// same Idempotency-Key. A 400 is a dead letter at once. The secret
// header reaches the server and nothing stored.
func TestHTTPStep(t *testing.T) {
	t.Setenv("DAGFLOW_TEST_PAY_TOKEN", "tok-s3cret")
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		flaky := &scripted{resps: []func(http.ResponseWriter){
			respond(500, "echo: Bearer tok-s3cret"),
			respond(429, "slow down", "Retry-After", "7"),
			respond(200, `{"charge":"ch_1","status":"paid"}`),
		}}
		bad := &scripted{resps: []func(http.ResponseWriter){respond(400, `{"error":"card declined"}`)}}
		mux := http.NewServeMux()
		mux.Handle("/flaky", flaky)
		mux.Handle("/bad", bad)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)

		o := b.opts(t)
		o.Workflows = []*dag.Workflow{httpWorkflow(t, "pay", srv.URL+"/flaky"), httpWorkflow(t, "declined", srv.URL+"/bad")}
		env := enginetest.New(t, o)
		step := func(id string) persistence.StepRun {
			s, err := env.Store.StepGet(ctx, id, "charge")
			if err != nil {
				t.Fatal(err)
			}
			return s
		}

		id := env.Trigger(t, "pay", map[string]any{"order_id": "o-1", "total": 12.5})
		testenv.Eventually(t, 10*time.Second, func() bool {
			return len(flaky.seen()) == 1 && step(id).Status == persistence.StepRetrying
		}, "the 500 not retried")
		if s := step(id); s.NextAttemptAt == nil || s.NextAttemptAt.Sub(env.Clock.Now()) != 2*time.Second {
			t.Errorf("after a 500 the retry is due at %v, want the backoff (2s) after %v", s.NextAttemptAt, env.Clock.Now())
		}
		env.Clock.Set(*step(id).NextAttemptAt)
		testenv.Eventually(t, 10*time.Second, func() bool {
			s := step(id)
			return len(flaky.seen()) == 2 && s.Status == persistence.StepRetrying && s.Attempt == 2
		}, "the 429 not retried")
		if s := step(id); s.NextAttemptAt == nil || s.NextAttemptAt.Sub(env.Clock.Now()) != 7*time.Second {
			t.Errorf("after a 429 with Retry-After: 7 the retry is due at %v, want 7s after %v", s.NextAttemptAt, env.Clock.Now())
		}
		info := env.Wait(t, id)
		env.AssertRun(t, info, persistence.RunSucceeded)
		s, _ := info.Step("charge")
		if string(s.Output) != `{"charge":"ch_1","status":"paid"}` {
			t.Errorf("output = %s, want the response body", s.Output)
		}
		calls := flaky.seen()
		if len(calls) != 3 {
			t.Fatalf("%d requests, want 3", len(calls))
		}
		for i, c := range calls {
			if c.key != id+"/charge" || c.auth != "Bearer tok-s3cret" || c.body != `{"amount":12.5,"order":"o-1"}` {
				t.Errorf("request %d: %+v; want key %s/charge, the token and the rendered body", i+1, c, id)
			}
		}
		spec, _ := json.Marshal(info)
		if strings.Contains(string(spec), "tok-s3cret") {
			t.Errorf("the run's record holds the secret header value: %s", spec)
		}
		if !strings.Contains(string(spec), "[redacted]") || !strings.Contains(string(spec), "429 Too Many Requests") {
			t.Errorf("the attempts' errors do not tell what happened: %s", spec)
		}

		id = env.Trigger(t, "declined", map[string]any{"order_id": "o-2", "total": 1})
		info = env.Wait(t, id)
		env.AssertStep(t, info, "charge", persistence.StepDead)
		if s, _ := info.Step("charge"); s.Attempt != 1 || !strings.Contains(s.Error, `400 Bad Request: {"error":"card declined"}`) {
			t.Errorf("the 400 step: attempt %d, error %q; want dead on attempt 1 with the status and body", s.Attempt, s.Error)
		}
		if n := len(bad.seen()); n != 1 {
			t.Errorf("the 400 was sent %d times, want once", n)
		}
	})
}

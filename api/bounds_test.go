package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// bigValue is a JSON string of n bytes in all.
func bigValue(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

// fanInWorkflow is 40 parallel steps whose outputs are 1 MB each, joined
// by one step that needs them all: a run of it holds 40 MB of outputs
// (over the engine's default MaxStepInput: see fanInEngine).
func fanInWorkflow(t testing.TB) *dag.Workflow {
	t.Helper()
	big := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return bigValue(1<<20 - 64), nil })
	b := dag.New("fanin")
	var parts []string
	for i := range 40 {
		name := fmt.Sprintf("part%02d", i)
		parts = append(parts, name)
		b = b.Step(name, big)
	}
	wf, err := b.Step("join", steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"joined":40}`), nil
	}), dag.Needs(parts...)).Build()
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// fanInEngine lets the join step of fanInWorkflow read its 40 MB.
func fanInEngine(c *engine.Config) { c.MaxStepInput = 64 << 20 }

// fetch GETs path with hc and returns the answer's status and body size,
// reading the body without keeping it.
func fetch(hc *http.Client, url string) (int, int64, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, n, err
}

// fetchConcurrently GETs url n times at once and returns the largest body.
func fetchConcurrently(t *testing.T, url string, n int) int64 {
	t.Helper()
	hc := &http.Client{Timeout: 3 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer hc.CloseIdleConnections()
	var mu sync.Mutex
	var largest int64
	var errs []error
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, size, err := fetch(hc, url)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("GET %s: status %d", url, status)
			}
			if err != nil {
				errs = append(errs, err)
			}
			largest = max(largest, size)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	return largest
}

// The bounds of the read paths: what an answer holds inline, and what
// serving it costs. The margins are wide: a 2-core box shared with other
// tests measures the same allocations, only slower.
const (
	// Ten concurrent GET /v1/runs/{id} of a run with 40 MB of step
	// outputs: each answer under 64 KiB (26 KB measured; 42 MB before),
	// under 1.5 GiB allocated in all (0.8 GiB measured, the store reading
	// each output once per request; 2.5 GiB before) and under 800 MiB of
	// heap in use at the peak (0.5 GiB measured; 1.5-1.7 GiB before).
	fanInBodyBound  = 64 << 10
	fanInAllocBound = 1536 << 20
	fanInHeapBound  = 800 << 20
	// Four concurrent GET /v1/runs?limit=1000 over 40 runs with 1 MB
	// inputs: answers under 64 KiB (13 KB measured; 42 MB before), under
	// 64 MiB allocated in all (5-11 MiB measured, the store reading no
	// payload; 1 GiB before).
	listBodyBound  = 64 << 10
	listAllocBound = 64 << 20
)

// TestRunDetailBounded: GET /v1/runs/{id} of a fan-in run with 40 MB of
// step outputs answers with each output over the inline limit replaced
// by its size and URL, and ten such requests at once stay under the
// bounds above; the URL serves the whole output, as JSON.
func TestRunDetailBounded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{workflows: []*dag.Workflow{fanInWorkflow(t)}, engine: fanInEngine})
		ctx := context.Background()
		id, err := env.Engine.Trigger(ctx, "fanin", nil)
		if err != nil {
			t.Fatal(err)
		}
		waitRun(t, env, id)
		// Warm up the connections and the handler's one-time work.
		fetchConcurrently(t, env.srv.URL+"/v1/runs/"+id, 1)
		var largest int64
		use := testenv.MeasureMemory(func() { largest = fetchConcurrently(t, env.srv.URL+"/v1/runs/"+id, 10) })
		t.Logf("10 x GET /v1/runs/{id}: body %d bytes; allocated %s, peak heap %s, peak RSS growth %s",
			largest, testenv.MiB(use.Allocated), testenv.MiB(use.PeakHeap), testenv.MiB(use.PeakRSS))
		if largest >= fanInBodyBound {
			t.Errorf("answer of %d bytes, want under %d", largest, fanInBodyBound)
		}
		if use.Allocated >= fanInAllocBound {
			t.Errorf("allocated %s, want under %s", testenv.MiB(use.Allocated), testenv.MiB(fanInAllocBound))
		}
		if use.PeakHeap >= fanInHeapBound {
			t.Errorf("peak heap %s, want under %s", testenv.MiB(use.PeakHeap), testenv.MiB(fanInHeapBound))
		}
		checkFanInRefs(t, env, id)
	})
}

// waitRun waits for a run to succeed.
func waitRun(t *testing.T, env *apiEnv, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := env.Engine.Wait(ctx, id)
	if err != nil || run.Status != persistence.RunSucceeded {
		t.Fatalf("run %s: %s, %v; want succeeded", id, run.Status, err)
	}
}

// checkFanInRefs checks the run's answer (through the validating
// client): the parts' outputs are references whose URLs serve them whole;
// the join's small output is inline.
func checkFanInRefs(t *testing.T, env *apiEnv, id string) {
	t.Helper()
	d, err := env.anon.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := bigValue(1<<20 - 64)
	for _, st := range d.Steps {
		if st.Step == "join" {
			if string(st.Output) != `{"joined":40}` || st.OutputRef != nil {
				t.Errorf("join: output %s ref %+v, want it inline", st.Output, st.OutputRef)
			}
			continue
		}
		if string(st.Output) != "null" || st.OutputRef == nil || st.OutputRef.Bytes != len(want) ||
			st.OutputRef.URL != "/v1/runs/"+id+"/steps/"+st.Step+"/output" {
			t.Fatalf("%s: output %.40s ref %+v, want null and a reference of %d bytes", st.Step, st.Output, st.OutputRef, len(want))
		}
	}
	r := env.raw(t, "GET", d.Steps[0].OutputRef.URL, "")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" || string(r.body) != string(want) {
		t.Fatalf("GET %s: %d %q, %d bytes; want 200 application/json with the whole output", d.Steps[0].OutputRef.URL, r.status, r.header.Get("Content-Type"), len(r.body))
	}
	r = env.raw(t, "GET", "/v1/runs/"+id+"/steps/nosuch/output", "")
	r.problem(t, http.StatusNotFound, "step_not_found")
}

// TestRunListBounded: GET /v1/runs lists runs without their payloads
// unless asked (?include=input,output), and even then each payload over
// the inline limit is a reference; four lists of 40 runs with 1 MB inputs
// at once stay under the bounds above.
func TestRunListBounded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		ctx := context.Background()
		var ids []string
		for i := range 40 {
			in := map[string]any{"i": i, "blob": strings.Repeat("y", 1<<20-64)}
			id, err := env.Engine.Trigger(ctx, "order", in)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		fetchConcurrently(t, env.srv.URL+"/v1/runs?limit=1000", 1)
		var largest int64
		use := testenv.MeasureMemory(func() { largest = fetchConcurrently(t, env.srv.URL+"/v1/runs?limit=1000", 4) })
		t.Logf("4 x GET /v1/runs?limit=1000: body %d bytes; allocated %s, peak heap %s, peak RSS growth %s",
			largest, testenv.MiB(use.Allocated), testenv.MiB(use.PeakHeap), testenv.MiB(use.PeakRSS))
		if largest >= listBodyBound {
			t.Errorf("answer of %d bytes, want under %d", largest, listBodyBound)
		}
		if use.Allocated >= listAllocBound {
			t.Errorf("allocated %s, want under %s", testenv.MiB(use.Allocated), testenv.MiB(listAllocBound))
		}
		page, err := env.anon.ListRuns(ctx, client.RunFilter{Limit: 1000})
		if err != nil || len(page.Runs) != 40 {
			t.Fatalf("list: %d runs, %v; want 40", len(page.Runs), err)
		}
		if r := page.Runs[0]; r.Input != nil || r.InputRef != nil {
			t.Errorf("listed without include: input %.40s ref %+v, want neither", r.Input, r.InputRef)
		}
		page, err = env.anon.ListRuns(ctx, client.RunFilter{Limit: 1000, Include: []string{"input"}})
		if err != nil || len(page.Runs) != 40 {
			t.Fatalf("list with include=input: %d runs, %v; want 40", len(page.Runs), err)
		}
		r := page.Runs[len(page.Runs)-1]
		if r.ID != ids[0] || string(r.Input) != "null" || r.InputRef == nil || r.InputRef.URL != "/v1/runs/"+ids[0]+"/input" {
			t.Fatalf("listed with include=input: run %s input %.40s ref %+v; want run %s with a reference", r.ID, r.Input, r.InputRef, ids[0])
		}
		raw := env.raw(t, "GET", r.InputRef.URL, "")
		if raw.status != http.StatusOK || len(raw.body) != r.InputRef.Bytes || !strings.Contains(string(raw.body), `"i":0`) {
			t.Fatalf("GET %s: %d, %d bytes; want 200 with %d bytes of run 0's input", r.InputRef.URL, raw.status, len(raw.body), r.InputRef.Bytes)
		}
		env.raw(t, "GET", "/v1/runs?include=secrets", "").problem(t, http.StatusBadRequest, "invalid_parameter")
	})
}

package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/internal/testenv"
)

// The bounds of the run page. A 20 KB input of 9,990 nested arrays used
// to render 199.6 MB of HTML (indented, each level two spaces deeper;
// +450 MB of RSS): the page now stays under 1 MB and rendering it
// allocates under 64 MiB (75 KB and 1-2 MiB measured), whatever the
// input's depth.
const (
	runPageBytesBound = 1 << 20
	runPageAllocBound = 64 << 20
)

// TestRunPageBoundsDeepInput: the run page of a run whose input is 9,990
// nested arrays shows the start of it, cut, with a link to the whole
// value; the page's size and what rendering it allocates stay under the
// bounds above. The link serves the whole input as JSON, to a session
// only, redacted like the page.
func TestRunPageBoundsDeepInput(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		e := newEnv(t, envOptions{real: real, keys: true, redact: func(p api.Payload, data json.RawMessage) json.RawMessage {
			if p.Kind == "output" {
				return json.RawMessage(`"redacted"`)
			}
			return data
		}})
		ctx := context.Background()
		deep := json.RawMessage(strings.Repeat("[", 9990) + strings.Repeat("]", 9990))
		id, err := e.Engine.Trigger(ctx, "shop", deep)
		if err != nil {
			t.Fatal(err)
		}
		e.waitRun(t, id)
		key, _, err := api.CreateKey(ctx, e.Store, "viewer", "read", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		b := e.browser(t)
		if a := b.get("/runs/" + id + "/input"); a.status != http.StatusSeeOther {
			t.Fatalf("the raw input without a session: %d, want a redirect to the login", a.status)
		}
		b.login(key)
		b.get("/runs/" + id) // warm up the templates and the connection
		var page answer
		use := testenv.MeasureMemory(func() { page = b.get("/runs/" + id) })
		t.Logf("run page of a 20 KB input of nested arrays: %d bytes; allocated %s, peak heap %s, peak RSS growth %s",
			len(page.body), testenv.MiB(use.Allocated), testenv.MiB(use.PeakHeap), testenv.MiB(use.PeakRSS))
		if page.status != http.StatusOK {
			t.Fatalf("run page: %d", page.status)
		}
		if len(page.body) >= runPageBytesBound {
			t.Errorf("run page of %d bytes, want under %d", len(page.body), runPageBytesBound)
		}
		if use.Allocated >= runPageAllocBound {
			t.Errorf("rendering allocated %s, want under %s", testenv.MiB(use.Allocated), testenv.MiB(runPageAllocBound))
		}
		link := `href="/runs/` + id + `/input" class="whole"`
		if !strings.Contains(page.body, link) || !strings.Contains(page.body, "19980 bytes") {
			t.Fatalf("the run page has no link to the whole input (%s) naming its size", link)
		}
		raw := b.get("/runs/" + id + "/input")
		if raw.status != http.StatusOK || raw.header.Get("Content-Type") != "application/json" || raw.body != string(deep) {
			t.Fatalf("GET /runs/{id}/input: %d %q, %d bytes; want 200 application/json with the whole input", raw.status, raw.header.Get("Content-Type"), len(raw.body))
		}
		if a := b.get("/runs/" + id + "/steps/a/output"); a.status != http.StatusOK || a.body != "null" {
			t.Errorf("GET the output of a step that failed: %d %q, want null", a.status, a.body)
		}
		if a := b.get("/runs/" + id + "/steps/nosuch/output"); a.status != http.StatusNotFound {
			t.Errorf("GET the output of a step the run does not have: %d, want 404", a.status)
		}
	})
}

// TestRunPageLinksLargeOutput: a step output over the page's limit is
// shown cut with a link, and the link serves it redacted like the page.
func TestRunPageLinksLargeOutput(t *testing.T) {
	e := newEnv(t, envOptions{redact: func(p api.Payload, data json.RawMessage) json.RawMessage {
		if p.Kind == "output" && p.Step == "a" {
			return json.RawMessage(`{"masked":"` + strings.Repeat("m", 100<<10) + `"}`)
		}
		return data
	}})
	id, err := e.Engine.Trigger(context.Background(), "shop", map[string]string{"secret": "s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitRun(t, id)
	b := e.browser(t)
	page := b.get("/runs/" + id + "?step=a")
	if !strings.Contains(page.body, `href="/runs/`+id+`/steps/a/output" class="whole"`) || len(page.body) > 200<<10 {
		t.Fatalf("the run page (%d bytes) does not link the whole redacted output of step a", len(page.body))
	}
	raw := b.get("/runs/" + id + "/steps/a/output")
	if raw.status != http.StatusOK || !strings.HasPrefix(raw.body, `{"masked":"mmm`) || len(raw.body) != 100<<10+13 || strings.Contains(raw.body, "s3cr3t") {
		t.Fatalf("GET the step's output: %d, %d bytes %.30q; want the redacted value whole", raw.status, len(raw.body), raw.body)
	}
}

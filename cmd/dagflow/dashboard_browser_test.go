//go:build !nodev

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dagflow/dagflow/internal/browsertest"
	"github.com/dagflow/dagflow/internal/testenv"
)

// dashboardURL finds the dashboard's URL in what dev printed.
var dashboardURL = regexp.MustCompile(`dashboard on (http://[^\s]+)/`)

// devOrder starts a run of the order workflow through the API and
// returns its id.
func devOrder(t *testing.T, base string, input map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input": input})
	resp, err := http.Post(base+"/v1/workflows/order/runs", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var run struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&run); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("trigger: %d, %v", resp.StatusCode, err)
	}
	return run.ID
}

func order(id string, extra map[string]any) map[string]any {
	in := map[string]any{"order_id": id, "customer": "ada@example.com", "sku": "SKU-42", "quantity": 2, "total": 150}
	for k, v := range extra {
		in[k] = v
	}
	return in
}

// nodeStatus is the status a run page's DAG shows for a step.
func nodeStatus(step string) string {
	return fmt.Sprintf(`(document.querySelector('g.node[data-step="%s"]') || {dataset: {}}).dataset.status`, step)
}

// TestDashboardInBrowser starts `dagflow dev --listen` and drives its
// dashboard in headless Chromium: a run's DAG turns from waiting to
// succeeded without a reload; a compensated run shows ship dead and the
// undo order as reverse edges; a dead letter retried from a click moves
// its run on; the trigger form starts a run that appears in the runs
// list live; a read session has no action buttons and a forged POST is
// refused. It writes screenshots (overview, run, dead letters at 1280 px;
// the run at 390 px and in dark mode) to browsertest.ScreenshotDir.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and drives a browser")
	}
	ctx := browsertest.New(t)
	bin := buildDagflow(t)
	cmd := exec.Command(bin, "dev", "--listen", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "dev.db"),
		"--every", "1h", "--step-delay", "2s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var base string
	testenv.Eventually(t, 60*time.Second, func() bool {
		if m := dashboardURL.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		return base != ""
	}, "dev printed no dashboard URL; stdout %s, stderr %s", &out, &errb)

	t.Run("live DAG", func(t *testing.T) {
		id := devOrder(t, base, order("live-1", nil))
		browsertest.Do(t, ctx, "open the run", chromedp.Navigate(base+"/runs/"+id))
		browsertest.WaitJS(t, ctx, "the DAG", `document.querySelectorAll('g.node').length === 4`)
		if first := browsertest.Eval[string](t, ctx, nodeStatus("ship")); first != "waiting" {
			t.Fatalf("ship is %q when the page loads, want waiting (the machine is too slow for --step-delay 2s?)", first)
		}
		browsertest.Eval[any](t, ctx, `window.dagflowMarker = 42`)
		browsertest.WaitJS(t, ctx, "every step succeeded, live",
			`['reserve','notify','points','ship'].every(s => (document.querySelector('g.node[data-step="' + s + '"]') || {dataset: {}}).dataset.status === 'succeeded')`)
		if !browsertest.Eval[bool](t, ctx, `window.dagflowMarker === 42 && Number(document.getElementById('live').dataset.refreshes) > 0`) {
			t.Error("the page was reloaded (or never refreshed its live part)")
		}
		browsertest.WaitJS(t, ctx, "the run's status", `document.getElementById('run-status').textContent === 'succeeded'`)
	})

	var compensated string
	t.Run("compensated run", func(t *testing.T) {
		compensated = devOrder(t, base, order("comp-1", map[string]any{"fail_step": "ship"}))
		browsertest.Do(t, ctx, "open the run", chromedp.Navigate(base+"/runs/"+compensated))
		browsertest.WaitJS(t, ctx, "compensated", `document.getElementById('run-status').textContent === 'compensated'`)
		if s := browsertest.Eval[string](t, ctx, nodeStatus("ship")); s != "dead" {
			t.Errorf("ship is %q, want dead", s)
		}
		for _, s := range []string{"reserve", "points"} {
			if got := browsertest.Eval[string](t, ctx, nodeStatus(s)); got != "compensated" {
				t.Errorf("%s is %q, want compensated", s, got)
			}
		}
		if !browsertest.Eval[bool](t, ctx, `!!document.querySelector('path.edge.undo[data-from="points"][data-to="reserve"]')`) {
			t.Error("no reverse edge points -> reserve (the undo order)")
		}
		if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('path.edge.needs').length`); n != 1 {
			t.Errorf("%d needs edges, want 1 (reserve -> ship)", n)
		}
		if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('path.edge.after').length`); n != 4 {
			t.Errorf("%d after edges, want 4", n)
		}
		if c := browsertest.Eval[string](t, ctx, `document.querySelector('svg.dag').dataset.crossings`); c != "0" {
			t.Errorf("the order workflow is drawn with %s edge crossings, want 0", c)
		}
		browsertest.Screenshot(t, ctx, "run", 1280)
		browsertest.ScreenshotElement(t, ctx, "run-dag", "section.graph")
		browsertest.Screenshot(t, ctx, "run-390", 390)
		browsertest.DarkMode(t, ctx, true)
		browsertest.Screenshot(t, ctx, "run-dark", 1280)
		browsertest.DarkMode(t, ctx, false)
	})

	t.Run("retry a dead letter", func(t *testing.T) {
		id := devOrder(t, base, order("dlq-1", map[string]any{"fail_once_step": "reserve"}))
		browsertest.Do(t, ctx, "open the dead letters", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/dead-letters"))
		row := fmt.Sprintf(`tr[data-run="%s"][data-step="reserve"]`, id)
		browsertest.WaitJS(t, ctx, "the dead letter, live", `!!document.querySelector('`+row+`')`)
		browsertest.Screenshot(t, ctx, "dead-letters", 1280)
		browsertest.Do(t, ctx, "click retry", chromedp.Click(row+` button[data-action="retry"]`, chromedp.NodeVisible))
		browsertest.WaitJS(t, ctx, "the flash", `(document.querySelector('.flash') || {}).textContent?.startsWith('Retried: 1 of 1')`)
		browsertest.Do(t, ctx, "open the run", chromedp.Navigate(base+"/runs/"+id))
		browsertest.WaitJS(t, ctx, "the run succeeded", `document.getElementById('run-status').textContent === 'succeeded'`)
	})

	t.Run("trigger form", func(t *testing.T) {
		list := browsertest.Tab(t, ctx)
		browsertest.Do(t, list, "open the runs", chromedp.Navigate(base+"/runs"))
		browsertest.WaitJS(t, list, "the stream", `document.getElementById('live-state').textContent === 'live'`)
		browsertest.Eval[any](t, list, `window.dagflowMarker = 7`)
		browsertest.Do(t, ctx, "fill the trigger form",
			chromedp.Navigate(base+"/workflows/order"),
			chromedp.SetValue(`#t-input`, `{"order_id":"form-1","customer":"bob@example.com","sku":"SKU-7","quantity":1,"total":50}`),
			chromedp.SendKeys(`#t-key`, "form-order-1"),
			chromedp.Click(`#trigger-run`, chromedp.NodeVisible),
		)
		browsertest.WaitJS(t, ctx, "the run page", `location.pathname.startsWith('/runs/') && !!document.getElementById('run-status')`)
		path := browsertest.Eval[string](t, ctx, `location.pathname`)
		id := strings.TrimPrefix(path, "/runs/")
		browsertest.WaitJS(t, list, "the new run in the list, live", fmt.Sprintf(`!!document.querySelector('tr[data-run="%s"]') && window.dagflowMarker === 7`, id))
		if key := browsertest.Eval[string](t, list, fmt.Sprintf(`document.querySelector('tr[data-run="%s"]').textContent`, id)); !strings.Contains(key, "form-order-1") {
			t.Errorf("the listed run does not show its idempotency key: %q", key)
		}
	})

	t.Run("overview", func(t *testing.T) {
		browsertest.Do(t, ctx, "open the overview", chromedp.Navigate(base+"/"))
		browsertest.WaitJS(t, ctx, "the charts", `document.querySelectorAll('figure.chart').length === 5`)
		browsertest.Screenshot(t, ctx, "overview", 1280)
		browsertest.DarkMode(t, ctx, true)
		browsertest.Screenshot(t, ctx, "overview-dark", 1280)
		browsertest.DarkMode(t, ctx, false)
	})

	t.Run("read session", func(t *testing.T) {
		failed := devOrder(t, base, order("read-1", map[string]any{"fail_step": "reserve"}))
		// A key turns keyless access off within a second.
		resp, err := http.Post(base+"/v1/api-keys", "application/json", strings.NewReader(`{"name":"viewer","scope":"read"}`))
		if err != nil {
			t.Fatal(err)
		}
		var created struct {
			Secret string `json:"secret"`
		}
		json.NewDecoder(resp.Body).Decode(&created)
		resp.Body.Close()
		if created.Secret == "" {
			t.Fatalf("POST /v1/api-keys: %d, no secret", resp.StatusCode)
		}
		testenv.Eventually(t, 30*time.Second, func() bool {
			r, err := http.Get(base + "/v1/runs")
			if err != nil {
				return false
			}
			r.Body.Close()
			return r.StatusCode == http.StatusUnauthorized
		}, "keyless access still open after a key was created")
		browsertest.Do(t, ctx, "open the run", chromedp.Navigate(base+"/runs/"+failed))
		browsertest.WaitJS(t, ctx, "the login form", `location.pathname === '/login' && !!document.getElementById('key')`)
		browsertest.Do(t, ctx, "log in",
			chromedp.SetValue(`#key`, created.Secret),
			chromedp.Submit(`#key`),
		)
		browsertest.WaitJS(t, ctx, "the failed run", `location.pathname === '/runs/`+failed+`' && document.getElementById('run-status')?.textContent === 'failed'`)
		const actions = `document.querySelectorAll('button.act, #trigger-run, #retry-step, #retry-run, #cancel-run, input[name=id], input[name=item]').length`
		for _, p := range []string{"/runs/" + failed + "?step=reserve", "/runs", "/dead-letters", "/workflows/order", "/schedules"} {
			browsertest.Do(t, ctx, "open "+p, chromedp.Navigate(base+p))
			browsertest.WaitJS(t, ctx, p, `document.readyState === 'complete' && !!document.getElementById('live')`)
			if n := browsertest.Eval[int](t, ctx, actions); n != 0 {
				t.Errorf("%s shows %d action controls to a read session", p, n)
			}
		}
		forged := fmt.Sprintf(`fetch('/runs/%s/retry', {method: 'POST', headers: {'X-CSRF-Token': document.querySelector('input[name=csrf]').value}}).then(r => r.status)`, failed)
		if status := browsertest.EvalAwait[int](t, ctx, forged); status != http.StatusForbidden {
			t.Errorf("a forged POST from the read session's page, with its CSRF token: %d, want 403", status)
		}
		if status := browsertest.EvalAwait[int](t, ctx, fmt.Sprintf(`fetch('/runs/%s/retry', {method: 'POST'}).then(r => r.status)`, failed)); status != http.StatusForbidden {
			t.Errorf("a forged POST without a token: %d, want 403", status)
		}
	})
}

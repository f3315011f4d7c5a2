package dashboard_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/internal/browsertest"
	"github.com/dagflow/dagflow/persistence"
)

// TestControlsInBrowser drives issue 26's controls with clicks: a queue
// paused and resumed from the queues page, a failed run's failed steps
// retried, a dead step skipped with an output, and a schedule created
// through the form that then fires. Screenshots: the run page with its
// history and controls, the schedule form with a refusal, the queues
// page with a paused queue.
func TestControlsInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	var broken atomic.Bool
	broken.Store(true)
	e := newEnv(t, envOptions{wfs: []*dag.Workflow{fixableWorkflow(t, &broken)}})
	ctx := browsertest.New(t)
	base := e.srv.URL
	status := `document.getElementById('run-status').textContent`

	t.Run("pause a queue", func(t *testing.T) {
		browsertest.Do(t, ctx, "open the queues", chromedp.Navigate(base+"/queues"))
		browsertest.Do(t, ctx, "click pause", chromedp.Click(`button[data-queue="default"]`, chromedp.NodeVisible))
		browsertest.WaitJS(t, ctx, "the queue shown paused", `!!document.querySelector('[data-queue-state="paused"]') && (document.querySelector('.flash') || {}).textContent?.startsWith('Queue default paused')`)
		id := e.Trigger(t, "fixable", map[string]any{})
		// The page refreshes itself every 5 s: the task waits, counted.
		browsertest.WaitJS(t, ctx, "one ready task in the paused queue", `[...document.querySelectorAll('tbody tr')].some(r => r.cells[0].textContent === 'default' && r.cells[1].textContent === '1' && r.querySelector('[data-queue-state="paused"]'))`)
		browsertest.Screenshot(t, ctx, "queues-paused", 1280)
		if ri, _ := e.Engine.Get(context.Background(), id); ri.Run.Status.Terminal() {
			t.Fatalf("a run of the paused queue finished: %s", ri.Run.Status)
		}
		browsertest.Do(t, ctx, "click resume", chromedp.Click(`button[data-queue="default"]`, chromedp.NodeVisible))
		browsertest.WaitJS(t, ctx, "the queue shown active", `!!document.querySelector('[data-queue-state="active"]')`)
		if ri := e.waitRun(t, id); ri.Run.Status != persistence.RunFailed { // b is broken
			t.Fatalf("after the resume the run is %s, want failed", ri.Run.Status)
		}
	})

	t.Run("retry failed steps", func(t *testing.T) {
		broken.Store(true)
		id := e.Trigger(t, "fixable", map[string]any{})
		e.waitRun(t, id)
		broken.Store(false)
		browsertest.Do(t, ctx, "open the run", chromedp.Navigate(base+"/runs/"+id))
		browsertest.Do(t, ctx, "click retry failed", chromedp.Click(`#retry-run`, chromedp.NodeVisible))
		browsertest.WaitJS(t, ctx, "the run succeeded, live", status+` === 'succeeded'`)
		browsertest.WaitJS(t, ctx, "the retry in the history", `document.querySelector('#history table').textContent.includes('retry failed')`)
	})

	t.Run("skip a dead step", func(t *testing.T) {
		broken.Store(true)
		id := e.Trigger(t, "fixable", map[string]any{})
		e.waitRun(t, id)
		browsertest.Do(t, ctx, "open the dead step", chromedp.Navigate(base+"/runs/"+id+"?step=b"))
		// A rerun from a while b is still broken: the run fails again,
		// and its history has the rerun.
		browsertest.Do(t, ctx, "click rerun from a", chromedp.Navigate(base+"/runs/"+id+"?step=a"), chromedp.Click(`#rerun-step`, chromedp.NodeVisible))
		browsertest.WaitJS(t, ctx, "the rerun in the history", `document.querySelector('#history table')?.textContent.includes('rerun from step')`)
		if ri := e.waitRun(t, id); ri.Run.Status != persistence.RunFailed {
			t.Fatalf("after the rerun the run is %s, want failed again", ri.Run.Status)
		}
		browsertest.Do(t, ctx, "open the dead step", chromedp.Navigate(base+"/runs/"+id+"?step=b"))
		browsertest.Do(t, ctx, "type a bad output", chromedp.SetValue(`#skip-output`, `{"manual":`), chromedp.Click(`#skip-step`, chromedp.NodeVisible))
		browsertest.WaitJS(t, ctx, "the JSON error on the page", `(document.getElementById('action-error') || {}).textContent?.includes('not valid JSON')`)
		browsertest.Do(t, ctx, "type the output", chromedp.SetValue(`#skip-output`, `{"manual": true}`))
		browsertest.Screenshot(t, ctx, "run-controls", 1280)
		browsertest.Do(t, ctx, "click skip", chromedp.Click(`#skip-step`, chromedp.NodeVisible))
		browsertest.WaitJS(t, ctx, "the run succeeded, live", status+` === 'succeeded'`)
		ri := e.waitRun(t, id)
		if c, _ := ri.Step("c"); !strings.Contains(string(c.Output), `{"manual": true}`) {
			t.Errorf("c's output %s does not carry the skip's output", c.Output)
		}
		browsertest.WaitJS(t, ctx, "the skip in the history", `document.querySelector('#history table').textContent.includes('skip')`)
		browsertest.Screenshot(t, ctx, "run-history", 1280)
	})

	t.Run("create a schedule", func(t *testing.T) {
		broken.Store(false)
		browsertest.Do(t, ctx, "open the form", chromedp.Navigate(base+"/schedules"), chromedp.Click(`#new-schedule`, chromedp.NodeVisible))
		browsertest.WaitJS(t, ctx, "the form", `!!document.getElementById('sf-spec')`)
		browsertest.Do(t, ctx, "fill the form",
			chromedp.SendKeys(`#sf-name`, "every-second"),
			chromedp.SendKeys(`#sf-workflow`, "fixable"),
			chromedp.SendKeys(`#sf-spec`, "* * * * * *"),
			chromedp.SendKeys(`#sf-zone`, "Mars/Olympus"),
			chromedp.SetValue(`#sf-input`, `{"from": "the form"}`),
			chromedp.SetValue(`#sf-overlap`, "skip"),
			chromedp.Click(`#sf-save`, chromedp.NodeVisible),
		)
		browsertest.WaitJS(t, ctx, "the API's refusal next to the form", `(document.getElementById('sf-error') || {}).textContent?.includes('Mars/Olympus') && document.getElementById('sf-spec').value === '* * * * * *'`)
		browsertest.Screenshot(t, ctx, "schedule-form", 1280)
		browsertest.Do(t, ctx, "fix the time zone",
			chromedp.SetValue(`#sf-zone`, "Europe/Paris"),
			chromedp.Click(`#sf-save`, chromedp.NodeVisible),
		)
		browsertest.WaitJS(t, ctx, "the schedule in the list", `location.pathname === '/schedules' && !!document.getElementById('s-every-second') && !!document.querySelector('#s-every-second [data-owner="operator"]')`)
		deadline := time.Now().Add(30 * time.Second)
		for {
			ticks, err := e.Engine.ScheduleHistory(context.Background(), "every-second", 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(ticks) > 0 && ticks[0].RunID != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the schedule made through the form has not fired in 30 s: %+v", ticks)
			}
			time.Sleep(200 * time.Millisecond)
		}
		browsertest.Do(t, ctx, "reload the schedules", chromedp.Navigate(base+"/schedules"))
		browsertest.WaitJS(t, ctx, "a fired tick with its run", `!!document.querySelector('#s-every-second .ticks a')`)
		browsertest.Screenshot(t, ctx, "schedules", 1280)
	})
}

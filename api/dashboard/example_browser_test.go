package dashboard_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/internal/browsertest"
)

// TestTriggerFormFirstClickInBrowser: on a workflow whose condition reads
// input.total, "Start run" clicked at once, on the form as it comes,
// starts a run that succeeds (the form holds the example input, not {}).
func TestTriggerFormFirstClickInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	e := newEnv(t, envOptions{wfs: []*dag.Workflow{pointsWorkflow(t)}})
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, "open the workflow", chromedp.Navigate(e.srv.URL+"/workflows/order"))
	browsertest.WaitJS(t, ctx, "the example in the form", `JSON.parse(document.getElementById('t-input').value).total === 120`)
	browsertest.WaitJS(t, ctx, "the schema folded", `!document.getElementById('t-schema').open`)
	browsertest.Do(t, ctx, "click start run", chromedp.Click(`#trigger-run`, chromedp.NodeVisible))
	browsertest.WaitJS(t, ctx, "the run succeeded", `(document.getElementById('run-status') || {}).textContent === 'succeeded'`)
}

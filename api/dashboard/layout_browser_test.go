package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/internal/browsertest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// Step names of the ledger workflow: 64 characters (the longest a name
// may be) and 35.
const (
	longStep  = "reconcile_the_ledger_with_the_settlement_report_of_each_provider"
	finStep   = "notify_the_finance_team_by_mail_now"
	ledgerWhy = "input.total >= 100"
)

// ledgerWorkflow is prepare -> longStep (compensable, when total >= 100)
// -> finStep, which fails for good when the input says "fail". Each
// handler takes 120 ms, so that boxes show a duration.
func ledgerWorkflow(t testing.TB) *dag.Workflow {
	t.Helper()
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		time.Sleep(120 * time.Millisecond)
		var in struct {
			Fail bool `json:"fail"`
		}
		if err := json.Unmarshal(sc.Input, &in); err != nil {
			return nil, steps.Permanent(err)
		}
		if in.Fail && sc.Step == finStep {
			return nil, steps.Permanent(errors.New("the mail server refused"))
		}
		return json.RawMessage(`{}`), nil
	})
	w, err := dag.New("ledger").
		Step("prepare", h).
		Step(longStep, h, dag.After("prepare"), dag.When(ledgerWhy), dag.Compensate(h)).
		Step(finStep, h, dag.After(longStep)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// labelCheck measures, in the page, every text of every DAG box against
// the box's rect (getBoundingClientRect: what is on screen), and joins
// each box's name lines.
const labelCheck = `(() => {
  const out = {texts: 0, bad: [], names: {}, subs: {}, whens: {}};
  document.querySelectorAll('svg.dag g.node').forEach(g => {
    const r = g.querySelector('rect').getBoundingClientRect();
    const step = g.dataset.step;
    out.names[step] = [...g.querySelectorAll('text.name')].map(t => t.textContent).join('');
    out.subs[step] = [...g.querySelectorAll('text.sub')].map(t => t.textContent).join('');
    out.whens[step] = [...g.querySelectorAll('text.when')].map(t => t.textContent).join('');
    g.querySelectorAll('text').forEach(t => {
      if (!t.textContent) { return; }
      out.texts++;
      const b = t.getBoundingClientRect();
      if (b.left < r.left + 2 || b.right > r.right - 2 || b.top < r.top || b.bottom > r.bottom) {
        out.bad.push(step + ': "' + t.textContent + '" spans x ' + b.left.toFixed(1) + '..' + b.right.toFixed(1) + ' y ' + b.top.toFixed(1) + '..' + b.bottom.toFixed(1) +
          ', its box x ' + r.left.toFixed(1) + '..' + r.right.toFixed(1) + ' y ' + r.top.toFixed(1) + '..' + r.bottom.toFixed(1));
      }
    });
  });
  return out;
})()`

// compensatedX2 is the longest status line of the order run: a step
// compensated after one attempt, and how long it took.
var compensatedX2 = regexp.MustCompile(`^compensated · ×2 · [0-9.]+(ms|s)$`)

type labels struct {
	Texts int               `json:"texts"`
	Bad   []string          `json:"bad"`
	Names map[string]string `json:"names"`
	Subs  map[string]string `json:"subs"`
	Whens map[string]string `json:"whens"`
}

// open sets the viewport, opens path and waits for its DAG.
func open(t *testing.T, ctx context.Context, base, path string, width int64) {
	t.Helper()
	browsertest.Do(t, ctx, "open "+path, chromedp.EmulateViewport(width, 900), chromedp.Navigate(base+path))
	browsertest.WaitJS(t, ctx, "the DAG of "+path, `document.readyState === 'complete' && document.querySelectorAll('svg.dag g.node').length > 0 && document.fonts.status === 'loaded'`)
}

// TestGraphLabelsFitTheirBoxes: at 1280 and 390 px, on the order
// workflow's page, a compensated order run's (boxes saying
// "compensated · ×2 · 1xxms"), and the pages of a workflow with a
// 64-character step name, every label of every box lies inside its box,
// step names are whole (wrapped, not cut), and a step's when condition
// is drawn in its box.
func TestGraphLabelsFitTheirBoxes(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	svc := orderflow.NewServices()
	svc.Delay = 150 * time.Millisecond
	order, err := svc.Workflow("order")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{wfs: []*dag.Workflow{order, ledgerWorkflow(t)}})
	ctx := browsertest.New(t)
	comp := e.Trigger(t, "order", orderflow.Order{OrderID: "o-1", Customer: "ada@example.com", SKU: "SKU-42", Quantity: 2, Total: 150, FailStep: "ship"})
	led := e.Trigger(t, "ledger", map[string]any{"total": 150, "fail": true})
	for _, id := range []string{comp, led} {
		if ri := e.waitRun(t, id); ri.Run.Status != persistence.RunCompensated {
			t.Fatalf("run %s of %s is %s, want compensated", id, ri.Run.Workflow, ri.Run.Status)
		}
	}
	pages := []struct{ name, path, when, comp string }{
		{"order-workflow", "/workflows/order", "points", ""},
		{"order-run", "/runs/" + comp, "points", "reserve"},
		{"ledger-workflow", "/workflows/ledger", longStep, ""},
		{"ledger-run", "/runs/" + led, longStep, longStep},
	}
	for _, width := range []int64{1280, 390} {
		for _, p := range pages {
			t.Run(fmt.Sprintf("%s-%d", p.name, width), func(t *testing.T) {
				open(t, ctx, e.srv.URL, p.path, width)
				got := browsertest.Eval[labels](t, ctx, labelCheck)
				if got.Texts < 4 {
					t.Fatalf("%d labels measured, want every box's", got.Texts)
				}
				for _, b := range got.Bad {
					t.Errorf("a label runs past its box: %s", b)
				}
				for step, name := range got.Names {
					if name != step {
						t.Errorf("the box of %q says %q", step, name)
					}
				}
				if w := got.Whens[p.when]; w != "when: "+ledgerWhy {
					t.Errorf("the box of %s shows when %q, want %q", p.when, w, "when: "+ledgerWhy)
				}
				if p.comp != "" && !compensatedX2.MatchString(got.Subs[p.comp]) {
					t.Errorf("the box of %s says %q, want compensated · ×2 · a duration", p.comp, got.Subs[p.comp])
				}
				browsertest.Screenshot(t, ctx, p.name+"-"+fmt.Sprint(width), width)
			})
		}
	}
}

package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
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
				browsertest.ScreenshotElement(t, ctx, p.name+"-dag-"+fmt.Sprint(width), "svg.dag")
				browsertest.Screenshot(t, ctx, p.name+"-"+fmt.Sprint(width), width)
			})
		}
	}
}

// reach measures, in the page, the buttons outside the viewport, how
// wide the page is, and the DAG's scroll container and hint.
const reach = `(() => {
  const vw = document.documentElement.clientWidth;
  const off = [...document.querySelectorAll('button, a.button')].filter(b => b.offsetParent !== null).map(b => [b, b.getBoundingClientRect()])
    .filter(([b, r]) => r.left < 0 || r.right > vw).map(([b, r]) => (b.id || b.textContent.trim()) + ' at x ' + r.left.toFixed(0) + '..' + r.right.toFixed(0));
  const wrap = document.querySelector('.svgwrap');
  const hint = document.querySelector('.scroll-hint');
  const hr = hint ? hint.getBoundingClientRect() : null;
  return {vw: vw, page: document.documentElement.scrollWidth, off: off,
    overflows: !!wrap && wrap.scrollWidth > wrap.clientWidth + 1,
    hint: !!hr && hr.width > 0 && hr.height > 0 && getComputedStyle(hint).visibility !== 'hidden' && hr.left >= 0 && hr.right <= vw};
})()`

type reachInfo struct {
	VW        float64  `json:"vw"`
	Page      float64  `json:"page"`
	Off       []string `json:"off"`
	Overflows bool     `json:"overflows"`
	Hint      bool     `json:"hint"`
}

// TestNarrowPagesKeepActionsAndGraphReachable: at 390 px no button of a
// run page (run and step actions), a workflow page or the schedules
// page lies outside the viewport and the page does not scroll sideways;
// the DAG scrolls in its own box, which says so when it overflows (and
// only then: at 1280 px the order workflow fits, and no hint shows), and
// scrolled to its end it shows ship.
func TestNarrowPagesKeepActionsAndGraphReachable(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	svc := orderflow.NewServices()
	order, err := svc.Workflow("order")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{wfs: []*dag.Workflow{order}})
	ctx := browsertest.New(t)
	failed := e.Trigger(t, "order", orderflow.Order{OrderID: "o-2", Total: 150, FailStep: "ship"})
	e.waitRun(t, failed)
	paused := e.Trigger(t, "order", orderflow.Order{OrderID: "o-3", Total: 150}, engine.IdempotencyKey("an-idempotency-key-long-enough-to-need-a-wrap-on-a-phone-0001"))
	if err := e.Engine.PauseRun(context.Background(), paused); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := e.Store.ScheduleUpsert(context.Background(), persistence.Schedule{
		Name: "nightly", Spec: "0 3 * * *", Workflow: "order", Input: []byte(`{}`),
		Overlap: persistence.OverlapAllow, CatchUp: persistence.CatchUpNone, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	e.waitRun(t, e.Trigger(t, "order", orderflow.Order{OrderID: "o-4", Total: 150, FailStep: "reserve"}))
	for _, p := range []string{"/runs/" + failed + "?step=ship", "/runs/" + paused, "/workflows/order", "/schedules", "/dead-letters", "/runs"} {
		t.Run(p, func(t *testing.T) {
			browsertest.Do(t, ctx, "open "+p, chromedp.EmulateViewport(390, 900), chromedp.Navigate(e.srv.URL+p))
			browsertest.WaitJS(t, ctx, p, `document.readyState === 'complete'`)
			got := browsertest.Eval[reachInfo](t, ctx, reach)
			for _, o := range got.Off {
				t.Errorf("at 390 px a button is off-screen: %s (viewport %.0f)", o, got.VW)
			}
			if got.Page > got.VW {
				t.Errorf("at 390 px the page is %.0f px wide", got.Page)
			}
			browsertest.Screenshot(t, ctx, "narrow"+strings.ReplaceAll(strings.SplitN(p, "?", 2)[0], "/", "-"), 390)
			if strings.HasPrefix(p, "/runs/") || strings.HasPrefix(p, "/workflows/") {
				if !got.Overflows || !got.Hint {
					t.Errorf("at 390 px the DAG overflows its box: %v; the hint shows: %v; want both", got.Overflows, got.Hint)
				}
				end := browsertest.Eval[bool](t, ctx, `(() => { const w = document.querySelector('.svgwrap'); w.scrollLeft = w.scrollWidth;
					const r = document.querySelector('g.node[data-step="ship"] rect').getBoundingClientRect(); return r.left >= 0 && r.right <= document.documentElement.clientWidth; })()`)
				if !end {
					t.Error("scrolled to its end, the DAG does not show ship")
				}
			}
		})
	}
	browsertest.Do(t, ctx, "open the workflow wide", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(e.srv.URL+"/workflows/order"))
	browsertest.WaitJS(t, ctx, "the workflow", `document.readyState === 'complete'`)
	if got := browsertest.Eval[reachInfo](t, ctx, reach); got.Overflows || got.Hint {
		t.Errorf("at 1280 px the order workflow's DAG overflows: %v; the hint shows: %v; want neither", got.Overflows, got.Hint)
	}
}

// TestScheduleActionRowsSpaced: on the schedules page, at 1280 and 390
// px, the Edit/Delete row sits at least 8 px below the Pause/Trigger
// row, and Edit (a link) is as tall as the buttons beside it.
func TestScheduleActionRowsSpaced(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	e := newEnv(t, envOptions{})
	ctx := browsertest.New(t)
	now := time.Now()
	if _, err := e.Store.ScheduleUpsert(context.Background(), persistence.Schedule{
		Name: "nightly", Spec: "0 3 * * *", Workflow: "shop", Input: []byte(`{}`),
		Overlap: persistence.OverlapAllow, CatchUp: persistence.CatchUpNone, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	for _, width := range []int64{1280, 390} {
		browsertest.Do(t, ctx, "open the schedules", chromedp.EmulateViewport(width, 900), chromedp.Navigate(e.srv.URL+"/schedules"))
		browsertest.WaitJS(t, ctx, "the schedule", `!!document.querySelector('#s-nightly .actions')`)
		got := browsertest.Eval[map[string]float64](t, ctx, `(() => {
			const rows = [...document.querySelectorAll('#s-nightly .actions')];
			const box = el => el.getBoundingClientRect();
			const edit = [...rows[1].querySelectorAll('a, button')];
			return {rows: rows.length, gap: box(rows[1]).top - box(rows[0]).bottom,
				edit: box(edit[0]).height, del: box(edit[1]).height};
		})()`)
		if got["rows"] != 2 {
			t.Fatalf("%.0f action rows, want 2", got["rows"])
		}
		if got["gap"] < 8 {
			t.Errorf("at %d px the Edit/Delete row is %.1f px below Pause/Trigger, want at least 8", width, got["gap"])
		}
		if d := got["edit"] - got["del"]; d > 1 || d < -1 {
			t.Errorf("at %d px Edit is %.1f px tall, Delete %.1f", width, got["edit"], got["del"])
		}
		browsertest.Screenshot(t, ctx, fmt.Sprintf("schedules-%d", width), width)
	}
}

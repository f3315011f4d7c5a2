package dashboard

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// stepRow is a step in the run page's list.
type stepRow struct {
	persistence.StepRun
	Duration time.Duration
}

// stepDetail is the step panel.
type stepDetail struct {
	Step           persistence.StepRun
	Attempts       []persistence.Attempt
	Output         *shownValue
	IdempotencyKey string
	Worker         string
	Needs, After   []string
	Wait           *engine.StepWait
	WaitErr        string
	CanRetry       bool
	// CanRerun offers "rerun from this step", CanSkip "skip with output".
	CanRerun, CanSkip bool
}

// ganttView is the waterfall of a run's attempts.
type ganttView struct {
	Width, Height float64
	Rows          []ganttRow
	Span          time.Duration
	More          int
}

type ganttRow struct {
	Label   string
	Step    string
	Outcome string
	Kind    string
	Y, X, W float64
	Title   string
}

const (
	ganttWidth = 520.0
	ganttLabel = 130.0
	ganttRow_  = 18.0
	ganttMax   = 300
)

// runPage is a run: its DAG, the waterfall of its attempts and the step
// panel of ?step= (by default the step that needs attention).
func (d *Dashboard) runPage(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.showRun(w, r, s, http.StatusOK, r.URL.Query().Get("step"), runForm{})
}

// runForm is what a refused action on the run page shows: the refusal,
// next to the run, and the skip form's output as typed.
type runForm struct {
	Err        string
	SkipOutput string
}

// showRun draws the run page of the request's {id} with status, the
// step panel of sel, and a refused action's form.
func (d *Dashboard) showRun(w http.ResponseWriter, r *http.Request, s *session, status int, sel string, form runForm) error {
	ctx := r.Context()
	id := r.PathValue("id")
	ri, err := d.e.Get(ctx, id)
	if errors.Is(err, persistence.ErrRunNotFound) {
		return &httpError{status: http.StatusNotFound, msg: "There is no run " + truncate(id) + "."}
	}
	if err != nil {
		return err
	}
	run := ri.Run
	plan := d.planOfRun(ctx, run, ri.Steps)
	now := d.cfg.Now()
	states := map[string]nodeState{}
	rows := make([]stepRow, len(ri.Steps))
	for i, st := range ri.Steps {
		var dur time.Duration
		if st.StartedAt != nil {
			end := now
			if st.FinishedAt != nil {
				end = *st.FinishedAt
			}
			dur = end.Sub(*st.StartedAt)
		}
		rows[i] = stepRow{StepRun: st, Duration: dur}
		states[st.Step] = nodeState{Status: string(st.Status), Attempts: st.Attempt + st.CompAttempt, Duration: dur}
	}
	if _, ok := states[sel]; !ok {
		sel = pickStep(ri.Steps)
	}
	undo := run.Status == persistence.RunCompensating || run.Status == persistence.RunCompensated
	base := d.path("/runs/" + urlPathEscape(run.ID))
	g, err := buildGraph(plan, states, func(step string) string { return base + "?step=" + urlQueryEscape(step) + "#step" }, sel, undo)
	if err != nil {
		return err
	}
	detail := d.stepPanel(ctx, ri, plan, sel, s)
	input := show(d.cfg.Redact(Payload{Workflow: run.Workflow, RunID: run.ID, Kind: "input"}, run.Input), d.payloadURL(run.ID, "", "input"))
	data := map[string]any{
		"Run": run, "Steps": rows, "Graph": g, "Gantt": gantt(ri, now), "Detail": detail, "Selected": sel,
		"Input": input, "Output": d.runOutput(ri), "LiveRun": run.ID,
		"CanCancel": !run.Status.Terminal(), "CanRetry": retryable(run.Status) && hasDead(ri.Steps), "RetryRefused": retryRefused(run.Status, ri.Steps),
		"Terminal": run.Status.Terminal(), "Paused": run.PausedAt != nil && !run.Status.Terminal(),
		"History": ri.Actions, "Form": form, "Children": ri.Children,
	}
	d.render(w, r, s, status, "run", "Run "+shorten(run.ID, 13), data)
	return nil
}

// maxOutputRead is the largest run result (built of its final steps'
// outputs) a run page builds to show the start of: a larger one is only
// linked to.
const maxOutputRead = 1 << 20

// runOutput is what the run page shows of a succeeded run's result.
func (d *Dashboard) runOutput(ri engine.RunInfo) *shownValue {
	run := ri.Run
	if run.Status != persistence.RunSucceeded {
		return nil
	}
	url := d.payloadURL(run.ID, "", "output")
	if n := ri.OutputSize(); n > maxOutputRead {
		return tooLarge(n, url)
	}
	return show(d.cfg.Redact(Payload{Workflow: run.Workflow, RunID: run.ID, Kind: "output"}, ri.Output()), url)
}

// retryable reports whether a run in status st may have its dead steps
// retried or skipped (persistence.RunStatus.ActionRefusal: a failed run;
// a compensated one's completed steps were undone).
func retryable(st persistence.RunStatus) bool {
	return st.ActionRefusal(persistence.ActionRetry) == "" && st.ActionRefusal(persistence.ActionSkip) == ""
}

// finishedForRetry reports whether a run in status st may be rerun from
// a step.
func finishedForRetry(st persistence.RunStatus) bool {
	return st.ActionRefusal(persistence.ActionRerun) == ""
}

// retryRefused is why a run with dead steps offers no retry or skip of
// them while a rerun from a step would resume it (a compensated run), or
// "" when that is not so.
func retryRefused(st persistence.RunStatus, sts []persistence.StepRun) string {
	if !hasDead(sts) || retryable(st) || !finishedForRetry(st) {
		return ""
	}
	return st.ActionRefusal(persistence.ActionRetry)
}

func hasDead(sts []persistence.StepRun) bool {
	for _, s := range sts {
		if s.Status == persistence.StepDead {
			return true
		}
	}
	return false
}

// pickStep chooses the step the panel shows first: a dead one, else one
// running or retrying, else one that waits, else the first.
func pickStep(sts []persistence.StepRun) string {
	if len(sts) == 0 {
		return ""
	}
	for _, want := range [][]persistence.StepStatus{
		{persistence.StepDead, persistence.StepCompensationFailed},
		{persistence.StepRunning, persistence.StepRetrying, persistence.StepCompensating, persistence.StepParked},
		{persistence.StepQueued, persistence.StepWaiting},
	} {
		for _, s := range sts {
			for _, st := range want {
				if s.Status == st {
					return s.Step
				}
			}
		}
	}
	return sts[0].Step
}

// planOfRun returns the plan a run follows: its stored definition
// version, else the workflow registered here, else its steps'
// dependencies (all drawn as After).
func (d *Dashboard) planOfRun(ctx context.Context, run persistence.Run, sts []persistence.StepRun) []planStep {
	if run.Definition != "" {
		if def, err := d.e.Definition(ctx, run.Workflow, run.Definition); err == nil && len(def.Definition.Steps) == len(sts) {
			return planOf(def.Definition)
		}
	}
	if w := d.e.Workflow(run.Workflow); w != nil && len(w.Steps()) == len(sts) {
		return planOf(w.Definition())
	}
	return planFromSteps(sts)
}

func (d *Dashboard) stepPanel(ctx context.Context, ri engine.RunInfo, plan []planStep, name string, s *session) *stepDetail {
	st, ok := ri.Step(name)
	if !ok {
		return nil
	}
	det := &stepDetail{Step: st, IdempotencyKey: ri.Run.ID + "/" + st.Step}
	for _, a := range ri.Attempts {
		if a.Step == name {
			det.Attempts = append(det.Attempts, a)
			if a.Worker != "" {
				det.Worker = a.Worker
			}
		}
	}
	for _, p := range plan {
		if p.Name == name {
			for _, dep := range p.Deps {
				if p.Needs[dep] {
					det.Needs = append(det.Needs, dep)
				} else {
					det.After = append(det.After, dep)
				}
			}
		}
	}
	if st.Output != nil {
		det.Output = show(d.cfg.Redact(Payload{Workflow: ri.Run.Workflow, RunID: ri.Run.ID, Step: st.Step, Kind: "output"}, st.Output),
			d.payloadURL(ri.Run.ID, st.Step, "output"))
	}
	switch st.Status {
	case persistence.StepWaiting, persistence.StepQueued, persistence.StepRetrying, persistence.StepRunning, persistence.StepCompensating,
		persistence.StepParked:
		wt, err := d.e.WhyWaiting(ctx, ri.Run.ID, st.Step)
		if err != nil {
			det.WaitErr = err.Error()
		} else {
			det.Wait = &wt
		}
	}
	operate := s.scope.Allows(ScopeOperate)
	det.CanRetry = operate && st.Status == persistence.StepDead && retryable(ri.Run.Status)
	// The store decides what it allows (a refusal is shown on the page);
	// these only hide what a finished run's state rules out.
	det.CanRerun = operate && finishedForRetry(ri.Run.Status)
	det.CanSkip = operate && st.Status == persistence.StepDead && retryable(ri.Run.Status)
	return det
}

// gantt draws every attempt on one time axis, from the run's first
// attempt to its last end (or now).
func gantt(ri engine.RunInfo, now time.Time) ganttView {
	atts := ri.Attempts
	if len(atts) == 0 {
		return ganttView{}
	}
	start, end := atts[0].StartedAt, atts[0].StartedAt
	for _, a := range atts {
		if a.StartedAt.Before(start) {
			start = a.StartedAt
		}
		e := now
		if a.FinishedAt != nil {
			e = *a.FinishedAt
		}
		if e.After(end) {
			end = e
		}
	}
	sorted := append([]persistence.Attempt(nil), atts...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].StartedAt.Before(sorted[j].StartedAt) })
	v := ganttView{Width: ganttWidth, Span: end.Sub(start)}
	if len(sorted) > ganttMax {
		v.More = len(sorted) - ganttMax
		sorted = sorted[:ganttMax]
	}
	span := float64(max(end.Sub(start), time.Millisecond))
	scale := (ganttWidth - ganttLabel - 8) / span
	for i, a := range sorted {
		e := now
		if a.FinishedAt != nil {
			e = *a.FinishedAt
		}
		x := ganttLabel + float64(a.StartedAt.Sub(start))*scale
		wd := max(float64(e.Sub(a.StartedAt))*scale, 2)
		label := a.Step + " #" + itoa(a.Attempt)
		if a.Kind == persistence.AttemptCompensation {
			label = a.Step + " undo #" + itoa(a.Attempt)
		}
		title := label + ": " + string(a.Outcome) + " in " + fmtDuration(e.Sub(a.StartedAt))
		if a.Worker != "" {
			title += " on " + a.Worker
		}
		v.Rows = append(v.Rows, ganttRow{Label: shorten(label, 22), Step: a.Step, Outcome: string(a.Outcome), Kind: string(a.Kind),
			Y: float64(i) * ganttRow_, X: x, W: wd, Title: title})
	}
	v.Height = float64(len(v.Rows))*ganttRow_ + 4
	return v
}

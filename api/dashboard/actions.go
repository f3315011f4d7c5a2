package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/clip"
	"github.com/dagflow/dagflow/persistence"
)

// maxBulk bounds how many runs or dead letters one bulk action takes.
const maxBulk = 10000

// actionError turns an engine's refusal into a page error that says why.
func actionError(what string, err error) error {
	switch {
	case errors.Is(err, persistence.ErrRunNotFound), errors.Is(err, persistence.ErrStepNotFound), errors.Is(err, persistence.ErrScheduleNotFound):
		return &httpError{status: http.StatusNotFound, msg: what, err: err}
	case errors.Is(err, persistence.ErrRunFinished), errors.Is(err, persistence.ErrInvalidTransition),
		errors.Is(err, engine.ErrRetryRefused):
		return &httpError{status: http.StatusConflict, msg: what, err: err}
	}
	return err
}

func (d *Dashboard) cancelRun(w http.ResponseWriter, r *http.Request, _ *session) error {
	id := r.PathValue("id")
	if err := d.e.Cancel(r.Context(), id); err != nil {
		return actionError("The run cannot be cancelled", err)
	}
	return d.redirect(w, r, "/runs/"+urlPathEscape(id), "Run cancelled.")
}

// refusedOnRun answers an action on the run page the engine refused: a
// refusal it explains (a retry the run's state rules out, a finished
// run) is shown on the run page with 409, the rest as actionError does.
func (d *Dashboard) refusedOnRun(w http.ResponseWriter, r *http.Request, s *session, what, step string, err error, form runForm) error {
	if errors.Is(err, engine.ErrRetryRefused) || errors.Is(err, persistence.ErrRunFinished) || errors.Is(err, persistence.ErrInvalidTransition) {
		form.Err = what + ": " + err.Error()
		return d.showRun(w, r, s, http.StatusConflict, step, form)
	}
	return actionError(what, err)
}

func (d *Dashboard) retryRun(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	steps, err := d.e.RetryRun(r.Context(), id, engine.Actor(s.name))
	if err != nil {
		return d.refusedOnRun(w, r, s, "The failed steps cannot be retried", "", err, runForm{})
	}
	return d.redirect(w, r, "/runs/"+urlPathEscape(id), "Retrying "+strings.Join(steps, ", ")+".")
}

func (d *Dashboard) retryStep(w http.ResponseWriter, r *http.Request, s *session) error {
	id, step := r.PathValue("id"), r.PathValue("step")
	if err := d.e.RetryDead(r.Context(), id, step, engine.Actor(s.name)); err != nil {
		return d.refusedOnRun(w, r, s, "The step cannot be retried", step, err, runForm{})
	}
	return d.redirect(w, r, stepPath(id, step), "Retrying "+step+".")
}

// rerunStep reruns a finished run from a step: the step and everything
// downstream of it (engine.RetryFrom).
func (d *Dashboard) rerunStep(w http.ResponseWriter, r *http.Request, s *session) error {
	id, step := r.PathValue("id"), r.PathValue("step")
	steps, err := d.e.RetryFrom(r.Context(), id, step, engine.Actor(s.name))
	if err != nil {
		return d.refusedOnRun(w, r, s, "The run cannot be rerun from "+step, step, err, runForm{})
	}
	return d.redirect(w, r, stepPath(id, step), "Rerunning "+strings.Join(steps, ", ")+".")
}

// skipStep gives a dead step the output the form holds (JSON; empty for
// none) and resumes the run (engine.SkipStep).
func (d *Dashboard) skipStep(w http.ResponseWriter, r *http.Request, s *session) error {
	id, step := r.PathValue("id"), r.PathValue("step")
	out := strings.TrimSpace(r.PostFormValue("output"))
	form := runForm{SkipOutput: out}
	var output json.RawMessage
	if out != "" {
		if err := json.Unmarshal([]byte(out), new(any)); err != nil {
			form.Err = fmt.Sprintf("The output for step %s is not valid JSON: %v. Nothing was changed.", step, err)
			return d.showRun(w, r, s, http.StatusUnprocessableEntity, step, form)
		}
		output = json.RawMessage(out)
	}
	if err := d.e.SkipStep(r.Context(), id, step, output, engine.Actor(s.name)); err != nil {
		if errors.Is(err, engine.ErrInvalidInput) {
			form.Err = "The output for step " + step + " is refused: " + err.Error()
			return d.showRun(w, r, s, http.StatusUnprocessableEntity, step, form)
		}
		return d.refusedOnRun(w, r, s, "The step cannot be skipped", step, err, form)
	}
	return d.redirect(w, r, stepPath(id, step), "Skipped "+step+"; the run goes on.")
}

// runPaused pauses ({action} "pause") or resumes ("resume") a run.
func (d *Dashboard) runPaused(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	var err error
	msg := ""
	switch r.PathValue("action") {
	case "pause":
		err, msg = d.e.PauseRun(r.Context(), id), "Run paused: no new step of it starts."
	case "resume":
		err, msg = d.e.ResumeRun(r.Context(), id), "Run resumed."
	default:
		return &httpError{status: http.StatusNotFound, msg: "There is no run action " + truncate(r.PathValue("action"))}
	}
	if err != nil {
		return d.refusedOnRun(w, r, s, "The run cannot be "+r.PathValue("action")+"d", "", err, runForm{})
	}
	return d.redirect(w, r, "/runs/"+urlPathEscape(id), msg)
}

// queuePaused pauses ({action} "pause") or resumes ("resume") a queue on
// every node.
func (d *Dashboard) queuePaused(w http.ResponseWriter, r *http.Request, _ *session) error {
	name := r.PathValue("name")
	var err error
	msg := ""
	switch r.PathValue("action") {
	case "pause":
		err, msg = d.e.PauseQueue(r.Context(), name), "Queue "+name+" paused: no node takes its tasks."
	case "resume":
		err, msg = d.e.ResumeQueue(r.Context(), name), "Queue "+name+" resumed."
	default:
		return &httpError{status: http.StatusNotFound, msg: "There is no queue action " + truncate(r.PathValue("action"))}
	}
	if errors.Is(err, engine.ErrInvalidQueue) {
		return &httpError{status: http.StatusBadRequest, msg: "The queue name is not valid", err: err}
	}
	if err != nil {
		return err
	}
	return d.redirect(w, r, "/queues", msg)
}

// stepPath is the run page with a step's panel.
func stepPath(id, step string) string {
	return "/runs/" + urlPathEscape(id) + "?step=" + urlQueryEscape(step) + "#step"
}

// trigger starts a run from the workflow page's form: JSON input and an
// optional idempotency key.
func (d *Dashboard) trigger(w http.ResponseWriter, r *http.Request, s *session) error {
	name := r.PathValue("name")
	input := strings.TrimSpace(r.PostFormValue("input"))
	key := strings.TrimSpace(r.PostFormValue("key"))
	back := func(msg string) error {
		return d.workflowForm(w, r, s, http.StatusUnprocessableEntity, input, msg)
	}
	if input == "" {
		input = "{}"
	}
	if !json.Valid([]byte(input)) {
		return back("The input is not valid JSON.")
	}
	var opts []engine.TriggerOption
	if key != "" {
		opts = append(opts, engine.IdempotencyKey(key))
	}
	id, err := d.e.Trigger(r.Context(), name, json.RawMessage(input), opts...)
	if err != nil {
		var ve *persistence.ValidationError
		switch {
		case errors.Is(err, engine.ErrUnknownWorkflow):
			return &httpError{status: http.StatusNotFound, msg: "There is no workflow " + strconv.Quote(clip.String(name)) + "."}
		case errors.Is(err, engine.ErrInvalidInput), errors.Is(err, persistence.ErrIdempotencyConflict), errors.As(err, &ve),
			errors.Is(err, engine.ErrReservedKey), errors.Is(err, engine.ErrInvalidKey):
			return back(err.Error())
		}
		return err
	}
	return d.redirect(w, r, "/runs/"+urlPathEscape(id), "Run started.")
}

// scheduleAction pauses, resumes, triggers or deletes a schedule.
func (d *Dashboard) scheduleAction(w http.ResponseWriter, r *http.Request, _ *session) error {
	name, action := r.PathValue("name"), r.PathValue("action")
	ctx := r.Context()
	var err error
	msg := ""
	switch action {
	case "pause":
		err, msg = d.e.PauseSchedule(ctx, name), "Schedule "+name+" paused."
	case "resume":
		err, msg = d.e.ResumeSchedule(ctx, name), "Schedule "+name+" resumed."
	case "trigger":
		var id string
		id, err = d.e.TriggerSchedule(ctx, name)
		msg = "Schedule " + name + " triggered: run " + id + "."
	case "delete":
		err, msg = d.e.DeleteSchedule(ctx, name), "Schedule "+name+" deleted."
	default:
		return &httpError{status: http.StatusNotFound, msg: "There is no schedule action " + truncate(action)}
	}
	if err != nil {
		return actionError("Schedule "+name+": "+action, err)
	}
	return d.redirect(w, r, "/schedules", msg)
}

// bulkActionTimeout bounds the time a confirmed bulk action takes; it
// runs on a context a browser's disconnect does not cancel, so it is not
// stopped halfway by a closed tab.
const bulkActionTimeout = 5 * time.Minute

// bulkRuns cancels or retries runs, chosen by selection (id fields) or
// by the runs page's filter (scope=filter). Without confirm=yes it shows
// how many runs it would act on and asks, posting back the ids it
// counted; with it, it acts on those ids (what the page showed, not a
// new scan) and says how many succeeded and which were refused.
func (d *Dashboard) bulkRuns(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := r.ParseForm(); err != nil {
		return &httpError{status: http.StatusBadRequest, msg: "The form cannot be read", err: err}
	}
	action := r.PostForm.Get("action")
	if action != "cancel" && action != "retry" {
		return &httpError{status: http.StatusBadRequest, msg: "Bulk action " + truncate(action) + " is not cancel or retry."}
	}
	f := filterOf(r.PostForm)
	f.Cursor = ""
	byFilter := r.Form.Get("scope") == "filter"
	confirmed := r.PostForm.Get("confirm") == "yes"
	var ids []string
	capped := false
	if byFilter && !confirmed {
		var err error
		ids, capped, err = d.runsMatching(r.Context(), f, action)
		if err != nil {
			return err
		}
	} else {
		ids = r.PostForm["id"]
	}
	if len(ids) > maxBulk {
		ids, capped = ids[:maxBulk], true
	}
	if !confirmed {
		d.render(w, r, s, http.StatusOK, "confirm", "Confirm", map[string]any{
			"Action": action, "Count": len(ids), "Capped": capped, "IDs": ids, "ByFilter": byFilter, "Filter": f,
			"Target": "/runs/bulk", "Back": "/runs?" + f.query(), "What": "runs",
		})
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkActionTimeout)
	defer cancel()
	done, refused, skipped := 0, []string{}, 0
	for i, id := range ids {
		if ctx.Err() != nil {
			skipped = len(ids) - i
			break
		}
		var err error
		if action == "cancel" {
			err = d.e.Cancel(ctx, id)
		} else {
			_, err = d.e.RetryRun(ctx, id, engine.Actor(s.name))
		}
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s (%v)", shorten(id, 13), firstLine(err.Error())))
			continue
		}
		done++
	}
	msg := fmt.Sprintf("%s: %d of %d runs.", map[string]string{"cancel": "Cancelled", "retry": "Retried"}[action], done, len(ids))
	if len(refused) > 0 {
		msg += fmt.Sprintf(" Refused %d: %s", len(refused), shorten(strings.Join(refused, "; "), 400))
	}
	if skipped > 0 {
		msg += fmt.Sprintf(" Not tried, out of time: %d.", skipped)
	}
	return d.redirect(w, r, "/runs?"+f.query(), msg)
}

// runsMatching lists the runs the runs page's filter shows that action
// can take, at most maxBulk (capped reports more): the eligible statuses
// are part of the store's filter, and a search that names runs by id
// (a whole id, or a prefix of one) finds those runs, as the list does. A
// prefix shared by more runs than the list shows is refused: the action
// would miss some.
func (d *Dashboard) runsMatching(ctx context.Context, f runFilter, action string) (ids []string, capped bool, err error) {
	runs, more, err := d.runsByID(ctx, f.Q)
	if err != nil {
		return nil, false, err
	}
	if more {
		return nil, false, &httpError{status: http.StatusConflict,
			msg: "More than " + itoa(len(runs)) + " runs' ids start with " + strconv.Quote(truncate(f.Q)) + "; type more of the id"}
	}
	if len(runs) > 0 {
		for _, run := range runs {
			if eligible(action, run.Status) {
				ids = append(ids, run.ID)
			}
		}
		return ids, false, nil
	}
	// Not a run id: an idempotency key, as the list does.
	ef, err := f.engineFilter(1000)
	if err != nil {
		return nil, false, err
	}
	var statuses []persistence.RunStatus
	for _, name := range runStatuses {
		st := persistence.RunStatus(name)
		if eligible(action, st) && (len(ef.Status) == 0 || ef.Status[0] == st) {
			statuses = append(statuses, st)
		}
	}
	if len(statuses) == 0 {
		return nil, false, nil
	}
	ef.Status = statuses
	for pages := 0; pages < maxBulk/ef.Limit+1; pages++ {
		page, err := d.e.Runs(ctx, ef)
		if err != nil {
			return nil, false, badFilter(err)
		}
		for _, run := range page.Runs {
			if eligible(action, run.Status) {
				ids = append(ids, run.ID)
			}
		}
		if page.NextCursor == "" {
			return ids, len(ids) > maxBulk, nil
		}
		if len(ids) >= maxBulk {
			return ids, true, nil
		}
		ef.Cursor = page.NextCursor
	}
	return ids, true, nil
}

func eligible(action string, st persistence.RunStatus) bool {
	if action == "cancel" {
		return !st.Terminal()
	}
	return st.ActionRefusal(persistence.ActionRetry) == ""
}

// bulkDeadLetters retries or discards dead letters named "run/step",
// one or many (item fields), after a confirmation showing the count.
func (d *Dashboard) bulkDeadLetters(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := r.ParseForm(); err != nil {
		return &httpError{status: http.StatusBadRequest, msg: "The form cannot be read", err: err}
	}
	action := r.PostForm.Get("action")
	items := r.PostForm["item"]
	if only := r.URL.Query().Get("only"); only != "" {
		// One row's own button.
		action, items = r.URL.Query().Get("action"), []string{only}
	}
	if action != "retry" && action != "discard" {
		return &httpError{status: http.StatusBadRequest, msg: "Dead-letter action " + truncate(action) + " is not retry or discard."}
	}
	if len(items) > maxBulk {
		items = items[:maxBulk]
	}
	if len(items) > 1 && r.PostForm.Get("confirm") != "yes" {
		d.render(w, r, s, http.StatusOK, "confirm", "Confirm", map[string]any{
			"Action": action, "Count": len(items), "IDs": items, "Target": "/dead-letters/bulk", "Back": "/dead-letters",
			"What": "dead letters", "Items": true,
		})
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkActionTimeout)
	defer cancel()
	done, refused, skipped := 0, []string{}, 0
	for i, it := range items {
		if ctx.Err() != nil {
			skipped = len(items) - i
			break
		}
		run, step, ok := strings.Cut(it, "/")
		if !ok {
			refused = append(refused, truncate(it)+" (not run/step)")
			continue
		}
		var err error
		if action == "retry" {
			err = d.e.RetryDead(ctx, run, step, engine.Actor(s.name))
		} else {
			err = d.e.DiscardDead(ctx, run, step)
		}
		var rr *engine.RetryRefusedError
		if errors.As(err, &rr) {
			err = errors.New(rr.Reason) // the item names its run and step
		}
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s/%s (%v)", shorten(run, 13), step, firstLine(err.Error())))
			continue
		}
		done++
	}
	msg := fmt.Sprintf("%s: %d of %d dead letters.", map[string]string{"retry": "Retried", "discard": "Discarded"}[action], done, len(items))
	if len(refused) > 0 {
		msg += fmt.Sprintf(" Refused %d: %s", len(refused), shorten(strings.Join(refused, "; "), 400))
	}
	if skipped > 0 {
		msg += fmt.Sprintf(" Not tried, out of time: %d.", skipped)
	}
	back := r.PostForm.Get("back")
	if !localPath(back) {
		back = "/dead-letters"
	}
	return d.redirect(w, r, back, msg)
}

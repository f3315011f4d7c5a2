package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// scheduleForm is the schedule form's page: a new schedule, or an
// existing one's fields to edit, with the engine's refusal when a POST
// was refused.
type scheduleForm struct {
	Edit                       bool
	Name, Workflow, Spec, Zone string
	Input                      string
	Overlap, CatchUp, Window   string
	Owner                      string
	Err                        string
	Workflows                  []string
	Overlaps, CatchUps         []string
}

func (d *Dashboard) renderScheduleForm(w http.ResponseWriter, r *http.Request, s *session, status int, f scheduleForm) error {
	f.Workflows = d.e.Workflows()
	f.Overlaps = []string{persistence.OverlapAllow, persistence.OverlapSkip, persistence.OverlapBufferOne}
	f.CatchUps = []string{persistence.CatchUpLatest, persistence.CatchUpNone, persistence.CatchUpAll}
	title := "New schedule"
	if f.Edit {
		title = "Edit schedule " + f.Name
	}
	d.render(w, r, s, status, "schedule", title, f)
	return nil
}

// newSchedulePage is the empty form of a new schedule.
func (d *Dashboard) newSchedulePage(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.renderScheduleForm(w, r, s, http.StatusOK, scheduleForm{Input: "{}", Overlap: persistence.OverlapAllow, CatchUp: persistence.CatchUpLatest})
}

// editSchedulePage is the form with a schedule's stored fields.
func (d *Dashboard) editSchedulePage(w http.ResponseWriter, r *http.Request, s *session) error {
	name := r.PathValue("name")
	sc, err := d.e.GetSchedule(r.Context(), name)
	if err != nil {
		return actionError("There is no schedule "+truncate(name), err)
	}
	if sc.PayloadError != "" {
		// An empty input field would overwrite the stored one on save.
		return &httpError{status: http.StatusConflict, msg: "The input of schedule " + truncate(name) +
			" cannot be read (" + sc.PayloadError + "), so it cannot be edited here; give this server the key it was sealed under."}
	}
	f := scheduleForm{Edit: true, Name: sc.Name, Workflow: sc.Workflow, Spec: sc.Spec, Zone: sc.TimeZone,
		Overlap: sc.Overlap, CatchUp: sc.CatchUp, Owner: sc.Owner}
	if f.Owner == "" {
		f.Owner = persistence.OwnerCode
	}
	if sc.CatchUpWindow > 0 {
		f.Window = sc.CatchUpWindow.String()
	}
	if len(sc.Input) > 0 {
		f.Input = prettyJSON(sc.Input)
	}
	return d.renderScheduleForm(w, r, s, http.StatusOK, f)
}

// scheduleFields reads the form's fields; a field that cannot be read
// (input that is not JSON, a window that is not a duration) gives bad, a
// message naming it.
func scheduleFields(r *http.Request) (f scheduleForm, input json.RawMessage, window time.Duration, bad string) {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	f = scheduleForm{Name: v("name"), Workflow: v("workflow"), Spec: v("spec"), Zone: v("zone"), Input: v("input"),
		Overlap: v("overlap"), CatchUp: v("catch_up"), Window: v("window")}
	if f.Input != "" && f.Input != "null" {
		if jerr := json.Unmarshal([]byte(f.Input), new(any)); jerr != nil {
			return f, nil, 0, fmt.Sprintf("The input is not valid JSON: %v.", jerr)
		}
		input = json.RawMessage(f.Input)
	}
	if f.Window != "" {
		var err error
		window, err = time.ParseDuration(f.Window)
		if err != nil || window < 0 {
			return f, nil, 0, fmt.Sprintf("The catch-up window %q is not a duration such as 30m or 6h.", truncate(f.Window))
		}
	}
	return f, input, window, ""
}

// scheduleRefused reports whether err is the engine refusing what the
// form holds (shown next to the form) rather than failing.
func scheduleRefused(err error) bool {
	var ve *persistence.ValidationError
	return errors.Is(err, engine.ErrInvalidSchedule) || errors.Is(err, persistence.ErrScheduleExists) ||
		errors.Is(err, engine.ErrInvalidInput) || errors.As(err, &ve)
}

// createSchedule stores a new schedule from the form; the engine's
// refusal is shown next to the form (422) with what was typed.
func (d *Dashboard) createSchedule(w http.ResponseWriter, r *http.Request, s *session) error {
	f, input, window, bad := scheduleFields(r)
	if bad != "" {
		f.Err = bad
		return d.renderScheduleForm(w, r, s, http.StatusUnprocessableEntity, f)
	}
	_, err := d.e.CreateSchedule(r.Context(), engine.ScheduleDefinition{Name: f.Name, Spec: f.Spec, TimeZone: f.Zone,
		Workflow: f.Workflow, Input: input, Overlap: cron.Overlap(f.Overlap), CatchUp: cron.CatchUp(f.CatchUp), CatchUpWindow: window})
	if err != nil {
		if scheduleRefused(err) {
			f.Err = err.Error()
			return d.renderScheduleForm(w, r, s, http.StatusUnprocessableEntity, f)
		}
		return err
	}
	return d.redirect(w, r, "/schedules#s-"+urlQueryEscape(f.Name), "Schedule "+f.Name+" created.")
}

// editSchedule replaces an existing schedule's fields with the form's,
// which makes it the operator's.
func (d *Dashboard) editSchedule(w http.ResponseWriter, r *http.Request, s *session) error {
	name := r.PathValue("name")
	f, input, window, bad := scheduleFields(r)
	f.Edit, f.Name, f.Owner = true, name, persistence.OwnerOperator
	if bad != "" {
		f.Err = bad
		return d.renderScheduleForm(w, r, s, http.StatusUnprocessableEntity, f)
	}
	overlap, catchUp := cron.Overlap(f.Overlap), cron.CatchUp(f.CatchUp)
	if input == nil {
		input = json.RawMessage("null") // an empty input removes it
	}
	_, err := d.e.EditSchedule(r.Context(), name, engine.ScheduleChange{Spec: &f.Spec, TimeZone: &f.Zone, Workflow: &f.Workflow,
		Input: &input, Overlap: &overlap, CatchUp: &catchUp, CatchUpWindow: &window})
	if err != nil {
		if errors.Is(err, persistence.ErrScheduleNotFound) {
			return actionError("There is no schedule "+truncate(name), err)
		}
		if scheduleRefused(err) {
			f.Err = err.Error()
			return d.renderScheduleForm(w, r, s, http.StatusUnprocessableEntity, f)
		}
		return err
	}
	return d.redirect(w, r, "/schedules#s-"+urlQueryEscape(name), "Schedule "+name+" saved.")
}

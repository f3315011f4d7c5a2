package api

import (
	"net/http"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/clip"
	"github.com/dagflow/dagflow/internal/names"
)

// lastRuns is how many of a schedule's latest ticks a listing shows.
const lastRuns = 5

// listSchedules lists every schedule with its next fire times and its
// last ticks: GET /v1/schedules.
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryValues(r); err != nil {
		return err
	}
	infos, err := s.e.Schedules(r.Context())
	if err != nil {
		return err
	}
	out := client.ScheduleList{Schedules: make([]client.Schedule, 0, len(infos))}
	for _, si := range infos {
		ticks, err := s.e.ScheduleHistory(r.Context(), si.Name, lastRuns)
		if err != nil {
			return err
		}
		out.Schedules = append(out.Schedules, toSchedule(si, ticks))
	}
	return writeJSON(w, http.StatusOK, out)
}

// schedule answers with one schedule as it is now.
func (s *server) schedule(w http.ResponseWriter, r *http.Request, name string) error {
	return s.scheduleAnswer(w, r, name, http.StatusOK)
}

// scheduleAnswer answers with one schedule as it is now, with status.
func (s *server) scheduleAnswer(w http.ResponseWriter, r *http.Request, name string, status int) error {
	si, err := s.e.GetSchedule(r.Context(), name)
	if err != nil {
		return err
	}
	ticks, err := s.e.ScheduleHistory(r.Context(), name, lastRuns)
	if err != nil {
		return err
	}
	return writeJSON(w, status, toSchedule(si, ticks))
}

// pauseSchedule stops a schedule from firing: POST
// /v1/schedules/{name}/pause.
func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	if err := s.e.PauseSchedule(r.Context(), name); err != nil {
		return err
	}
	return s.schedule(w, r, name)
}

// resumeSchedule lets a paused schedule fire again: POST
// /v1/schedules/{name}/resume.
func (s *server) resumeSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	if err := s.e.ResumeSchedule(r.Context(), name); err != nil {
		return err
	}
	return s.schedule(w, r, name)
}

// triggerSchedule starts a run of a schedule's workflow now, outside its
// ticks: POST /v1/schedules/{name}/trigger.
func (s *server) triggerSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	id, err := s.e.TriggerSchedule(r.Context(), name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", s.runURL(id))
	return writeJSON(w, http.StatusCreated, client.ScheduleTriggerResult{Schedule: name, RunID: id})
}

// createSchedule creates a schedule at run time: POST /v1/schedules.
func (s *server) createSchedule(w http.ResponseWriter, r *http.Request) error {
	var body client.ScheduleDefinition
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if !names.Valid(body.Name) {
		return problemf(http.StatusBadRequest, CodeInvalidName, "schedule name %q is not valid: want %s", clip.String(body.Name), names.Rule)
	}
	def, err := scheduleDefinition(body)
	if err != nil {
		return err
	}
	if _, err := s.e.CreateSchedule(r.Context(), def); err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/schedules/"+body.Name)
	return s.scheduleAnswer(w, r, body.Name, http.StatusCreated)
}

// replaceSchedule sets a schedule's whole definition: PUT
// /v1/schedules/{name}.
func (s *server) replaceSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	var body client.ScheduleDefinition
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if body.Name != "" && body.Name != name {
		return problemf(http.StatusBadRequest, CodeInvalidParameter, "the body's name %q is not the path's %q", clip.String(body.Name), name)
	}
	body.Name = name
	def, err := scheduleDefinition(body)
	if err != nil {
		return err
	}
	input := def.Input
	if _, err := s.e.EditSchedule(r.Context(), name, engine.ScheduleChange{Spec: &def.Spec, TimeZone: &def.TimeZone,
		Workflow: &def.Workflow, Input: &input, Overlap: &def.Overlap, CatchUp: &def.CatchUp, CatchUpWindow: &def.CatchUpWindow}); err != nil {
		return err
	}
	return s.schedule(w, r, name)
}

// editSchedule changes the fields given of a schedule: PATCH
// /v1/schedules/{name}.
func (s *server) editSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	var body client.ScheduleEdit
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	var c engine.ScheduleChange
	c.Spec, c.TimeZone, c.Workflow = body.Spec, body.TimeZone, body.Workflow
	if body.Input != nil {
		c.Input = &body.Input
	}
	if body.Overlap != nil {
		o := cron.Overlap(*body.Overlap)
		c.Overlap = &o
	}
	if body.CatchUp != nil {
		cu := cron.CatchUp(*body.CatchUp)
		c.CatchUp = &cu
	}
	if body.CatchUpWindow != nil {
		d, err := catchUpWindow(*body.CatchUpWindow)
		if err != nil {
			return err
		}
		c.CatchUpWindow = &d
	}
	if _, err := s.e.EditSchedule(r.Context(), name, c); err != nil {
		return err
	}
	return s.schedule(w, r, name)
}

// deleteSchedule deletes a schedule on every node: DELETE
// /v1/schedules/{name}.
func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	if err := s.e.DeleteSchedule(r.Context(), name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// scheduleDefinition reads a create or replace body.
func scheduleDefinition(b client.ScheduleDefinition) (engine.ScheduleDefinition, error) {
	window, err := catchUpWindow(b.CatchUpWindow)
	if err != nil {
		return engine.ScheduleDefinition{}, err
	}
	if b.TimeZone == "UTC" {
		b.TimeZone = ""
	}
	if b.Overlap == "" {
		b.Overlap = string(cron.OverlapAllow)
	}
	if b.CatchUp == "" {
		b.CatchUp = string(cron.CatchUpLatest)
	}
	return engine.ScheduleDefinition{Name: b.Name, Spec: b.Spec, TimeZone: b.TimeZone, Workflow: b.Workflow,
		Input: b.Input, Overlap: cron.Overlap(b.Overlap), CatchUp: cron.CatchUp(b.CatchUp), CatchUpWindow: window}, nil
}

func catchUpWindow(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, problemf(http.StatusBadRequest, CodeInvalidParameter, "catch_up_window %q is not a duration of zero or more (like \"6h\")", clip.String(v))
	}
	return d, nil
}

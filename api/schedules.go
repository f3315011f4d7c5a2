package api

import (
	"net/http"

	"github.com/dagflow/dagflow/api/client"
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
	si, err := s.e.GetSchedule(r.Context(), name)
	if err != nil {
		return err
	}
	ticks, err := s.e.ScheduleHistory(r.Context(), name, lastRuns)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toSchedule(si, ticks))
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

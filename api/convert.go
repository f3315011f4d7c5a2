package api

import (
	"encoding/json"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// The conversions from the engine's records to the API's JSON bodies.

// rawJSON returns a stored JSON payload as it is, or JSON null when empty.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func toRun(r persistence.Run) client.Run {
	in, inRef := inline(r.Input, runPayloadPath(r.ID, "input"))
	out, outRef := inline(r.Output, runPayloadPath(r.ID, "output"))
	return client.Run{
		ID:             r.ID,
		Workflow:       r.Workflow,
		Version:        r.Version,
		Status:         string(r.Status),
		Input:          in,
		InputRef:       inRef,
		Output:         out,
		OutputRef:      outRef,
		Error:          r.Error,
		Definition:     r.Definition,
		IdempotencyKey: r.IdempotencyKey,
		Metadata:       r.Metadata,
		Schedule:       r.Schedule,
		ScheduledTick:  utcPtr(r.ScheduledTick),
		StartAt:        utc(r.StartAt),
		CreatedAt:      utc(r.CreatedAt),
		StartedAt:      utcPtr(r.StartedAt),
		FinishedAt:     utcPtr(r.FinishedAt),
		UpdatedAt:      utc(r.UpdatedAt),
		Priority:       r.Priority,
		PausedAt:       utcPtr(r.PausedAt),
		PayloadError:   r.PayloadError,
	}
}

func toStep(s persistence.StepRun) client.Step {
	deps := s.Deps
	if deps == nil {
		deps = []string{}
	}
	out, outRef := inline(s.Output, stepOutputPath(s.RunID, s.Step))
	return client.Step{
		RunID:          s.RunID,
		Step:           s.Step,
		Queue:          s.Queue,
		Status:         string(s.Status),
		Deps:           deps,
		Attempt:        s.Attempt,
		MaxAttempts:    s.MaxAttempts,
		CompAttempt:    s.CompAttempt,
		Output:         out,
		OutputRef:      outRef,
		Error:          s.Error,
		LeaseExpiresAt: utcPtr(s.LeaseExpiresAt),
		NextAttemptAt:  utcPtr(s.NextAttemptAt),
		QueuedAt:       utcPtr(s.QueuedAt),
		StartedAt:      utcPtr(s.StartedAt),
		FinishedAt:     utcPtr(s.FinishedAt),
		UpdatedAt:      utc(s.UpdatedAt),
		PayloadError:   s.PayloadError,
	}
}

func toSteps(ss []persistence.StepRun) []client.Step {
	out := make([]client.Step, len(ss))
	for i, s := range ss {
		out[i] = toStep(s)
	}
	return out
}

func toAttempt(a persistence.Attempt) client.Attempt {
	return client.Attempt{
		ID:           a.ID,
		Step:         a.Step,
		Kind:         string(a.Kind),
		Attempt:      a.Attempt,
		Worker:       a.Worker,
		Outcome:      string(a.Outcome),
		Error:        a.Error,
		StartedAt:    utc(a.StartedAt),
		FinishedAt:   utcPtr(a.FinishedAt),
		DurationMS:   float64(a.Duration().Microseconds()) / 1000,
		PayloadError: a.PayloadError,
	}
}

func toRunDetail(info engine.RunInfo) client.RunDetail {
	atts := make([]client.Attempt, len(info.Attempts))
	for i, a := range info.Attempts {
		atts[i] = toAttempt(a)
	}
	acts := make([]client.RunAction, len(info.Actions))
	for i, a := range info.Actions {
		steps := a.Steps
		if steps == nil {
			steps = []string{}
		}
		acts[i] = client.RunAction{Seq: a.Seq, At: utc(a.At), Actor: a.Actor, Action: string(a.Action), Step: a.Step, Steps: steps}
	}
	children := make([]client.ChildRun, len(info.Children))
	for i, c := range info.Children {
		children[i] = client.ChildRun{RunID: c.RunID, Workflow: c.Workflow, Step: c.Step, Status: string(c.Status)}
	}
	out, outRef := runOutput(info)
	d := client.RunDetail{
		Run:       toRun(info.Run),
		Steps:     toSteps(info.Steps),
		Attempts:  atts,
		Actions:   acts,
		Output:    out,
		OutputRef: outRef,
		Children:  children,
	}
	if info.Run.ParentRunID != "" {
		d.Parent = &client.RunParent{RunID: info.Run.ParentRunID, Step: info.Run.ParentStep}
	}
	return d
}

func toSchedule(si engine.ScheduleInfo, ticks []persistence.ScheduleTick) client.Schedule {
	next := make([]time.Time, len(si.Next))
	for i, t := range si.Next {
		next[i] = t.UTC()
	}
	last := make([]client.ScheduleTick, len(ticks))
	for i, t := range ticks {
		last[i] = client.ScheduleTick{Tick: t.Tick.UTC(), Outcome: t.Outcome, RunID: t.RunID, Reason: t.Reason}
	}
	sc := client.Schedule{
		Name:          si.Name,
		Spec:          si.Spec,
		TimeZone:      si.TimeZone,
		Workflow:      si.Workflow,
		Input:         rawJSON(si.Input),
		Overlap:       si.Overlap,
		CatchUp:       si.CatchUp,
		CatchUpWindow: si.CatchUpWindow.String(),
		Paused:        si.Paused,
		Disabled:      si.Disabled,
		LastTick:      utcPtr(si.LastTick),
		Next:          next,
		LastRuns:      last,
		Owner:         si.Owner,
	}
	if sc.TimeZone == "" {
		sc.TimeZone = "UTC"
	}
	if si.Err != nil {
		sc.Error = si.Err.Error()
	}
	sc.PayloadError = si.PayloadError
	return sc
}

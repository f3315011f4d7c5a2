package cron

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Info is a stored schedule with its next fire times.
type Info struct {
	persistence.Schedule
	// Next are the next fire times after now (or after the last tick,
	// when that is later), in the schedule's time zone; empty for a paused
	// or disabled schedule.
	Next []time.Time
	// Err is set when the stored spec or time zone does not parse.
	Err error
	// PayloadError is set, by the engine, when the stored input cannot be
	// decoded (its codec lacks the key): Input is then empty.
	PayloadError string
}

// List returns every stored schedule, by name, with its next n fire
// times.
func (s *Scheduler) List(ctx context.Context, n int) ([]Info, error) {
	list, err := s.cfg.Store.ScheduleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("cron: list schedules: %w", err)
	}
	now := s.cfg.Clock.Now()
	out := make([]Info, len(list))
	for i, sc := range list {
		out[i] = s.info(sc, now, n)
	}
	return out, nil
}

// Get returns one schedule with its next n fire times; an unknown name
// gives an error wrapping persistence.ErrScheduleNotFound.
func (s *Scheduler) Get(ctx context.Context, name string, n int) (Info, error) {
	sc, err := s.cfg.Store.ScheduleGet(ctx, name)
	if err != nil {
		return Info{}, fmt.Errorf("cron: get schedule %q: %w", name, err)
	}
	return s.info(sc, s.cfg.Clock.Now(), n), nil
}

func (s *Scheduler) info(sc persistence.Schedule, now time.Time, n int) Info {
	in := Info{Schedule: sc}
	spec, err := Parse(sc.Name, sc.Spec, sc.TimeZone)
	if err != nil {
		in.Err = err
		return in
	}
	if sc.Paused || sc.Disabled {
		return in
	}
	from := now
	if sc.LastTick != nil && sc.LastTick.After(from) {
		from = *sc.LastTick
	}
	in.Next = spec.NextN(from, n)
	return in
}

// Disable retires a schedule: it no longer fires, and Trigger refuses it,
// until a node declares it again (Sync clears Disabled). Its history is
// kept. It is how an operator stops a schedule removed from the code.
func (s *Scheduler) Disable(ctx context.Context, name string) error {
	yes := true
	if _, err := s.cfg.Store.ScheduleUpdate(ctx, persistence.ScheduleUpdateParams{Name: name, Disabled: &yes, Now: s.cfg.Clock.Now()}); err != nil {
		return fmt.Errorf("cron: disable schedule %q: %w", name, err)
	}
	return nil
}

// Pause stops a schedule from firing until Resume; the ticks in between
// are not caught up.
func (s *Scheduler) Pause(ctx context.Context, name string) error {
	yes := true
	if _, err := s.cfg.Store.ScheduleUpdate(ctx, persistence.ScheduleUpdateParams{Name: name, Paused: &yes, Now: s.cfg.Clock.Now()}); err != nil {
		return fmt.Errorf("cron: pause schedule %q: %w", name, err)
	}
	return nil
}

// Resume lets a paused schedule fire again, from its next tick after now.
func (s *Scheduler) Resume(ctx context.Context, name string) error {
	sc, err := s.cfg.Store.ScheduleGet(ctx, name)
	if err != nil {
		return fmt.Errorf("cron: resume schedule %q: %w", name, err)
	}
	now := s.cfg.Clock.Now()
	if spec, err := Parse(sc.Name, sc.Spec, sc.TimeZone); err == nil {
		// Move the cursor past the pause before unpausing, so that no
		// node takes the paused ticks for missed ones. Losing the race to
		// another node that moved it is fine.
		if p := spec.Prev(now); !p.IsZero() && (sc.LastTick == nil || p.After(*sc.LastTick)) {
			if _, err := s.advance(ctx, name, sc.LastTick, p, now); err != nil {
				return fmt.Errorf("cron: resume schedule %q: %w", name, err)
			}
		}
	}
	no := false
	if _, err := s.cfg.Store.ScheduleUpdate(ctx, persistence.ScheduleUpdateParams{Name: name, Paused: &no, Now: now}); err != nil {
		return fmt.Errorf("cron: resume schedule %q: %w", name, err)
	}
	return nil
}

// ErrDisabled is returned by Trigger for a schedule an operator disabled.
var ErrDisabled = errors.New("cron: schedule is disabled")

// Trigger starts a run of the schedule now, outside its ticks and its
// overlap policy (a paused schedule may be triggered). The run's key is
// "schedule:<name>:manual:<unix nanoseconds>", its tick the current time.
func (s *Scheduler) Trigger(ctx context.Context, name string) (string, error) {
	sc, err := s.cfg.Store.ScheduleGet(ctx, name)
	if err != nil {
		return "", fmt.Errorf("cron: trigger schedule %q: %w", name, err)
	}
	if sc.Disabled {
		return "", fmt.Errorf("%w: %q", ErrDisabled, name)
	}
	now := s.cfg.Clock.Now()
	runID, err := s.cfg.Starter.Start(ctx, StartRequest{Schedule: sc.Name, Workflow: sc.Workflow, Input: sc.Input,
		Tick: now, IdempotencyKey: fmt.Sprintf("schedule:%s:manual:%d", sc.Name, now.UnixNano())})
	if err != nil {
		return "", fmt.Errorf("cron: trigger schedule %q: %w", name, err)
	}
	s.record(ctx, sc.Name, now, persistence.TickFired, runID, "triggered manually", now)
	return runID, nil
}

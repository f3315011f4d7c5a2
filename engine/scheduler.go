package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/persistence"
)

// ErrDuplicateSchedule is returned when a schedule name is declared twice.
var ErrDuplicateSchedule = errors.New("engine: schedule already declared")

// ScheduleInfo is a stored schedule with its next fire times.
type ScheduleInfo = cron.Info

// ScheduleOption sets an option of Schedule.
type ScheduleOption func(*persistence.Schedule)

// TimeZone evaluates the schedule's spec in the named IANA time zone
// ("Europe/Berlin"). Default UTC.
func TimeZone(name string) ScheduleOption {
	return func(s *persistence.Schedule) { s.TimeZone = name }
}

// Overlap sets what a tick does while a run the schedule started is
// unfinished. Default cron.OverlapAllow.
func Overlap(p cron.Overlap) ScheduleOption {
	return func(s *persistence.Schedule) { s.Overlap = string(p) }
}

// CatchUp sets what happens to ticks that no node fired in time (every
// node was down): cron.CatchUpNone drops them, cron.CatchUpLatest starts one
// run for the most recent, cron.CatchUpAll one run for each; the last two
// only for ticks within window of now (zero: no limit). Default
// cron.CatchUpLatest with no limit.
func CatchUp(p cron.CatchUp, window time.Duration) ScheduleOption {
	return func(s *persistence.Schedule) { s.CatchUp = string(p); s.CatchUpWindow = window }
}

// Schedule declares a recurring schedule: every tick of spec (a cron spec,
// see package cron) starts one run of workflow with input, across all
// nodes. Declare schedules before Start, on every node that should fire
// them; Start stores them (a changed declaration updates the stored one,
// keeping its history and paused flag) and disables the stored schedules
// this node no longer declares (they are kept, not deleted). A node that
// declares no schedules leaves the stored ones alone.
//
// name must match ^[A-Za-z][A-Za-z0-9_-]{0,63}$. An invalid spec or time
// zone is a *cron.SpecError naming the schedule and the value.
func (e *Engine) Schedule(name, spec, workflow string, input any, opts ...ScheduleOption) error {
	if err := e.declarable(name); err != nil {
		return err
	}
	raw, err := encodeInput(input)
	if err != nil {
		return fmt.Errorf("engine: schedule %q: %w", name, err)
	}
	sc := persistence.Schedule{
		Name:     name,
		Spec:     spec,
		Workflow: workflow,
		Input:    raw,
		Overlap:  string(cron.OverlapAllow),
		CatchUp:  string(cron.CatchUpLatest),
	}
	for _, opt := range opts {
		opt(&sc)
	}
	return e.declare(sc)
}

// LoadSchedules declares (as Schedule does) the schedules of every *.yaml
// and *.yml file at the root of fsys, in file name order. Keep them in a
// directory of their own beside the workflows (dag.LoadFS reads every
// YAML file of its directory as a workflow). A file holds one top-level
// list:
//
//	schedules:
//	  - name: nightly-settlement   # required
//	    spec: "0 2 * * *"          # required: a cron spec (package cron)
//	    workflow: settlement       # required
//	    time_zone: Europe/Berlin   # default UTC
//	    input: {region: eu}        # any YAML value, passed as JSON
//	    overlap: skip              # allow (default), skip, buffer_one
//	    catch_up: latest           # none, latest (default), all
//	    catch_up_window: 6h        # Go duration; default no limit
//
// Unknown fields, wrong types and invalid values are errors; each is a
// *dag.YAMLError with the file, line and field (several are joined).
// The files are read by cron.LoadSchedules; when any has a problem, no
// schedule is declared.
func (e *Engine) LoadSchedules(fsys fs.FS) error {
	list, err := cron.LoadSchedules(fsys)
	if err != nil {
		return err
	}
	var errs []error
	for _, sc := range list {
		errs = append(errs, e.declare(sc))
	}
	return errors.Join(errs...)
}

// declarable refuses declarations once the engine started.
func (e *Engine) declarable(name string) error {
	if e.state.Load() != 0 {
		if e.stopped() {
			return ErrStopped
		}
		return fmt.Errorf("engine: schedule %q: declare schedules before Start: %w", name, ErrAlreadyStarted)
	}
	return nil
}

// validSchedule is the one check of a schedule's definition, declared
// or created at run time.
func validSchedule(sc persistence.Schedule) error {
	name := sc.Name
	if _, err := cron.Parse(name, sc.Spec, sc.TimeZone); err != nil {
		return err
	}
	if !cron.Overlap(sc.Overlap).Valid() {
		return fmt.Errorf("engine: schedule %q: unknown overlap policy %q (want allow, skip or buffer_one)", name, sc.Overlap)
	}
	if !cron.CatchUp(sc.CatchUp).Valid() {
		return fmt.Errorf("engine: schedule %q: unknown catch-up policy %q (want none, latest or all)", name, sc.CatchUp)
	}
	if sc.CatchUpWindow < 0 {
		return fmt.Errorf("engine: schedule %q: negative catch-up window %v", name, sc.CatchUpWindow)
	}
	if sc.Workflow == "" {
		return fmt.Errorf("engine: schedule %q: no workflow", name)
	}
	return nil
}

// declare validates a schedule and adds it to this node's declarations,
// which Start stores.
func (e *Engine) declare(sc persistence.Schedule) error {
	if err := e.declarable(sc.Name); err != nil {
		return err
	}
	if err := validSchedule(sc); err != nil {
		return err
	}
	name := sc.Name
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	for _, d := range e.schedDecls {
		if d.Name == name {
			return fmt.Errorf("%w: %q", ErrDuplicateSchedule, name)
		}
	}
	e.schedDecls = append(e.schedDecls, sc)
	return nil
}

// scheduler returns the engine's cron scheduler, made on first use (tools
// use it on engines they never start).
func (e *Engine) scheduler() *cron.Scheduler {
	e.schedOnce.Do(func() {
		interval := e.cfg.ScheduleInterval
		if interval <= 0 { // this node fires no schedules; tools pass by hand
			interval = DefaultScheduleInterval
		}
		cfg := cron.Config{
			Store:   e.store,
			Starter: engineStarter{e},
			Clock:   e.clock,
			Logger:  e.log,
			Grace:   max(10*time.Second, 3*interval),
		}
		if e.metrics != nil {
			cfg.OnMissed = e.metrics.scheduleMissedTicks
		}
		s, err := cron.New(cfg)
		if err != nil {
			panic(err) // every required field is set above
		}
		e.sched = s
	})
	return e.sched
}

// syncSchedules stores the declared schedules; Start calls it.
func (e *Engine) syncSchedules(ctx context.Context) error {
	e.schedMu.Lock()
	decls := append([]persistence.Schedule(nil), e.schedDecls...)
	e.schedMu.Unlock()
	for i := range decls {
		if err := e.encodeSchedule(ctx, &decls[i]); err != nil {
			return err
		}
	}
	if err := e.scheduler().Sync(ctx, decls); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	for _, d := range decls { // their missed counters exist at 0 from the start
		e.metrics.scheduleMissedTicks(d.Name, 0)
	}
	return nil
}

// startScheduler starts this node's scheduler loop, unless
// Config.ScheduleInterval is negative; Stop ends it.
func (e *Engine) startScheduler() {
	if e.cfg.ScheduleInterval < 0 {
		return
	}
	interval := e.cfg.ScheduleInterval // withDefaults made a zero the default
	s := e.scheduler()
	e.every(interval, true, func(ctx context.Context) {
		// A node whose clock is off (health.go) would fire ticks early:
		// the others fire them.
		if !e.clockSkewed() && !e.stats.foreignPrefix.Load() {
			if _, err := s.Pass(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("schedule pass failed", "err", err)
			}
		}
	})
}

// FireSchedules evaluates every schedule once now and starts the runs of
// the due ticks, as the scheduler loop does every ScheduleInterval. Tools
// and tests (with a fake clock) may call it directly; passes on many
// nodes at once are safe.
func (e *Engine) FireSchedules(ctx context.Context) (cron.PassResult, error) {
	if e.stopped() {
		return cron.PassResult{}, ErrStopped
	}
	return e.scheduler().Pass(ctx)
}

// scheduleNext is how many next fire times Schedules and GetSchedule give.
const scheduleNext = 5

// Schedules lists the stored schedules, by name, each with its next five
// fire times.
func (e *Engine) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	list, err := e.scheduler().List(ctx, scheduleNext)
	if err != nil {
		return nil, err
	}
	for i := range list {
		e.markSchedule(ctx, &list[i])
	}
	return list, nil
}

// GetSchedule returns one stored schedule with its next five fire times;
// an unknown name gives an error wrapping persistence.ErrScheduleNotFound.
func (e *Engine) GetSchedule(ctx context.Context, name string) (ScheduleInfo, error) {
	si, err := e.scheduler().Get(ctx, name, scheduleNext)
	if err != nil {
		return si, err
	}
	e.markSchedule(ctx, &si)
	return si, nil
}

// ScheduleHistory returns a schedule's latest ticks (fired, skipped,
// buffered), newest first.
func (e *Engine) ScheduleHistory(ctx context.Context, name string, limit int) ([]persistence.ScheduleTick, error) {
	var ticks []persistence.ScheduleTick
	err := e.read(ctx, func(st persistence.Store) (err error) {
		ticks, err = st.ScheduleTickList(ctx, persistence.ScheduleTickListParams{Name: name, Limit: limit})
		return err
	})
	return ticks, err
}

// PauseSchedule stops a schedule from firing, on every node, until
// ResumeSchedule. The ticks in between are not caught up.
func (e *Engine) PauseSchedule(ctx context.Context, name string) error {
	return e.scheduler().Pause(ctx, name)
}

// DisableSchedule retires a schedule on every node: it no longer fires
// and cannot be triggered, until a node declares it again. A schedule is
// never disabled otherwise — not because a node (of an older deploy, say)
// does not declare it.
func (e *Engine) DisableSchedule(ctx context.Context, name string) error {
	return e.scheduler().Disable(ctx, name)
}

// ResumeSchedule lets a paused schedule fire again from its next tick.
func (e *Engine) ResumeSchedule(ctx context.Context, name string) error {
	return e.scheduler().Resume(ctx, name)
}

// TriggerSchedule starts a run of the schedule's workflow now, with the
// schedule's input, whatever its ticks, overlap policy or paused flag say,
// and returns the run's id. The run's idempotency key is
// "schedule:<name>:manual:<unix nanoseconds>".
func (e *Engine) TriggerSchedule(ctx context.Context, name string) (string, error) {
	if e.stopped() {
		return "", ErrStopped
	}
	return e.scheduler().Trigger(ctx, name)
}

// engineStarter is the engine as the scheduler sees it.
type engineStarter struct{ e *Engine }

func (s engineStarter) CanStart(workflow string) bool { return s.e.Workflow(workflow) != nil }

func (s engineStarter) Start(ctx context.Context, r cron.StartRequest) (string, error) {
	plain, err := s.e.decodePayload(ctx, codec.Input, r.Input)
	if err != nil {
		return "", fmt.Errorf("engine: schedule %q: input: %w", r.Schedule, err)
	}
	var input any
	if plain != nil {
		input = json.RawMessage(plain)
	}
	var created bool
	id, err := s.e.Trigger(ctx, r.Workflow, input, IdempotencyKey(r.IdempotencyKey), internalRun(scheduleKeyPrefix+r.Schedule+":"), FromSchedule(r.Schedule, r.Tick), Created(&created))
	if err == nil && created {
		s.e.metrics.scheduleFired(r.Schedule, r.Tick, s.e.clock.Now())
	}
	return id, err
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/internal/jsoncheck"
	"github.com/dagflow/dagflow/persistence"
)

// ErrInvalidSchedule is wrapped by the errors of CreateSchedule and
// EditSchedule for a definition that is refused (spec, time zone,
// policies, input, unknown workflow); nothing is stored.
var ErrInvalidSchedule = errors.New("engine: invalid schedule")

// ScheduleError names the schedule a refused definition is about.
type ScheduleError struct {
	Schedule string
	Err      error
}

func (e *ScheduleError) Error() string {
	msg := e.Err.Error()
	if strings.Contains(msg, strconv.Quote(e.Schedule)) { // the cause names it already
		return msg
	}
	// The engine's own causes (ErrUnknownWorkflow) carry the prefix
	// this message starts with: it is said once.
	return fmt.Sprintf("engine: schedule %q: %s", e.Schedule, strings.TrimPrefix(msg, "engine: "))
}

// Unwrap makes errors.Is(err, ErrInvalidSchedule) and errors.Is/As on
// the cause work.
func (e *ScheduleError) Unwrap() []error { return []error{ErrInvalidSchedule, e.Err} }

// ScheduleDefinition is a schedule an operator creates at run time
// (CreateSchedule). Zero policies mean the defaults of Schedule.
type ScheduleDefinition struct {
	Name     string
	Spec     string
	TimeZone string // IANA name; empty means UTC
	Workflow string
	// Input is the JSON each run gets; nil for none.
	Input         json.RawMessage
	Overlap       cron.Overlap  // default cron.OverlapAllow
	CatchUp       cron.CatchUp  // default cron.CatchUpLatest
	CatchUpWindow time.Duration // zero: no limit
}

// ScheduleChange is an edit of a schedule (EditSchedule): nil fields are
// left as they are.
type ScheduleChange struct {
	Spec     *string
	TimeZone *string
	Workflow *string
	// Input replaces the input; a pointer to nil (or to "null") removes it.
	Input         *json.RawMessage
	Overlap       *cron.Overlap
	CatchUp       *cron.CatchUp
	CatchUpWindow *time.Duration
}

// CreateSchedule stores a new schedule, owned by the operator: every node
// that runs its workflow picks it up within a scheduler pass (a second by
// default) and fires each tick once across the nodes. A node's code never
// overwrites it. A refused definition (spec, time zone, policy, input,
// a workflow no node registered) is an error wrapping ErrInvalidSchedule;
// an existing name wraps persistence.ErrScheduleExists.
func (e *Engine) CreateSchedule(ctx context.Context, d ScheduleDefinition) (ScheduleInfo, error) {
	if e.stopped() {
		return ScheduleInfo{}, ErrStopped
	}
	sc := persistence.Schedule{Name: d.Name, Spec: d.Spec, TimeZone: d.TimeZone, Workflow: d.Workflow,
		Overlap: string(d.Overlap), CatchUp: string(d.CatchUp), CatchUpWindow: d.CatchUpWindow}
	if sc.Overlap == "" {
		sc.Overlap = string(cron.OverlapAllow)
	}
	if sc.CatchUp == "" {
		sc.CatchUp = string(cron.CatchUpLatest)
	}
	if err := e.setScheduleInput(&sc, d.Input); err != nil {
		return ScheduleInfo{}, err
	}
	if err := e.checkSchedule(ctx, sc); err != nil {
		return ScheduleInfo{}, err
	}
	if err := e.encodeSchedule(ctx, &sc); err != nil {
		return ScheduleInfo{}, err
	}
	now := e.clock.Now()
	sc.CreatedAt, sc.UpdatedAt = now, now
	if _, err := e.store.ScheduleCreate(ctx, sc); err != nil {
		return ScheduleInfo{}, scheduleStoreErr(sc.Name, err)
	}
	return e.GetSchedule(ctx, sc.Name)
}

// EditSchedule changes a schedule's definition and makes it the
// operator's: the next pass of every node uses it. A new spec or time
// zone fires from its next tick after the edit (the ticks it would have
// had before are not caught up). Errors as CreateSchedule's; an unknown
// name wraps persistence.ErrScheduleNotFound.
func (e *Engine) EditSchedule(ctx context.Context, name string, c ScheduleChange) (ScheduleInfo, error) {
	if e.stopped() {
		return ScheduleInfo{}, ErrStopped
	}
	sc, err := e.store.ScheduleGet(ctx, name)
	if err != nil {
		return ScheduleInfo{}, fmt.Errorf("engine: edit schedule %q: %w", name, err)
	}
	// Decoded and encoded again: an input stored before the codec was
	// configured is encoded by the edit.
	if err := e.decodeSchedule(ctx, &sc); err != nil {
		return ScheduleInfo{}, err
	}
	old := sc
	if c.Spec != nil {
		sc.Spec = *c.Spec
	}
	if c.TimeZone != nil {
		sc.TimeZone = *c.TimeZone
	}
	if c.Workflow != nil {
		sc.Workflow = *c.Workflow
	}
	if c.Input != nil {
		if err := e.setScheduleInput(&sc, *c.Input); err != nil {
			return ScheduleInfo{}, err
		}
	}
	if c.Overlap != nil {
		sc.Overlap = string(*c.Overlap)
	}
	if c.CatchUp != nil {
		sc.CatchUp = string(*c.CatchUp)
	}
	if c.CatchUpWindow != nil {
		sc.CatchUpWindow = *c.CatchUpWindow
	}
	if err := e.checkSchedule(ctx, sc); err != nil {
		return ScheduleInfo{}, err
	}
	reset := sc.Spec != old.Spec || sc.TimeZone != old.TimeZone
	if err := e.encodeSchedule(ctx, &sc); err != nil {
		return ScheduleInfo{}, err
	}
	if _, err := e.store.ScheduleEdit(ctx, persistence.ScheduleEditParams{Schedule: sc, ResetCursor: reset, Now: e.clock.Now()}); err != nil {
		return ScheduleInfo{}, scheduleStoreErr(name, err)
	}
	return e.GetSchedule(ctx, name)
}

// DeleteSchedule deletes a schedule on every node: it fires no tick after
// their next pass. Its runs and history are kept; a node's code does not
// bring it back (CreateSchedule does). An unknown name wraps
// persistence.ErrScheduleNotFound.
func (e *Engine) DeleteSchedule(ctx context.Context, name string) error {
	if e.stopped() {
		return ErrStopped
	}
	if err := e.store.ScheduleDelete(ctx, persistence.ScheduleDeleteParams{Name: name, Now: e.clock.Now()}); err != nil {
		return fmt.Errorf("engine: delete schedule %q: %w", name, err)
	}
	return nil
}

// setScheduleInput checks and sets a schedule's JSON input.
func (e *Engine) setScheduleInput(sc *persistence.Schedule, in json.RawMessage) error {
	if len(in) == 0 || string(in) == "null" {
		sc.Input = nil
		return nil
	}
	if err := jsoncheck.Check(in); err != nil {
		return &ScheduleError{Schedule: sc.Name, Err: fmt.Errorf("input: %w: %v", ErrInvalidInput, err)}
	}
	sc.Input = append([]byte(nil), in...)
	return nil
}

// checkSchedule refuses a definition before anything is stored: the
// rules of a declared schedule, and a workflow this node registered or
// some node stored the definition of.
func (e *Engine) checkSchedule(ctx context.Context, sc persistence.Schedule) error {
	if err := validSchedule(sc); err != nil {
		return &ScheduleError{Schedule: sc.Name, Err: err}
	}
	w, _, err := e.triggerPlan(ctx, sc.Workflow)
	if err != nil {
		if errors.Is(err, ErrUnknownWorkflow) {
			return &ScheduleError{Schedule: sc.Name, Err: err}
		}
		return err
	}
	// The input as every tick will give it, checked once here rather
	// than refused at each tick.
	if err := w.CheckInput(sc.Input); err != nil {
		return &ScheduleError{Schedule: sc.Name, Err: &inputError{workflow: sc.Workflow, err: err}}
	}
	return nil
}

// scheduleStoreErr turns the store's refusal of a value into a schedule
// error; other errors (not found, exists, the database's) pass.
func scheduleStoreErr(name string, err error) error {
	var ve *persistence.ValidationError
	if errors.As(err, &ve) || errors.Is(err, persistence.ErrInvalid) || errors.Is(err, persistence.ErrTooLarge) {
		return &ScheduleError{Schedule: name, Err: err}
	}
	return fmt.Errorf("engine: schedule %q: %w", name, err)
}

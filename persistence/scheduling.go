package persistence

import "context"

// Scheduling is the part of a Store that a scheduler node uses to fire
// the schedules: it writes the code's schedules, follows every change
// to them, pauses and disables them, moves their cursors one tick at a
// time and records what each tick did, and reads a schedule's newest
// runs for its overlap policy. The operator's schedule commands
// (ScheduleCreate, ScheduleEdit, ScheduleDelete) and the history read
// (ScheduleTickList) are not part of it.
type Scheduling interface {
	// ScheduleUpsert creates or updates a code-owned schedule by name,
	// keeping its LastTick, Paused flag and history; it clears Disabled.
	// A schedule an operator owns (created, edited or deleted at run time)
	// is left as it is and returned (Owner OwnerOperator, Deleted when the
	// operator deleted it): the operator's version wins.
	ScheduleUpsert(ctx context.Context, s Schedule) (Schedule, error)
	// ScheduleListChanged lists the schedules, deleted ones included,
	// whose ChangedAt is after (p.After, p.AfterName), in that order, at
	// most p.Limit: one range of an index, for nodes that keep the
	// schedules in memory.
	ScheduleListChanged(ctx context.Context, p ScheduleListChangedParams) ([]Schedule, error)
	// ScheduleGet returns one schedule, or ErrScheduleNotFound.
	ScheduleGet(ctx context.Context, name string) (Schedule, error)
	// ScheduleList lists all schedules by name.
	ScheduleList(ctx context.Context) ([]Schedule, error)
	// ScheduleUpdate sets the Paused and/or Disabled flags of a schedule.
	ScheduleUpdate(ctx context.Context, p ScheduleUpdateParams) (Schedule, error)
	// ScheduleAdvance moves a schedule's LastTick from p.From (nil: never
	// fired) to p.To. It returns false, and changes nothing, when another
	// node advanced it first.
	ScheduleAdvance(ctx context.Context, p ScheduleAdvanceParams) (bool, error)
	// ScheduleTickRecord appends to a schedule's history; a repeat of the
	// same (schedule, tick) is ignored.
	ScheduleTickRecord(ctx context.Context, t ScheduleTick) error
	// RunList is Store.RunList, documented there; the scheduler lists a
	// schedule's newest runs (RunListParams.Schedule) for its overlap
	// policy.
	RunList(ctx context.Context, p RunListParams) (RunPage, error)
}

// Package cron fires dagflow's recurring schedules: each tick of a
// schedule starts exactly one run of its workflow, however many engine
// nodes run the scheduler, and no tick is lost when a node dies.
//
// # Specs
//
// A schedule's spec is parsed by [Parse]: the standard five fields
// ("0 2 * * *"), an optional leading seconds field ("*/10 * * * * *"),
// descriptors (@yearly, @monthly, @weekly, @daily, @hourly) and
// "@every <duration>". Calendar specs are evaluated in the schedule's IANA
// time zone (UTC when none is given). "@every" ticks at multiples of the
// duration since the Unix epoch, so that every node computes the same
// ticks. An invalid spec or zone is a *[SpecError] naming the schedule and
// the value.
//
// Daylight saving time: a wall-clock time that does not exist (02:30 on the
// night clocks go from 02:00 to 03:00) is skipped that day; a wall-clock
// time that occurs twice (01:30 on the night clocks go back from 02:00 to
// 01:00) fires once, at its first occurrence. This holds for every field,
// so "*/15 * * * *" in a zone with DST has no ticks during the repeated
// hour; use UTC or "@every" for elapsed-time schedules.
//
// # Once per tick
//
// The store is the only thing nodes share. Each schedule row holds a
// cursor, LastTick: the last tick that was handled. Every node, on every
// pass ([Scheduler.Pass]), reads the cursor and handles the ticks after it
// that are due, in order:
//
//   - a tick to fire: start the run with the idempotency key
//     "schedule:<name>:<tick unix seconds>" ([Key]), record the tick in the
//     schedule's history, and only then move the cursor to the tick with a
//     compare-and-set (Store.ScheduleAdvance);
//   - a tick not to fire (missed, skipped, buffered): move the cursor
//     first, then record it.
//
// A node stops at the first compare-and-set it loses: another node is
// ahead, and the next pass starts from the stored cursor.
//
// Why start before advancing: a node that dies after starting the run and
// before moving the cursor leaves the tick due, and the next pass of any
// node starts it again — with the same key, so the store returns the
// existing run and nothing runs twice. Advancing first would make a death
// between the two steps lose the tick. Two nodes firing the same tick at
// the same time both reach the store with the same key; one run is
// created. So the cursor only saves work, and the key makes the guarantee.
// For ticks that do not fire, losing the history row in a crash loses no
// run, so the cursor goes first.
//
// The idempotency key is per workflow. If the schedule's input changed
// between two attempts at a tick, the store refuses the second start with
// an idempotency conflict that names the tick's existing run, and that run
// counts as the tick's.
//
// # Policies
//
// Overlap ([Overlap]) decides what a tick does while a run the schedule
// started is unfinished: allow starts it anyway, skip records it as
// skipped, buffer_one records the first such tick as buffered and starts
// it when the run finishes (later ticks are skipped). "Unfinished" is read
// from the schedule's newest runs in the store, so it holds across nodes.
//
// Catch-up ([CatchUp]) decides what happens to ticks that no node handled
// in time — more than Config.Grace late, say because every node was down:
// none drops them, latest starts one run for the most recent one (unless
// a tick is due on time anyway), all starts one run for each, oldest
// first; latest and all only consider ticks within the schedule's
// catch-up window (zero: no limit). Dropped ticks leave one skipped row in
// the history that says how many were missed.
//
// A paused (or disabled) schedule keeps its cursor at the present, so that
// resuming it does not fire the ticks of the pause. [Scheduler.Trigger]
// starts a run at once, outside the ticks and the overlap policy.
//
// # Schedules files
//
// [ParseSchedules] and [LoadSchedules] read schedules from YAML files (the
// engine's LoadSchedules declares what they return). They read strictly,
// with the walker the workflow loader of package dag uses: unknown and
// repeated fields, wrong types and invalid values are *dag.YAMLError
// values located by file, line and column, and anchors and aliases work
// as in workflow files.
//
// This package does not import the engine: it starts runs through the
// small [Starter] interface, which the engine implements.
package cron

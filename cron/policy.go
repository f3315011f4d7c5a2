package cron

import (
	"slices"

	"github.com/dagflow/dagflow/persistence"
)

// Overlap is what a schedule does with a tick that comes while a run it
// started earlier is unfinished.
type Overlap string

// Overlap policies.
const (
	// OverlapAllow starts a run for every tick, whatever is still running.
	OverlapAllow Overlap = persistence.OverlapAllow
	// OverlapSkip records the tick as skipped while a run of the schedule
	// is unfinished.
	OverlapSkip Overlap = persistence.OverlapSkip
	// OverlapBufferOne keeps the first tick that comes while a run is
	// unfinished (recorded as buffered) and starts it when that run
	// finishes; later ticks in that time are skipped.
	OverlapBufferOne Overlap = persistence.OverlapBufferOne
)

// CatchUp is what a schedule does with ticks that no node fired in time
// (every node was down, or paused by a long stall): ticks more than the
// scheduler's Grace late.
type CatchUp string

// Catch-up policies.
const (
	// CatchUpNone drops missed ticks.
	CatchUpNone CatchUp = persistence.CatchUpNone
	// CatchUpLatest starts one run for the most recent missed tick (when
	// it is within the window and no tick is due on time).
	CatchUpLatest CatchUp = persistence.CatchUpLatest
	// CatchUpAll starts a run for every missed tick within the window,
	// oldest first.
	CatchUpAll CatchUp = persistence.CatchUpAll
)

// validOverlap and validCatchUp check policy names.
func validOverlap(o Overlap) bool {
	return slices.Contains([]Overlap{OverlapAllow, OverlapSkip, OverlapBufferOne}, o)
}

func validCatchUp(c CatchUp) bool {
	return slices.Contains([]CatchUp{CatchUpNone, CatchUpLatest, CatchUpAll}, c)
}

// Valid reports whether o is a known overlap policy.
func (o Overlap) Valid() bool { return validOverlap(o) }

// Valid reports whether c is a known catch-up policy.
func (c CatchUp) Valid() bool { return validCatchUp(c) }

package engine

import "context"

// RaceEnabled tells the external tests whether the race detector is on:
// the scale tests (10,000 runs) run in make test's pass without it.
const RaceEnabled = raceEnabled

// WatchPausedQueues runs one pass of the paused-queue watch, for a test
// that races it with PauseQueue.
func (e *Engine) WatchPausedQueues(ctx context.Context) { e.watchPausedQueues(ctx) }

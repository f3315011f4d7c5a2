package engine

// RaceEnabled tells the external tests whether the race detector is on:
// the scale tests (10,000 runs) run in make test's pass without it.
const RaceEnabled = raceEnabled

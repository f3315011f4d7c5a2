//go:build race

package engine

// raceEnabled: the race detector is on; sync.Pool then drops items at
// random and allocation counts mean nothing.
const raceEnabled = true

//go:build !race

package layout

// raceDetector says the race detector slows this test binary down.
const raceDetector = false

//go:build race

package dashboard_test

// raceDetector says the race detector slows this test binary down (the
// page timing is then reported, not held to its bound).
const raceDetector = true

//go:build race

package cron_test

// raceEnabled: the race detector is on, and times measured under it
// measure the detector.
const raceEnabled = true

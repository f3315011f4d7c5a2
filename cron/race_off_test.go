//go:build !race

package cron_test

// raceEnabled: the race detector is off.
const raceEnabled = false

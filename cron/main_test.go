package cron_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// database/sql keeps its opener goroutine until Close, and the
		// SQLite driver's lives for the process.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
	)
}

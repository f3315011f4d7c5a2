package faults

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// A worker process: it runs TestWorkerProcess only, and is
		// SIGKILLed as often as it exits cleanly.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m,
		// database/sql and go-redis keep pool goroutines until Close.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreAnyFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
	)
}

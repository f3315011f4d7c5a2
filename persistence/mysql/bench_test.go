package mysql_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/persistence/storetest"
)

// go test -run '^$' -bench . ./persistence/mysql
func BenchmarkClaimComplete(b *testing.B) {
	b.Run("serial", func(b *testing.B) { storetest.BenchmarkClaimComplete(b, openStore(b), 0) })
	b.Run("parallel", func(b *testing.B) { storetest.BenchmarkClaimComplete(b, openStore(b), 8) })
}

func BenchmarkClaimCompleteBatch(b *testing.B) {
	b.Run("batch64", func(b *testing.B) { storetest.BenchmarkClaimCompleteBatch(b, openStore(b), 64) })
}

// BenchmarkOrderRuns runs batches of 15 runs (about what the engine's
// trigger batching makes under the bench's 32 triggering goroutines) and
// of 50. It also reports the server's CPU time per step when the server
// runs on this machine (a mariadbd or mysqld process in /proc): the
// store's cost on the server, which wall time on a loaded machine hides.
// The figure counts everything the server does meanwhile (its background
// purge of old row versions included), so it means something only while
// nothing else uses the server.
func BenchmarkOrderRuns(b *testing.B) {
	for _, n := range []int{15, 50} {
		b.Run(fmt.Sprintf("batch%d", n), func(b *testing.B) {
			st := openStore(b)
			before, ok := serverCPUTicks()
			storetest.BenchmarkOrderRuns(b, st, n)
			if after, ok2 := serverCPUTicks(); ok && ok2 {
				// Clock ticks are 1/100 s on Linux.
				b.ReportMetric(float64(after-before)*1e4/float64(b.N*n*len(storetest.OrderSteps)), "server-µs/step")
			}
		})
	}
}

// serverCPUTicks returns the user+system clock ticks of the local MariaDB
// or MySQL server process, and false if there is none to read.
func serverCPUTicks() (int64, bool) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		if name := strings.TrimSpace(string(comm)); name != "mariadbd" && name != "mysqld" {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			return 0, false
		}
		// Fields after the command (which is in parentheses): state is
		// the 3rd field of the line, utime and stime the 14th and 15th.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 13 {
			return 0, false
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		s, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return u + s, true
	}
	return 0, false
}

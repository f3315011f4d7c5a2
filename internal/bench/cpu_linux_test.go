//go:build linux

package bench

import (
	"os"
	"strings"
	"testing"
)

func TestParseProcStatCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	busy, total, err := parseProcStatCPU("cpu  100 2 30 500 40 5 6 7 50 0")
	if err != nil || busy != 100+2+30+5+6+7 || total != busy+500+40 {
		t.Errorf("busy %d, total %d, err %v", busy, total, err)
	}
	// Old kernels have no steal column.
	if busy, total, err := parseProcStatCPU("cpu 1 2 3 4 5 6 7"); err != nil || busy != 1+2+3+6+7 || total != busy+4+5 {
		t.Errorf("7 fields: busy %d, total %d, err %v", busy, total, err)
	}
	for _, bad := range []string{"cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8", ""} {
		if _, _, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("%q parsed without error", bad)
		} else if !strings.Contains(err.Error(), "/proc/stat") {
			t.Errorf("%q: error %q does not name /proc/stat", bad, err)
		}
	}
	if busy, total, ok := machineCPU(); !ok || total == 0 || busy > total {
		t.Errorf("machineCPU() = %d, %d, %v", busy, total, ok)
	}
}

func TestParseProcPidStat(t *testing.T) {
	// A command name with spaces and a parenthesis; utime 250, stime 50.
	line := "4242 (redis-server (x) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 5 0 1000 1000 100"
	if v, err := parseProcPidStat(line); err != nil || v != 3.0 {
		t.Errorf("parseProcPidStat = %v, %v, want 3 s", v, err)
	}
	for _, bad := range []string{"", "4242 redis-server S 1", "1 (a) S 1 2 3 4 5 6 7 8 9 10 x 5"} {
		if _, err := parseProcPidStat(bad); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
	// This process's own line reads, and is counted.
	if v := procCPUs([]int{os.Getpid()}); len(v) != 1 || v[0] < 0 {
		t.Errorf("procCPUs(self) = %v", v)
	}
	if v := procCPUs([]int{0}); v != nil {
		t.Errorf("procCPUs(0) = %v, want nil", v)
	}
}

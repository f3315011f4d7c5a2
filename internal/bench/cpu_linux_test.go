//go:build linux

package bench

import (
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

//go:build linux

package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// machineCPU reads the machine's CPU time so far, in clock ticks of all
// CPUs together: the busy part (user, nice, system, irq, softirq, steal)
// and the total (busy, idle and iowait). ok is false when /proc/stat
// cannot be read.
func machineCPU() (busy, total uint64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	busy, total, err = parseProcStatCPU(sc.Text())
	return busy, total, err == nil
}

// parseProcStatCPU parses the aggregate "cpu" line of /proc/stat.
func parseProcStatCPU(line string) (busy, total uint64, err error) {
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("not the aggregate cpu line of /proc/stat: %q", line)
	}
	// user nice system idle iowait irq softirq [steal [guest guest_nice]];
	// guest time is already part of user.
	var v [8]uint64
	for i := 1; i < len(fields) && i <= len(v); i++ {
		if v[i-1], err = strconv.ParseUint(fields[i], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat cpu field %d: %w", i, err)
		}
	}
	busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return busy, busy + v[3] + v[4], nil
}

//go:build linux

package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procCPUs reads the user plus system CPU seconds of each process from
// /proc/<pid>/stat, or nil when one of them cannot be read.
func procCPUs(pids []int) []float64 {
	var out []float64
	for _, pid := range pids {
		if pid <= 0 {
			return nil
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return nil
		}
		v, err := parseProcPidStat(string(b))
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// parseProcPidStat returns utime+stime in seconds from a /proc/<pid>/stat
// line. The command name (field 2) is in parentheses and may hold spaces,
// so the fields are counted after its closing one.
func parseProcPidStat(line string) (float64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("not a /proc/<pid>/stat line: %q", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/<pid>/stat has %d fields after the name", len(f))
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/<pid>/stat utime: %w", err)
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/<pid>/stat stime: %w", err)
	}
	return float64(u+s) / clockTicks, nil
}

// processByName returns the pid of the first process whose command name
// is one of names, or 0.
func processByName(names ...string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		for _, n := range names {
			if strings.TrimSpace(string(b)) == n {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
				return pid
			}
		}
	}
	return 0
}

func numCPU() int { return runtime.NumCPU() }

package testenv

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemoryUse is what a function cost the process in memory (MeasureMemory).
type MemoryUse struct {
	// Allocated is the bytes of Go heap allocated while it ran (the
	// growth of runtime.MemStats.TotalAlloc): deterministic, whatever the
	// garbage collector did meanwhile.
	Allocated uint64
	// PeakHeap is the most Go heap in use (HeapInuse) seen while it ran,
	// above what was in use before, sampled every millisecond: a peak
	// between samples can be missed, so it is a lower bound.
	PeakHeap uint64
	// PeakRSS is how far the process's resident set high-water mark
	// (VmHWM) rose above its resident set before f, when the kernel lets
	// the mark be reset (Linux); 0 elsewhere.
	// Under the race detector it includes the detector's shadow memory.
	PeakRSS uint64
}

// MeasureMemory runs f and returns what it cost in memory. Run it in a
// test that is not parallel: other goroutines' allocations count too.
func MeasureMemory(f func()) MemoryUse {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	rssReset := resetPeakRSS()
	rssBase := statusBytes("VmRSS:")
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	peak = max(peak, after.HeapInuse)
	u := MemoryUse{Allocated: after.TotalAlloc - before.TotalAlloc}
	if peak > before.HeapInuse {
		u.PeakHeap = peak - before.HeapInuse
	}
	if hwm := statusBytes("VmHWM:"); rssReset && hwm > rssBase {
		u.PeakRSS = hwm - rssBase
	}
	return u
}

// resetPeakRSS resets the process's VmHWM to its current RSS, and says
// whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// statusBytes returns a "kB" field of /proc/self/status in bytes, or 0.
func statusBytes(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// MiB formats bytes in MiB, for test logs.
func MiB(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB" }

//go:build !linux

package bench

// machineCPU is not measured on this system.
func machineCPU() (busy, total uint64, ok bool) { return 0, 0, false }

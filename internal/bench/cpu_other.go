//go:build !linux

package bench

import "runtime"

// machineCPU is not measured on this system.
func machineCPU() (busy, total uint64, ok bool) { return 0, 0, false }

// procCPUs is not measured on this system.
func procCPUs(pids []int) []float64 { return nil }

// processByName finds no process on this system.
func processByName(names ...string) int { return 0 }

func numCPU() int { return runtime.NumCPU() }

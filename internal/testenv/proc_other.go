//go:build !linux

package testenv

import "os/exec"

// dieWithTest does nothing outside Linux, which has no parent-death
// signal: the servers are stopped by the tests' cleanups only.
func dieWithTest(*exec.Cmd) {}

//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing outside Linux, which has no parent-death
// signal: the server is stopped when the command ends.
func dieWithParent(*exec.Cmd) {}

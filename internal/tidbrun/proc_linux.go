package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel SIGKILL cmd's process when tidbrun
// dies, even killed without running its deferred stop.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

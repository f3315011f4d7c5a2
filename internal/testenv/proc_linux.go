package testenv

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel SIGKILL cmd's process when the test process
// dies, so a server outlives no test binary, even one killed without
// running its cleanups (a timeout, a SIGKILL, a crash). The signal
// follows the OS thread that started the process; Go ends a thread only
// when a goroutine locked to it exits locked, which no test here does.
func dieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

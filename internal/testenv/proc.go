package testenv

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Process is a server process started by a test: it dies with the test
// process (a parent-death signal on Linux) and is killed by the test's
// cleanup.
type Process struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the process has exited
}

// StartProcess starts name with args, kills it when the test ends and,
// on Linux, when the test process dies. The process's last output is kept
// for failure messages (Output).
func StartProcess(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	p := startProcess(t, name, args...)
	t.Cleanup(p.Kill)
	return p
}

func startProcess(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		Unavailable(t, name+" binary", err)
	}
	p := &Process{cmd: exec.Command(name, args...), out: &tailBuffer{max: 16 << 10}, done: make(chan struct{})}
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	dieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// Kill stops the process with SIGKILL and waits for it. It may be called
// more than once.
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output returns the last 16 KiB the process wrote to stdout and stderr.
func (p *Process) Output() string { return p.out.String() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = w.b[over:]
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.b))
}

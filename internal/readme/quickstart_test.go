package readme

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/testenv"
)

// repoRoot is the repository's top directory, where the Makefile is.
const repoRoot = "../.."

// TestQuickStart runs the README's quick start: `make run` with LISTEN on
// a free port, the curl session against it, then Ctrl-C.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs dagflow dev")
	}
	for _, tool := range []string{"make", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, tool, err)
		}
	}
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	mr := startMakeRun(t, "LISTEN="+addr, "BIN="+filepath.Join(dir, "dagflow"), "RUN_ARGS=--db "+filepath.Join(dir, "dev.db"))
	mr.waitFor(t, 3*time.Minute, "API on http://"+addr)

	mr.interrupt(t)
}

// makeRun is a `make run` started in a process group of its own, as a
// shell starts a foreground job.
type makeRun struct {
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{} // closed when make has exited
	err    error         // make's Wait error, once done
}

func startMakeRun(t *testing.T, vars ...string) *makeRun {
	t.Helper()
	m := &makeRun{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command("make", append([]string{"--no-print-directory", "run"}, vars...)...)
	m.cmd.Dir = repoRoot
	m.cmd.Stdout, m.cmd.Stderr = m.stdout, m.stderr
	// Its own process group, like a foreground job: SIGINT to the group
	// is what Ctrl-C does. Pdeathsig: make dies with the test process.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// SIGINT is caught while make starts, so that make does not inherit
	// it ignored (as it would from a test run in the background of a
	// shell): a caught signal is reset to its default in the child.
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, os.Interrupt)
	err := m.cmd.Start()
	signal.Stop(caught)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	// The whole group, dagflow included, whatever the test's outcome.
	t.Cleanup(func() {
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
	})
	return m
}

// waitFor waits until make's output holds s.
func (m *makeRun) waitFor(t *testing.T, timeout time.Duration, s string) {
	t.Helper()
	deadline := time.After(timeout)
	for !strings.Contains(m.stdout.String(), s) {
		select {
		case <-m.done:
			t.Fatalf("make run exited (%v) before printing %q\n%s", m.err, s, m.output())
		case <-deadline:
			t.Fatalf("make run did not print %q within %v\n%s", s, timeout, m.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// interrupt sends SIGINT to make's process group, as Ctrl-C does, and
// checks that dagflow dev stopped on it and that make printed no error.
// make itself ends killed by the SIGINT it received, as GNU make does
// whenever it is interrupted, whatever its recipe did (the shell says
// nothing about it); an error of the recipe would instead make it
// report "make: *** [...] Error N" and exit 2.
func (m *makeRun) interrupt(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("make run still running 30s after SIGINT\n%s", m.output())
	}
	if !strings.Contains(m.stderr.String(), "dagflow: interrupt: stopping") {
		t.Errorf("dagflow dev did not see the SIGINT\n%s", m.output())
	}
	if strings.Contains(m.stderr.String(), "make: ***") {
		t.Errorf("make run reported an error on SIGINT\n%s", m.output())
	}
	var ee *exec.ExitError
	if !errors.As(m.err, &ee) {
		t.Fatalf("make run: %v, want killed by SIGINT\n%s", m.err, m.output())
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("make run ended with %v, want killed by SIGINT (no recipe error)\n%s", m.err, m.output())
	}
}

func (m *makeRun) output() string {
	return "stdout:\n" + tail(m.stdout.String()) + "\nstderr:\n" + tail(m.stderr.String())
}

// tail is the end of s, for failure messages.
func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// lockedBuffer is a bytes.Buffer written by a process and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

package readme

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
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
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs dagflow dev")
	}
	for _, tool := range []string{"make", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, tool, err)
		}
	}
	for _, tool := range []string{"curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, tool+" (the README's curl session uses it)", err)
		}
	}
	qs := quickStart(t)
	checkMakeRunCommand(t, qs.listen)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	mr := startMakeRun(t, "LISTEN="+addr, "BIN="+filepath.Join(dir, "dagflow"), "RUN_ARGS=--db "+filepath.Join(dir, "dev.db"))
	// make run builds the binary first: from a cold cache, on two cores
	// shared with the rest of make test, that takes minutes.
	mr.waitFor(t, 10*time.Minute, "API on http://"+addr)
	runSession(t, startShell(t), qs.session, qs.listen, addr, 30*time.Second)
	mr.interrupt(t)
}

// quickStartDoc is what the README's quick start holds.
type quickStartDoc struct {
	listen  string    // the address make run listens on, as the README says
	session []command // the commands of its console blocks, in order
}

// listenSaid is where the quick start says what make run runs.
var listenSaid = regexp.MustCompile("`make run` \\(`dagflow dev --listen ([^`]+)`")

// quickStart reads the README's quick start: a sh block whose one command
// is `make run`, then console blocks of commands to run against it.
func quickStart(t *testing.T) quickStartDoc {
	t.Helper()
	text, first := section(t, readme(t), "## Quick start")
	var qs quickStartDoc
	m := listenSaid.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("README.md:%d: the quick start does not say what make run runs (%s)", first, listenSaid)
	}
	qs.listen = m[1]
	started := false
	for _, b := range fencedBlocks(t, text, first) {
		switch b.lang {
		case "sh":
			if started {
				t.Fatalf("README.md:%d: a second sh block in the quick start", b.line)
			}
			cmd, _, _ := strings.Cut(strings.TrimSpace(b.text), "#")
			if strings.TrimSpace(cmd) != "make run" {
				t.Fatalf("README.md:%d: the quick start's sh block is %q, want the one command make run (the test runs it, then the console blocks)", b.line, b.text)
			}
			started = true
		case "console":
			if !started {
				t.Fatalf("README.md:%d: a console block before make run", b.line)
			}
			qs.session = append(qs.session, consoleCommands(t, b)...)
		default:
			t.Fatalf("README.md:%d: a ```%s block in the quick start: the test runs sh (make run) and console blocks only", b.line, b.lang)
		}
	}
	if len(qs.session) == 0 {
		t.Fatalf("README.md:%d: the quick start has no console block of commands", first)
	}
	return qs
}

// checkMakeRunCommand checks that make run runs what the README says.
func checkMakeRunCommand(t *testing.T, listen string) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "-n", "run", "BIN=dagflow")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n run: %v", err)
	}
	want := "dagflow dev --listen " + listen
	if !strings.Contains(string(out), want+" ") && !strings.Contains(string(out), want+"\n") {
		t.Errorf("make run runs\n%s\nnot %q as the README says", out, want)
	}
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

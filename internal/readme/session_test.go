package readme

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// command is one command of a console block: what follows "$ ", with its
// continuation lines, and the output shown under it.
type command struct {
	line int      // the README's line of the "$ "
	text string   // the command, continuation lines included
	want []string // the output lines the README shows (none: not checked)
}

// consoleCommands splits a console block into its commands. A command
// starts with "$ " and goes on while its line ends in a backslash; the
// lines after it, to a blank line or the next "$ ", are its output.
func consoleCommands(t *testing.T, b block) []command {
	t.Helper()
	var cmds []command
	lines := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case !strings.HasPrefix(l, "$ "):
			t.Fatalf("README.md:%d: %q is neither a command ($ ...) nor the output of one", b.line+i, l)
		}
		c := command{line: b.line + i, text: strings.TrimPrefix(l, "$ ")}
		for strings.HasSuffix(lines[i], `\`) && i+1 < len(lines) {
			i++
			c.text += "\n" + lines[i]
		}
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && !strings.HasPrefix(lines[i+1], "$ ") {
			i++
			c.want = append(c.want, lines[i])
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// varying are the parts of an output that differ from one session to
// the next: run ids (UUIDs) and definition version hashes.
var varying = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[0-9a-f]{16}\b`)

// masked is out with its varying parts replaced, line by line.
func masked(lines []string) string {
	return varying.ReplaceAllString(strings.Join(lines, "\n"), "<id>")
}

// shell is one bash process that runs the session's commands in turn, so
// that a variable one sets is there for the next, as in a terminal.
type shell struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // its standard output, line by line; closed at its end
	stderr *lockedBuffer
	marker string // printed after each command, with its status
}

// curlWrapper makes every curl of the session fail on an HTTP error
// status (and give up after 10 s), so that a command that gets a 404
// fails rather than printing the error's body.
const curlWrapper = `curl() { command curl --fail-with-body --max-time 10 "$@"; }`

func startShell(t *testing.T) *shell {
	t.Helper()
	token := make([]byte, 8)
	rand.Read(token)
	s := &shell{lines: make(chan string, 256), stderr: &lockedBuffer{}, marker: "@@done-" + hex.EncodeToString(token)}
	// pipefail: `curl ... | jq` fails when curl does.
	s.cmd = exec.Command("bash", "--noprofile", "--norc", "-o", "pipefail")
	s.cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		s.stdin.Close()
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	fmt.Fprintln(s.stdin, curlWrapper)
	return s
}

// run runs text in the shell and returns its status and output lines.
func (s *shell) run(t *testing.T, text string, timeout time.Duration) (int, []string) {
	t.Helper()
	// The braces keep a multi-line command whole; stdin is not the script.
	fmt.Fprintf(s.stdin, "{\n%s\n} </dev/null; echo \"%s $?\"\n", text, s.marker)
	var out []string
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("bash exited while running %q\nstderr:\n%s", text, tail(s.stderr.String()))
			}
			if rest, found := strings.CutPrefix(l, s.marker+" "); found {
				status, err := strconv.Atoi(rest)
				if err != nil {
					t.Fatalf("bash: status %q", rest)
				}
				return status, out
			}
			out = append(out, l)
		case <-deadline:
			t.Fatalf("%q did not finish within %v\noutput:\n%s\nstderr:\n%s", text, timeout, strings.Join(out, "\n"), tail(s.stderr.String()))
		}
	}
}

// runSession runs the commands in order, the README's host and port
// replaced by addr. Each must exit 0; one under which the README shows
// output must print it (ids and hashes aside), run again until it does
// within settle: a run shown finished may still be running when asked
// at once.
func runSession(t *testing.T, sh *shell, cmds []command, readmeAddr, addr string, settle time.Duration) {
	t.Helper()
	for _, c := range cmds {
		text := strings.ReplaceAll(c.text, readmeAddr, addr)
		deadline := time.Now().Add(settle)
		for {
			errAt := sh.stderr.String()
			status, out := sh.run(t, text, 30*time.Second)
			if status != 0 {
				t.Fatalf("README.md:%d: %s\nexited %d\noutput:\n%s\nstderr:\n%s", c.line, text, status, strings.Join(out, "\n"), strings.TrimPrefix(sh.stderr.String(), errAt))
			}
			if c.want == nil || masked(out) == masked(c.want) {
				t.Logf("README.md:%d: %s\n%s", c.line, text, strings.Join(out, "\n"))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("README.md:%d: %s\nprinted:\n%s\nthe README shows:\n%s", c.line, text, strings.Join(out, "\n"), strings.Join(c.want, "\n"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

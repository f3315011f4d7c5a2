package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, line, block string }{
		{"plain text, ünïcödé ✓", "plain text, ünïcödé ✓", "plain text, ünïcödé ✓"},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`, `\x1b]0;title\x07`},
		{"a\tb\nc\rd", `a\x09b\x0ac\x0dd`, "a\tb\nc\\x0dd"},
		{"csi \u009b31m", `csi \u009b31m`, `csi \u009b31m`},
		{"del \x7f nul \x00", `del \x7f nul \x00`, `del \x7f nul \x00`},
		{"bidi \u202eevil\u2066 zw\u200b bom\ufeff", `bidi \u202eevil\u2066 zw\u200b bom\ufeff`, `bidi \u202eevil\u2066 zw\u200b bom\ufeff`},
		{"bad \xff utf8", `bad \xff utf8`, `bad \xff utf8`},
		{`back\slash`, `back\slash`, `back\slash`},
	} {
		if got := escapeLine(tc.in); got != tc.line {
			t.Errorf("escapeLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := escapeBlock(tc.in); got != tc.block {
			t.Errorf("escapeBlock(%q) = %q, want %q", tc.in, got, tc.block)
		}
	}
	if got, want := cell("first \x1b[1m\nsecond"), `first \x1b[1m`; got != want {
		t.Errorf("cell = %q, want %q", got, want)
	}
}

func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"app:pw@tcp(db:3306)/dagflow", "app:xxxxx@tcp(db:3306)/dagflow"},
		{"app@tcp(db:3306)/dagflow", "app@tcp(db:3306)/dagflow"},
		{"app:p@ss/w@rd@tcp(db:3306)/dagflow?tls=custom", "app:xxxxx@tcp(db:3306)/dagflow?tls=custom"},
		// Not a valid DSN: the password still goes.
		{"app:pw@tcp(db:3306)", "app:xxxxx@tcp(db:3306)"},
		{"app:pw@tcp(db:3306)/x?badparam", "app:xxxxx@tcp(db:3306)/x?badparam"},
		// No '@': user:password before the database is still a password.
		{"root:S3cretPW/db", "root:xxxxx/db"},
		{"root:S3cretPW", "root:xxxxx"},
		{"root:p:w/db?x=1", "root:xxxxx/db?x=1"},
		// A colon inside an address is not a password.
		{"tcp(db:3306)/dagflow", "tcp(db:3306)/dagflow"},
		{"root/db", "root/db"},
	} {
		if got := redactDSN(tc.in); got != tc.want {
			t.Errorf("redactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRedactingWriters: everything the command prints, the drivers' logs
// included, loses the passwords it was given and any URL's or DSN's
// user-info.
func TestRedactingWriters(t *testing.T) {
	var sec secrets
	sec.addDSN("app:dsn-secret@tcp(db:3306)/x")
	sec.add("url-secret", "ab") // too short to replace everywhere
	var buf bytes.Buffer
	w := sec.writer(&buf)
	logger := driverLogger{w: w, prefix: "redis: "}
	logger.Printf(context.Background(), "redis: connection pool: dial %s failed: auth %s", "redis://app:url-secret@h:6379", "url-secret")
	driverLogger{w: w, prefix: "mysql: "}.Print("[mysql] ", "dial app:other-secret@tcp(db:3306)/x: dsn-secret \x1b[2J")
	got := buf.String()
	for _, secret := range []string{"dsn-secret", "url-secret", "other-secret", "\x1b"} {
		if strings.Contains(got, secret) {
			t.Errorf("the logs show %q:\n%s", secret, got)
		}
	}
	want := "redis: connection pool: dial redis://app:xxxxx@h:6379 failed: auth xxxxx\n" +
		`mysql: [mysql] dial app:xxxxx@tcp(db:3306)/x: xxxxx \x1b[2J` + "\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
	// A password without '@' in its DSN is hidden too.
	buf.Reset()
	sec.addDSN("root:S3cretPW/db")
	w.Write([]byte("open root:S3cretPW/db: S3cretPW\n"))
	if got, want := buf.String(), "open root:xxxxx/db: xxxxx\n"; got != want {
		t.Errorf("a DSN without '@': %q, want %q", got, want)
	}
	// A password that is part of a word of an error is not cut out of it.
	buf.Reset()
	sec.add("WRONG")
	w.Write([]byte("auth WRONG: WRONGPASS invalid username-password pair\n"))
	if got, want := buf.String(), "auth xxxxx: WRONGPASS invalid username-password pair\n"; got != want {
		t.Errorf("a password inside a word: %q, want %q", got, want)
	}
	buf.Reset()
	w.Write([]byte("ab stays: short secrets are not replaced everywhere\n"))
	if !strings.HasPrefix(buf.String(), "ab stays") {
		t.Errorf("a short secret mangled the text: %q", buf.String())
	}
}

func TestChooseQueues(t *testing.T) {
	reg := steps.NewRegistry()
	if err := orderflow.NewServices().Register(reg); err != nil {
		t.Fatal(err)
	}
	wfs, err := dag.LoadFS(workflows.FS, reg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"default": {"order/reserve", "order/points", "order/ship"}, "mail": {"order/notify"}}, queueSteps(wfs)); diff != "" {
		t.Errorf("queueSteps (-want +got):\n%s", diff)
	}
	left, err := chooseQueues("default", wfs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"mail": {"order/notify"}}, left); diff != "" {
		t.Errorf("left out (-want +got):\n%s", diff)
	}
	if left, err := chooseQueues("mail,default", wfs); err != nil || len(left) != 0 {
		t.Errorf("every queue: left %v, %v", left, err)
	}
	for _, tc := range []struct{ list, want string }{
		{"", "--queues is empty (leave it out to work every queue: default, mail)"},
		{" ", "--queues is empty"},
		{"default,", "element 2 is empty"},
		{"default, mail", "element 2 is empty or has spaces"},
		{"mail,mail", `"mail" is listed twice`},
		{"default,mial", `"mial" is not a queue of any registered workflow (queues: default, mail)`},
	} {
		_, err := chooseQueues(tc.list, wfs)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("chooseQueues(%q) = %v, want a usage error naming %q", tc.list, err, tc.want)
		}
	}
}

// TestStopWithin: an engine stop that fails is an error; one that hangs
// (a handler ignoring cancellation) is abandoned after the timeout plus
// the grace.
func TestStopWithin(t *testing.T) {
	if err := stopWithin(func(context.Context) error { return nil }, time.Second, time.Second); err != nil {
		t.Errorf("a clean stop: %v", err)
	}
	err := stopWithin(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, 50*time.Millisecond, time.Second)
	if err == nil || !strings.Contains(err.Error(), "--shutdown-timeout 50ms") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a stop that ran out of time: %v", err)
	}
	start := time.Now()
	hang := make(chan struct{})
	defer close(hang)
	err = stopWithin(func(context.Context) error { <-hang; return nil }, 50*time.Millisecond, 100*time.Millisecond)
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "ignores cancellation") || took > 5*time.Second {
		t.Errorf("a hung stop returned %v after %v", err, took)
	}
}

// TestSecondSignalExitsAtOnce: the first signal cancels the context, the
// second exits with 128+signal.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { watchSignals(sigs, cancel, &out, func(code int) { exited <- code }); close(done) }()
	sigs <- syscall.SIGTERM
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first signal did not cancel the context")
	}
	select {
	case code := <-exited:
		t.Fatalf("exited %d on the first signal", code)
	default:
	}
	sigs <- syscall.SIGINT
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("second SIGINT exited %d, want 130", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not exit")
	}
	<-done
	if !strings.Contains(out.String(), "a second signal exits at once") {
		t.Errorf("no word of the second signal: %q", out.String())
	}
}

func TestVersionOf(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/dagflow/dagflow", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T18:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{bi, true, "dagflow github.com/dagflow/dagflow v1.4.0 revision 0123abcd (modified) 2026-12-01T18:00:00Z go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8"}, true, "dagflow github.com/dagflow/dagflow (devel) revision unknown go1.26.8"},
		{nil, false, "dagflow github.com/dagflow/dagflow (no build information)"},
	} {
		if got := versionOf(tc.bi, tc.ok); got != tc.want {
			t.Errorf("versionOf = %q, want %q", got, tc.want)
		}
	}
}

func TestLongFlagsCompat(t *testing.T) {
	root := newRoot(&secrets{})
	got := longFlagsCompat(root, []string{"runs", "-mysql-dsn", "x", "-limit=3", "-h", "-v", "--prefix", "p", "-nosuch", "--", "-limit"})
	want := []string{"runs", "--mysql-dsn", "x", "--limit=3", "-h", "-v", "--prefix", "p", "-nosuch", "--", "-limit"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("longFlagsCompat (-want +got):\n%s", diff)
	}
}

// TestMySQLTLSFlags: --mysql-tls-ca makes the store connect over TLS (the
// shared test server has none, so the connection is refused for that
// reason), and bad files are named.
func TestMySQLTLSFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB")
	}
	dsn := testenv.MySQLDatabase(t)
	dir := t.TempDir()
	ca := testenv.NewCA(t).CertFile
	ctx := context.Background()
	code, out, errb := runCLI(t, ctx, "runs", "--mysql-dsn", dsn, "--mysql-tls-ca", ca)
	if code != 1 || !strings.Contains(errb, "TLS") {
		t.Errorf("runs --mysql-tls-ca against a server without TLS exited %d with %q %q; want a TLS error", code, out, errb)
	}
	t.Setenv("DAGFLOW_MYSQL_TLS_CA", ca)
	if code, _, errb := runCLI(t, ctx, "runs", "--mysql-dsn", dsn); code != 1 || !strings.Contains(errb, "TLS") {
		t.Errorf("DAGFLOW_MYSQL_TLS_CA: exited %d with %q; want a TLS error", code, errb)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mysql-tls-ca", filepath.Join(dir, "nope.pem")}, "nope.pem"},
		{[]string{"--mysql-tls-ca", ca, "--mysql-tls-cert", ca}, "certificate and key go together"},
		{[]string{"--mysql-tls-ca", ca, "--mysql-tls-cert", ca, "--mysql-tls-key", ca}, "client certificate"},
	} {
		code, _, errb := runCLI(t, ctx, append([]string{"runs", "--mysql-dsn", dsn}, tc.args...)...)
		if code == 0 || !strings.Contains(errb, tc.want) {
			t.Errorf("runs %q exited %d with %q; want an error naming %s", tc.args, code, errb, tc.want)
		}
	}
}

// TestNodevLinksNoEmbeddedBackends: built with -tags nodev, the binary
// links neither miniredis nor SQLite; the default build links both (for
// dev and bench).
func TestNodevLinksNoEmbeddedBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	deps := func(tags ...string) string {
		args := append([]string{"list", "-deps"}, tags...)
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %v: %v\n%s", tags, err, out)
		}
		return string(out)
	}
	for _, line := range strings.Split(deps("-tags", "nodev"), "\n") {
		if strings.Contains(line, "miniredis") || strings.HasPrefix(line, "modernc.org/") || strings.HasSuffix(line, "persistence/sqlite") {
			t.Errorf("-tags nodev links %s", line)
		}
	}
	if all := deps(); !strings.Contains(all, "github.com/alicebob/miniredis/v2\n") || !strings.Contains(all, "modernc.org/sqlite\n") {
		t.Errorf("the default build lacks miniredis or SQLite:\n%s", all)
	}
}

// TestSettingsConflicts: a setting given twice in one place, or a keyring
// that cannot be read, is refused before anything is opened, with an
// error that names the settings and never the password.
func TestSettingsConflicts(t *testing.T) {
	dir := t.TempDir()
	dsnFile := filepath.Join(dir, "dsn")
	if err := os.WriteFile(dsnFile, []byte(refusingDSN), 0o600); err != nil {
		t.Fatal(err)
	}
	badKeys := filepath.Join(dir, "keys")
	if err := os.WriteFile(badKeys, []byte("k1=not-base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want []string
	}{
		{"dsn and its file", nil, []string{"runs", "--mysql-dsn", refusingDSN, "--mysql-dsn-file", dsnFile}, 2, []string{"--mysql-dsn", "--mysql-dsn-file", "not both"}},
		{"dsn variables", map[string]string{"DAGFLOW_MYSQL_DSN": refusingDSN, "DAGFLOW_MYSQL_DSN_FILE": dsnFile}, []string{"runs"}, 1, []string{"DAGFLOW_MYSQL_DSN", "DAGFLOW_MYSQL_DSN_FILE", "unset one"}},
		{"redis url and addr", nil, []string{"dlq", "retry", "r", "s", "--redis-url", "redis://:" + secretPassword + "@127.0.0.1:1", "--redis-addr", "127.0.0.1:1"}, 2, []string{"--redis-url", "--redis-addr", "give one"}},
		{"unreadable keyring", nil, []string{"runs", "--codec-keyring-file", filepath.Join(dir, "missing")}, 1, []string{"--codec-keyring-file", "missing"}},
		{"bad keyring", nil, []string{"runs", "--codec-keyring-file", badKeys}, 1, []string{"--codec-keyring-file", "k1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, out, errb := runCLI(t, context.Background(), tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, errb)
			}
			for _, w := range tc.want {
				if !strings.Contains(errb, w) {
					t.Errorf("stderr %q does not name %q", errb, w)
				}
			}
			if strings.Contains(out+errb, secretPassword) {
				t.Errorf("the password was printed: %q %q", out, errb)
			}
		})
	}
}

// TestShutdownWithinOneDeadline: on a signal, serve lets a request in
// flight finish, then stops the engine by the same deadline: the time the
// requests took is not given to the engine again.
func TestShutdownWithinOneDeadline(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		io.WriteString(w, "finished")
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &apiServer{srv: &http.Server{Handler: h}, l: l, url: "http://" + l.Addr().String()}
	served := srv.serve()

	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Get(srv.url + "/slow")
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{string(b), err}
	}()
	<-started

	const timeout = 5 * time.Second
	var stopDeadline time.Time
	stop := func(ctx context.Context) error {
		stopDeadline, _ = ctx.Deadline()
		return nil
	}
	begin := time.Now()
	done := make(chan error, 1)
	go func() { done <- shutdownWithin(srv, stop, timeout, time.Second) }()
	time.Sleep(300 * time.Millisecond) // the request is in flight during the shutdown
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if a := <-answered; a.err != nil || a.body != "finished" {
		t.Fatalf("the request in flight: %q, %v; want it finished", a.body, a.err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	// The engine's deadline is the server's: timeout from the start of
	// the shutdown (give or take the goroutine's start), not timeout from
	// the end of the server's, 300 ms later.
	if limit := begin.Add(timeout + 100*time.Millisecond); stopDeadline.IsZero() || stopDeadline.After(limit) {
		t.Fatalf("the engine's stop deadline %v is past the shutdown's %v", stopDeadline, limit)
	}
}

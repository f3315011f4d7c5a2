// Command tidbrun starts a standalone tidb-server (unistore, in a
// temporary directory, on free loopback ports), waits until it answers,
// runs a command with DAGFLOW_TEST_MYSQL_DSN pointing at it (and
// DAGFLOW_TIDB_PID naming the server's process, whose CPU time a
// benchmark may read), and stops the server when the command ends: make
// test-tidb runs the MySQL store's and the engine's tests this way. On
// Linux the server also dies with tidbrun (a parent-death signal),
// whatever ends it.
//
// Usage:
//
//	go run ./internal/tidbrun -bin PATH/tidb-server -- go test ./persistence/mysql/...
//
// The command's exit status is tidbrun's; the server's log is printed
// when the command fails.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

func main() {
	// The parent-death signal follows the thread that started the
	// server: keep main, which starts it, on the thread it began on.
	runtime.LockOSThread()
	bin := flag.String("bin", "", "the tidb-server binary (internal/tools/tidb/build.sh prints it)")
	wait := flag.Duration("wait", 2*time.Minute, "how long the server may take to answer")
	flag.Parse()
	if *bin == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: tidbrun -bin PATH/tidb-server -- COMMAND [ARGS...]")
		os.Exit(2)
	}
	os.Exit(run(*bin, *wait, flag.Args()))
}

func run(bin string, wait time.Duration, command []string) int {
	dir, err := os.MkdirTemp("", "dagflow-tidb-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tidbrun:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	port, status := freePort(), freePort()
	if port == 0 || status == 0 {
		fmt.Fprintln(os.Stderr, "tidbrun: no free loopback port")
		return 1
	}
	logFile := filepath.Join(dir, "tidb.log")
	server := exec.Command(bin, "-store", "unistore", "-path", filepath.Join(dir, "data"),
		"-host", "127.0.0.1", "-P", strconv.Itoa(port), "-status", strconv.Itoa(status),
		"-socket", filepath.Join(dir, "tidb.sock"), "-log-file", logFile,
		// Not the default tidb-slow.log in the working directory.
		"-log-slow-query", filepath.Join(dir, "tidb-slow.log"))
	out, err := os.Create(filepath.Join(dir, "tidb.out"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tidbrun:", err)
		return 1
	}
	server.Stdout, server.Stderr = out, out
	dieWithParent(server)
	if err := server.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "tidbrun: starting %s: %v\n", bin, err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()
	defer stop(server, exited)

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := ready(addr, wait, exited); err != nil {
		fmt.Fprintf(os.Stderr, "tidbrun: tidb-server on %s: %v\n", addr, err)
		printLogs(dir)
		return 1
	}
	dsn := (&mysql.Config{User: "root", Net: "tcp", Addr: addr, AllowNativePasswords: true}).FormatDSN()
	fmt.Fprintf(os.Stderr, "tidbrun: tidb-server ready on %s (status port %d, data in %s)\n", addr, status, dir)

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "DAGFLOW_TEST_MYSQL_DSN="+dsn, "DAGFLOW_TIDB_PID="+strconv.Itoa(server.Process.Pid))
	// Ctrl-C reaches the command (same process group); tidbrun waits for
	// it to end and then stops the server.
	signal.Ignore(syscall.SIGINT)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(os.Stderr, "tidbrun: %v\n", err)
			return 1
		}
		select {
		case err := <-exited:
			fmt.Fprintf(os.Stderr, "tidbrun: tidb-server exited during the command: %v\n", err)
			printLogs(dir)
		default:
		}
		return max(ee.ExitCode(), 1)
	}
	return 0
}

// ready waits until the server answers a query, it exits, or wait passes.
func ready(addr string, wait time.Duration, exited <-chan error) error {
	db, err := sql.Open("mysql", "root@tcp("+addr+")/")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var one int
		err = db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("exited before answering: %v", werr)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %v: %v", wait, err)
		}
	}
}

// stop asks the server to stop, and kills it after ten seconds.
func stop(server *exec.Cmd, exited <-chan error) {
	_ = server.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = server.Process.Kill()
		<-exited
	}
}

func printLogs(dir string) {
	for _, name := range []string{"tidb.out", "tidb.log"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		fmt.Fprintf(os.Stderr, "--- %s (tail)\n%s\n", name, b)
	}
}

// freePort returns a loopback TCP port that was free a moment ago, or 0.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

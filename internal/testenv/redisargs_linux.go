package testenv

import (
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// StartRedisArgs starts a private redis-server (no persistence) on a free
// loopback port with extra arguments, such as an ACL user:
//
//	"--user", "app", "on", ">secret", "~app:*", "&app:*", "+@all"
//
// and returns its address. The server dies with the test, and with the
// test process if that is killed first.
func StartRedisArgs(t testing.TB, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Unavailable(t, "redis-server binary", err)
	}
	port := FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	all := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"}, args...)
	cmd := exec.Command("redis-server", all...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	// The port accepts connections once the server is ready; a server
	// that refused its arguments exits instead.
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("testenv: redis-server %v exited: %v", args, err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: redis-server on %s did not listen within 10s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

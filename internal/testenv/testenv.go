// Package testenv gives dagflow's tests their services: the loopback Redis
// and MariaDB (addresses from environment variables), a private database or
// key prefix per test, and a deadline-based Eventually helper.
//
// Tests that need a server of their own (to kill it, or configured as in
// production) start it on free loopback ports: StartRedis and
// StartRedisWith (ACL users, a password, TLS-only), StartSentinel,
// StartCluster and StartMariaDB, with certificates from a private CA
// (NewCA). Each server is killed by the test's cleanup and, on Linux, by
// the kernel when the test process dies, and keeps its files in the
// test's temporary directory. Their addresses, URLs, users and CA file
// paths are exported so that a test of the CLI can pass them as flags.
//
// When CI=true an unreachable service (or a missing server binary) fails
// the test; elsewhere it skips with a message that says how to start the
// service.
//
// Environment:
//
//	DAGFLOW_TEST_REDIS_ADDR  default 127.0.0.1:6379
//	DAGFLOW_TEST_MYSQL_DSN   default root@tcp(127.0.0.1:3306)/   (no database)
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// RedisAddr is the address of the shared test Redis.
func RedisAddr() string {
	if v := os.Getenv("DAGFLOW_TEST_REDIS_ADDR"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

// MySQLDSN is the DSN of the shared test MariaDB/MySQL server, without a
// database name.
func MySQLDSN() string {
	if v := os.Getenv("DAGFLOW_TEST_MYSQL_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// CI reports whether tests run in CI, where a missing service is a failure.
func CI() bool { return os.Getenv("CI") == "true" }

// Unavailable skips the test (or fails it in CI) because a service is
// unreachable.
func Unavailable(t testing.TB, service string, err error) {
	t.Helper()
	msg := fmt.Sprintf("%s unreachable: %v (start it, or set the DAGFLOW_TEST_* variables)", service, err)
	if CI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// RequireRedis checks that the shared Redis answers and returns its address.
func RequireRedis(t testing.TB) string {
	t.Helper()
	addr := RedisAddr()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		Unavailable(t, "redis at "+addr, err)
	}
	conn.Close()
	return addr
}

// RandomSuffix returns n random hex characters.
func RandomSuffix(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)[:n]
}

// KeyPrefix returns a Redis key prefix private to this test; keys under it
// are the test's to create and delete.
func KeyPrefix(t testing.TB) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	return "dftest:" + name + ":" + RandomSuffix(8)
}

// MySQLDatabase creates a database private to this test on the shared
// server, drops it when the test ends, and returns a DSN that selects it
// (with parseTime and the options dagflow's MySQL store expects).
func MySQLDatabase(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(MySQLDSN())
	if err != nil {
		t.Fatalf("testenv: DAGFLOW_TEST_MYSQL_DSN: %v", err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		Unavailable(t, "mysql at "+cfg.Addr, err)
	}
	name := "dftest_" + RandomSuffix(12)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		admin.Close()
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
		}
		admin.Close()
	})
	cfg.DBName = name
	cfg.ParseTime = true
	return cfg.FormatDSN()
}

// Eventually polls cond every few milliseconds until it returns true or
// the timeout passes, then fails the test with msg.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond until it reports done or timeout passes, then fails
// the test naming what it waited for and cond's last explanation.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (done bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: not within %v: %s; last: %s", timeout, what, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

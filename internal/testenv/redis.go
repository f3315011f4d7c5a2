package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process owned by one test: it may be
// flushed, killed or restarted without touching the shared Redis.
type RedisServer struct {
	// Addr is the server's address, 127.0.0.1:Port. With TLS it is the TLS
	// port: the server listens on no plain port.
	Addr string
	Port int
	// Opts are the options the server was started with.
	Opts RedisOptions

	conf string // redis.conf in the test's temporary directory
	t    testing.TB

	mu   sync.Mutex // guards proc: Kill may race with Running
	proc *Process
}

// RedisOptions configure StartRedisWith. The zero value is a plain server
// without authentication, as StartRedis starts.
type RedisOptions struct {
	// Users are ACL users, each a redis.conf "user" directive without the
	// keyword, e.g. "app on >secret ~app:* &app:* -@all +ping". The
	// default user keeps its rights (and Password) unless a rule here
	// redefines "default".
	Users []string
	// Password is the default user's password (requirepass).
	Password string
	// TLS makes the server TLS-only (no plain port) with the CA's server
	// certificate; clients must trust the CA.
	TLS *CA
	// TLSAuthClients is whether TLS clients must present a certificate
	// signed by the CA: "yes", "optional" or "no". Default "yes".
	TLSAuthClients string
	// Port is the port to listen on. Default: a free one.
	Port int
	// Config are more redis.conf lines, e.g. "replicaof 127.0.0.1 6380".
	Config []string
}

// StartRedis starts a private redis-server (no persistence, no
// authentication) on a free loopback port and stops it when the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	return StartRedisWith(t, RedisOptions{})
}

// StartRedisWith starts a private redis-server (no persistence) with the
// given users, password and TLS on a loopback port, and stops it when the
// test ends or the test process dies.
func StartRedisWith(t testing.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	switch opts.TLSAuthClients {
	case "":
		opts.TLSAuthClients = "yes"
	case "yes", "optional", "no":
	default:
		t.Fatalf("testenv: RedisOptions.TLSAuthClients %q: want yes, optional or no", opts.TLSAuthClients)
	}
	if opts.Port == 0 {
		opts.Port = FreePort(t)
	}
	dir := t.TempDir()
	s := &RedisServer{t: t, Port: opts.Port, Opts: opts, conf: filepath.Join(dir, "redis.conf")}
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
	if err := os.WriteFile(s.conf, []byte(s.config(dir)), 0o600); err != nil {
		t.Fatalf("testenv: write %s: %v", s.conf, err)
	}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// config renders the server's redis.conf.
func (s *RedisServer) config(dir string) string {
	o := s.Opts
	lines := []string{
		"bind 127.0.0.1",
		"dir " + strconv.Quote(dir),
		`save ""`,
		"appendonly no",
		"daemonize no",
		"loglevel warning",
	}
	if o.TLS != nil {
		lines = append(lines,
			"port 0",
			"tls-port "+strconv.Itoa(s.Port),
			"tls-cert-file "+strconv.Quote(o.TLS.ServerCertFile),
			"tls-key-file "+strconv.Quote(o.TLS.ServerKeyFile),
			"tls-ca-cert-file "+strconv.Quote(o.TLS.CertFile),
			"tls-auth-clients "+o.TLSAuthClients,
			"tls-replication yes",
		)
	} else {
		lines = append(lines, "port "+strconv.Itoa(s.Port))
	}
	if o.Password != "" {
		lines = append(lines, "requirepass "+strconv.Quote(o.Password))
	}
	for _, u := range o.Users {
		lines = append(lines, "user "+u)
	}
	lines = append(lines, o.Config...)
	return strings.Join(lines, "\n") + "\n"
}

// Start (re)starts the server on its port and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	p := startProcess(s.t, "redis-server", s.conf)
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	waitRedis(s.t, s.ClientOptions(), p)
}

// Kill stops the server with SIGKILL (it keeps nothing) and waits for it.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Running reports whether the server is up (it was not killed, or was
// started again).
func (s *RedisServer) Running() bool {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	return p != nil && !p.Exited()
}

// ClientOptions returns options that connect to the server as the
// default user (with Password, and TLS with the CA and its client
// certificate when the server is TLS-only).
func (s *RedisServer) ClientOptions() *redis.Options {
	return s.UserOptions("", s.Opts.Password)
}

// UserOptions returns options that connect to the server as user (the
// default user when empty) with password.
func (s *RedisServer) UserOptions(user, password string) *redis.Options {
	o := &redis.Options{Addr: s.Addr, Username: user, Password: password}
	if s.Opts.TLS != nil {
		o.TLSConfig = s.Opts.TLS.ClientTLS()
	}
	return o
}

// Client returns a client of the default user, closed when the test ends.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(s.ClientOptions())
	t.Cleanup(func() { c.Close() })
	return c
}

// URL returns the server's address as a redis:// URL, or rediss:// when
// it is TLS-only, with user and password (left out when empty).
func (s *RedisServer) URL(user, password string) string {
	u := url.URL{Scheme: "redis", Host: s.Addr}
	if s.Opts.TLS != nil {
		u.Scheme = "rediss"
	}
	switch {
	case user != "":
		u.User = url.UserPassword(user, password)
	case password != "":
		u.User = url.UserPassword("", password)
	}
	return u.String()
}

// String names the server for messages.
func (s *RedisServer) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }

// waitRedis waits until the server at o.Addr answers a PING, with any
// reply (an authentication error is an answer too), and fails the test
// after 10 seconds or when the process died.
func waitRedis(t testing.TB, o *redis.Options, p *Process) {
	t.Helper()
	c := redis.NewClient(o)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		var reply redis.Error
		if err == nil || errors.As(err, &reply) {
			return
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("testenv: redis-server on %s did not answer: %v\n%s", o.Addr, err, p.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// DeleteKeys removes every key under prefix+":" from the Redis at addr
// when the test ends (and nothing else).
func DeleteKeys(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var keys []string
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
				t.Logf("testenv: delete keys under %s: %v", prefix, err)
				return
			}
			keys = keys[n:]
		}
	})
}

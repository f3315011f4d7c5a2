package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process owned by one test: it may be
// flushed, killed or restarted without touching the shared Redis.
type RedisServer struct {
	Addr string
	Port int
	cmd  *exec.Cmd
	t    testing.TB
}

// StartRedis starts a private redis-server (no persistence) on a free
// loopback port and stops it when the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Unavailable(t, "redis-server binary", err)
	}
	s := &RedisServer{t: t, Port: FreePort(t)}
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start (re)starts the server on its port and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("testenv: start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("testenv: redis-server on %s did not answer: %v", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL (it keeps nothing) and waits for it.
func (s *RedisServer) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
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

// String names the server for messages.
func (s *RedisServer) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }

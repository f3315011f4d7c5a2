package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the Sentinels of StartSentinel monitor.
const SentinelMaster = "dagflow-master"

// RedisSentinel is a Redis master, one replica and three Sentinels
// (quorum 2) on loopback, owned by one test.
type RedisSentinel struct {
	// MasterName is the name the Sentinels know the master by.
	MasterName string
	// SentinelAddrs are the Sentinels' addresses.
	SentinelAddrs []string
	// Servers are the data nodes: the first master and its replica. Which
	// one is master changes with a failover (MasterAddr).
	Servers []*RedisServer

	sentinels []*Process
}

// StartSentinel starts a master, a replica and three Sentinels monitoring
// them (quorum 2, a node is down after 1s, failover timeout 3s), waits
// until every Sentinel knows the replica and the other Sentinels, and
// stops them all when the test ends.
func StartSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	return StartSentinelWith(t, RedisOptions{})
}

// StartSentinelWith is StartSentinel with the master and the replica
// started with opts (ACL users, say); opts.Port, opts.TLS and
// opts.Password must be unset, and the default user must keep its rights,
// which the Sentinels and the replica use.
func StartSentinelWith(t testing.TB, opts RedisOptions) *RedisSentinel {
	t.Helper()
	if opts.Port != 0 || opts.TLS != nil || opts.Password != "" {
		t.Fatal("testenv: StartSentinelWith: Port, TLS and Password are not supported")
	}
	master := StartRedisWith(t, opts)
	ro := opts
	ro.Config = append([]string{"replicaof 127.0.0.1 " + strconv.Itoa(master.Port)}, opts.Config...)
	replica := StartRedisWith(t, ro)
	s := &RedisSentinel{MasterName: SentinelMaster, Servers: []*RedisServer{master, replica}}
	for range 3 {
		addr, p := startSentinel(t, "",
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", SentinelMaster, master.Port),
			"sentinel down-after-milliseconds "+SentinelMaster+" 1000",
			"sentinel failover-timeout "+SentinelMaster+" 3000",
			"sentinel parallel-syncs "+SentinelMaster+" 1",
		)
		s.sentinels = append(s.sentinels, p)
		s.SentinelAddrs = append(s.SentinelAddrs, addr)
	}
	s.waitReady(t, master.Addr)
	return s
}

// MasterAddr returns the master's address as the Sentinels report it.
func (s *RedisSentinel) MasterAddr(t testing.TB) string {
	t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs[0]})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hp, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil {
		t.Fatalf("testenv: SENTINEL GET-MASTER-ADDR-BY-NAME: %v", err)
	}
	return hp[0] + ":" + hp[1]
}

// Failover makes the Sentinels promote the replica (SENTINEL FAILOVER)
// and waits until every Sentinel names the new master, which it returns.
// The old master becomes the new one's replica shortly after; WaitReady
// waits for that before another failover. Failover returns errors rather
// than failing the test, so that it may run on another goroutine.
func (s *RedisSentinel) Failover() (string, error) {
	old, err := s.masterFrom(s.SentinelAddrs[0])
	if err != nil {
		return "", fmt.Errorf("testenv: sentinel %s: %w", s.SentinelAddrs[0], err)
	}
	c := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs[0]})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Failover(ctx, s.MasterName).Err(); err != nil {
		return "", fmt.Errorf("testenv: SENTINEL FAILOVER %s: %w", s.MasterName, err)
	}
	return s.waitNewMaster(old)
}

// KillMaster SIGKILLs the current master, as a crashed machine would, and
// waits until every Sentinel names the promoted replica, which it returns.
// Writes the replica had not received are lost. The killed server stays
// down. Like Failover it returns errors rather than failing the test.
func (s *RedisSentinel) KillMaster() (string, error) {
	old, err := s.masterFrom(s.SentinelAddrs[0])
	if err != nil {
		return "", fmt.Errorf("testenv: sentinel %s: %w", s.SentinelAddrs[0], err)
	}
	killed := false
	for _, srv := range s.Servers {
		if srv.Addr == old {
			srv.Kill()
			killed = true
		}
	}
	if !killed {
		return "", fmt.Errorf("testenv: the Sentinels name %s master, which is none of this test's servers", old)
	}
	return s.waitNewMaster(old)
}

// waitNewMaster waits until every Sentinel names the same master, other
// than old, and returns it.
func (s *RedisSentinel) waitNewMaster(old string) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		now, why := s.agreed(old)
		if now != "" {
			return now, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("testenv: the Sentinels named no new master within 30s; last: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agreed returns the master every Sentinel names if it is not old, or ""
// and why not.
func (s *RedisSentinel) agreed(old string) (master, why string) {
	for _, addr := range s.SentinelAddrs {
		a, err := s.masterFrom(addr)
		if err != nil {
			return "", err.Error()
		}
		if a == old || (master != "" && a != master) {
			return "", addr + " names " + a
		}
		master = a
	}
	return master, ""
}

// WaitReady waits until every Sentinel agrees on the master and knows its
// replica (with its link up) and the other Sentinels: until a failover
// can happen.
func (s *RedisSentinel) WaitReady(t testing.TB) {
	t.Helper()
	s.waitReady(t, s.MasterAddr(t))
}

// waitReady waits until every Sentinel names master, knows its replica
// (up, with its link to the master up) and the two other Sentinels: until
// a failover can happen.
func (s *RedisSentinel) waitReady(t testing.TB, master string) {
	t.Helper()
	for _, addr := range s.SentinelAddrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: addr})
		waitFor(t, 30*time.Second, "Sentinel "+addr+" ready for a failover", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			m, err := s.masterFrom(addr)
			if err != nil || m != master {
				return false, fmt.Sprintf("master %s (%v)", m, err)
			}
			reps, err := c.Replicas(ctx, s.MasterName).Result()
			if err != nil || len(reps) != 1 {
				return false, fmt.Sprintf("replicas %v (%v)", reps, err)
			}
			if r := reps[0]; r["flags"] != "slave" || r["master-link-status"] != "ok" {
				return false, fmt.Sprintf("replica %s flags %s link %s", r["name"], r["flags"], r["master-link-status"])
			}
			sens, err := c.Sentinels(ctx, s.MasterName).Result()
			if err != nil || len(sens) != len(s.SentinelAddrs)-1 {
				return false, fmt.Sprintf("%d other sentinels (%v)", len(sens), err)
			}
			return true, ""
		})
		c.Close()
	}
}

func (s *RedisSentinel) masterFrom(sentinel string) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: sentinel})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	hp, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil {
		return "", err
	}
	return hp[0] + ":" + hp[1], nil
}

// FailoverOptions returns options for a go-redis failover client of the
// master.
func (s *RedisSentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs}
}

// URL returns the Sentinels as a go-redis failover URL:
// redis://<first sentinel>?master_name=<name>&addr=<other sentinels>.
func (s *RedisSentinel) URL() string {
	q := url.Values{"master_name": {s.MasterName}, "addr": s.SentinelAddrs[1:]}
	return (&url.URL{Scheme: "redis", Host: s.SentinelAddrs[0], RawQuery: q.Encode()}).String()
}

// SentinelOptions configure StartSentinelOf.
type SentinelOptions struct {
	// MasterName is the name the Sentinel knows the master by. Default
	// SentinelMaster.
	MasterName string
	// Password is the Sentinel's own password (requirepass), which its
	// clients must give; the master's Password is the Sentinel's
	// auth-pass.
	Password string
}

// StartSentinelOf starts one Sentinel monitoring master (quorum 1), as
// the only Sentinel of a setup without failover, waits until it answers
// and returns its address. It stops when the test ends or the test
// process dies.
func StartSentinelOf(t testing.TB, master *RedisServer, opts SentinelOptions) string {
	t.Helper()
	if master.Opts.TLS != nil {
		t.Fatal("testenv: StartSentinelOf: a TLS master is not supported")
	}
	if opts.MasterName == "" {
		opts.MasterName = SentinelMaster
	}
	lines := []string{fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", opts.MasterName, master.Port)}
	if opts.Password != "" {
		lines = append(lines, "requirepass "+strconv.Quote(opts.Password))
	}
	if master.Opts.Password != "" {
		lines = append(lines, "sentinel auth-pass "+opts.MasterName+" "+strconv.Quote(master.Opts.Password))
	}
	addr, _ := startSentinel(t, opts.Password, lines...)
	return addr
}

// startSentinel starts a Sentinel on a free loopback port with the
// sentinel.conf lines given after the common ones, waits until it
// answers (to a client with password) and returns its address. It stops
// when the test ends or the test process dies.
func startSentinel(t testing.TB, password string, lines ...string) (string, *Process) {
	t.Helper()
	port := FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it
	text := strings.Join(append([]string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + strconv.Quote(dir),
		"daemonize no",
		"loglevel warning",
	}, lines...), "\n") + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatalf("testenv: write %s: %v", conf, err)
	}
	p := StartProcess(t, "redis-server", conf, "--sentinel")
	addr := "127.0.0.1:" + strconv.Itoa(port)
	waitRedis(t, &redis.Options{Addr: addr, Password: password}, p)
	return addr, p
}

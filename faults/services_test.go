package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// viaProxy rewrites a DSN to connect through p.
func viaProxy(p *Proxy) func(string) string {
	return func(dsn string) string {
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			panic(err)
		}
		cfg.Addr = p.Addr()
		return cfg.FormatDSN()
	}
}

func newProxy(t *testing.T, target string, mysql bool) *Proxy {
	t.Helper()
	p, err := NewProxy(ProxyConfig{Target: target, MySQL: mysql})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func mysqlAddr(t *testing.T) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testenv.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}

// countSucceeded counts the succeeded forward attempts in the scenario's
// database: progress. A step's succeeded attempt is held on its step row
// (no attempt row), so this counts the steps whose handler succeeded,
// compensated since or not.
func (c *cluster) countSucceeded() int {
	var n int
	c.db.QueryRow(`SELECT COUNT(*) FROM step_runs WHERE status IN ('succeeded', 'compensating', 'compensated', 'compensation_failed')`).Scan(&n)
	return n
}

// triggerMany starts n chain runs with p (N set to i).
func (c *cluster) triggerMany(n int, p plan) []string {
	c.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		p.N = i
		ids[i] = c.trigger(wfChain, p)
	}
	return ids
}

func assertAllSucceeded(t *testing.T, runs map[string]persistence.Run) {
	t.Helper()
	for id, r := range runs {
		if r.Status != persistence.RunSucceeded {
			t.Errorf("run %s: %s (%s), want succeeded", id, r.Status, r.Error)
		}
	}
}

// Scenario 3: Redis loses everything mid-run, by FLUSHALL and by a
// SIGKILL of a Redis without persistence followed by a restart; the
// reconcilers rebuild the queues from MySQL and every run finishes.
func TestRedisLosesEverything(t *testing.T) {
	for _, how := range []string{"flushall", "kill -9 and restart"} {
		t.Run(how, func(t *testing.T) {
			srv := testenv.StartRedis(t) // private: the shared Redis is never flushed or killed
			c := newCluster(t, clusterOptions{Redis: srv.Addr})
			c.start(2, nil)
			ids := c.triggerMany(30, plan{SleepMS: map[string]int{"b": 100, "c": 50}})
			testenv.Eventually(t, 30*time.Second, func() bool { return c.countSucceeded() >= 30 }, "some progress")
			before := c.countSucceeded()
			if how == "flushall" {
				if err := c.rdb.FlushAll(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			} else {
				srv.Kill()
				srv.Start()
			}
			lost := time.Now()
			runs := checkInvariants(t, c, ids, 60*time.Second)
			logRecovery(t, fmt.Sprintf("redis %s after %d of %d steps: -> all runs finished", how, before, 4*len(ids)), time.Since(lost))
			assertAllSucceeded(t, runs)
		})
	}
}

// Scenario 4: Redis is down for 30 s. Every Trigger either succeeds (the
// run is in MySQL and runs once Redis is back) or returns an error; the
// triggering process and the workers stay up; the backlog drains after
// Redis returns.
func TestRedisDown30s(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s outage")
	}
	srv := testenv.StartRedis(t)
	c := newCluster(t, clusterOptions{Redis: srv.Addr})
	ws := c.start(2, nil)
	ids := c.triggerMany(10, plan{SleepMS: map[string]int{"b": 100}})
	testenv.Eventually(t, 30*time.Second, func() bool { return c.countSucceeded() >= 5 }, "some progress")
	srv.Kill()
	ids = append(ids, triggerThrough(t, c, ws, "the Redis outage", 30*time.Second, 3*time.Second)...)
	srv.Start()
	up := time.Now()
	runs := checkInvariants(t, c, ids, 90*time.Second)
	logRecovery(t, fmt.Sprintf("redis down 30s: restart -> backlog of %d runs drained", len(ids)), time.Since(up))
	assertAllSucceeded(t, runs)
}

// Scenario 5: MariaDB is unreachable for 10 s (a proxy cuts every
// connection and refuses new ones) while runs progress. No acknowledged
// trigger is lost, no worker exits, and progress resumes within seconds
// of the restore.
func TestMariaDBUnreachable10s(t *testing.T) {
	p := newProxy(t, mysqlAddr(t), false)
	c := newCluster(t, clusterOptions{StoreDSN: viaProxy(p), TriggerDSN: viaProxy(p)})
	ws := c.start(2, nil)
	ids := c.triggerMany(20, plan{SleepMS: map[string]int{"b": 300, "c": 100}})
	testenv.Eventually(t, 30*time.Second, func() bool { return c.countSucceeded() >= 10 }, "some progress")
	p.Cut()
	acked := triggerThrough(t, c, ws, "the MariaDB outage", 10*time.Second, 2*time.Second)
	ids = append(ids, acked...)
	before := c.countSucceeded()
	p.Restore()
	restored := time.Now()
	testenv.Eventually(t, 15*time.Second, func() bool { return c.countSucceeded() > before }, "progress after the restore")
	logRecovery(t, "mariadb cut 10s: restore -> first step recorded", time.Since(restored))
	runs := checkInvariants(t, c, ids, 60*time.Second)
	logRecovery(t, "mariadb cut 10s: restore -> all runs finished", time.Since(restored))
	assertAllSucceeded(t, runs)
}

// Scenario 6: the proxy forwards the COMMIT of b's completion and drops
// the reply, so the worker cannot know whether it committed. Exactly one
// success is recorded and the successors run once.
func TestAmbiguousCommit(t *testing.T) {
	p := newProxy(t, mysqlAddr(t), true)
	c := newCluster(t, clusterOptions{StoreDSN: viaProxy(p)})
	c.start(2, nil)
	marker := "ambiguous-" + testenv.RandomSuffix(12)
	fired := p.DropReplyAfter([]byte(marker), "COMMIT")
	id := c.trigger(wfChain, plan{N: 6, Mark: map[string]string{"b": marker}})
	select {
	case <-fired:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy saw no COMMIT after b's completion")
	}
	dropped := time.Now()
	runs := checkInvariants(t, c, []string{id}, 30*time.Second)
	logRecovery(t, "ambiguous commit: dropped reply -> run finished", time.Since(dropped))
	if got := runs[id].Status; got != persistence.RunSucceeded {
		t.Fatalf("run %s: %s, want succeeded (%s)", id, got, runs[id].Error)
	}
	info, err := c.eng.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := successes(info, "b"); got != 1 {
		t.Errorf("b: %d successes recorded, want 1", got)
	}
	for _, s := range []string{"c", "d"} {
		if n := c.invocations(id, s, effectDo); n != 1 {
			t.Errorf("successor %s ran %d times, want 1", s, n)
		}
	}
	t.Logf("proxy: %+v; b ran %d time(s)", p.Stats(), c.invocations(id, "b", effectDo))
}

// triggerThrough triggers a run every half second for the length of an
// outage (each call bounded by callTimeout), returns the ids of the
// triggers that were acknowledged, and fails the test if a worker exited
// meanwhile.
func triggerThrough(t *testing.T, c *cluster, ws []*worker, outage string, length, callTimeout time.Duration) []string {
	t.Helper()
	start := time.Now()
	var ids []string
	failed := 0
	for i := 0; time.Since(start) < length; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		id, err := c.eng.Trigger(ctx, wfChain, plan{N: 1000 + i})
		cancel()
		if err != nil {
			failed++
		} else {
			ids = append(ids, id)
		}
		time.Sleep(500 * time.Millisecond) // spreads triggers over the outage
	}
	for _, w := range ws {
		if !w.alive() {
			t.Fatalf("worker %s exited during %s: %v", w.name, outage, w.err)
		}
	}
	t.Logf("during %s: %d triggers acknowledged, %d returned an error", outage, len(ids), failed)
	return ids
}

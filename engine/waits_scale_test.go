package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// redisFootprint counts the keys under prefix and the entries they hold
// (list, set, sorted set and hash lengths; 1 per string), but the queues'
// waiting flags.
func redisFootprint(t *testing.T, c redis.UniversalClient, prefix string) (keys, entries int64) {
	t.Helper()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if strings.HasSuffix(k, ":waiting") {
			// A queue's waiting flag: one per queue while a consumer
			// waits for work, whatever waits in the store.
			continue
		}
		keys++
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		switch typ {
		case "list":
			n, err = c.LLen(ctx, k).Result()
		case "set":
			n, err = c.SCard(ctx, k).Result()
		case "zset":
			n, err = c.ZCard(ctx, k).Result()
		case "hash":
			n, err = c.HLen(ctx, k).Result()
		default:
			n = 1
		}
		if err != nil {
			t.Fatal(err)
		}
		entries += n
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys, entries
}

// inParallel runs f(i) for i in [0, n) on 16 goroutines.
func inParallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// TestTenThousandWaiters: 10,000 runs waiting for payment.captured at
// once hold no worker slot and add nothing to Redis (the keys under the
// test's prefix and their entries are what they were before the runs),
// and 10,000 events, one per order, complete them all. The time the
// events take and, on MariaDB, the statements one event's matching costs
// are logged.
func TestTenThousandWaiters(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 runs")
	}
	if engine.RaceEnabled {
		// The race detector makes 10,000 runs take many minutes and
		// measures itself: make test runs this in a pass without it.
		t.Skip("10,000 runs: run without -race (make test does)")
	}
	eachBackend(t, func(t *testing.T, b backend) {
		const n = 10000
		w, err := dag.New("waiter").Step("paid", nil, dag.WaitFor("payment.captured", dag.Correlate("input.order_id"))).Build()
		if err != nil {
			t.Fatal(err)
		}
		o := b.opts(t)
		o.Workflows = []*dag.Workflow{w}
		o.Clock = engine.SystemClock
		env := enginetest.New(t, o)
		ctx := context.Background()
		keys0, entries0 := redisFootprint(t, env.Redis, env.Prefix)

		start := time.Now()
		ids := make([]string, n)
		if err := inParallel(n, func(i int) error {
			id, err := env.Engine.Trigger(ctx, "waiter", map[string]any{"order_id": fmt.Sprintf("o-%d", i)})
			ids[i] = id
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for env.Engine.Stats().StepsParked < n {
			if time.Since(start) > 10*time.Minute {
				t.Fatalf("%d of %d steps parked after %v", env.Engine.Stats().StepsParked, n, time.Since(start))
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s: %d runs created and parked in %v", b.name, n, time.Since(start).Round(time.Millisecond))
		// The parked counter moves when a park commits, the slot is
		// given back just after: let the last few parks return.
		for wait := time.Now(); env.Engine.Stats().InFlight != 0 && time.Since(wait) < 5*time.Second; {
			time.Sleep(10 * time.Millisecond)
		}
		if got := env.Engine.Stats().InFlight; got != 0 {
			t.Errorf("%d steps in flight with %d runs waiting, want 0", got, n)
		}
		// Tasks of steps claimed in the store at create are still in the
		// queue until a worker drops them as taken: Redis holds nothing
		// for the waiting runs once those are gone.
		keys1, entries1 := redisFootprint(t, env.Redis, env.Prefix)
		for settle := time.Now(); (keys1 > keys0 || entries1 > entries0) && time.Since(settle) < time.Minute; {
			time.Sleep(100 * time.Millisecond)
			keys1, entries1 = redisFootprint(t, env.Redis, env.Prefix)
		}
		t.Logf("%s: Redis under the prefix: %d keys, %d entries before the runs; %d keys, %d entries with %d runs waiting",
			b.name, keys0, entries0, keys1, entries1, n)
		if entries1 > entries0 || keys1 > keys0 {
			sample, _, _ := env.Redis.Scan(ctx, 0, env.Prefix+"*", 10).Result()
			t.Errorf("Redis grew with the waiting runs: %d keys %d entries, before %d keys %d entries (keys such as %q)", keys1, entries1, keys0, entries0, sample)
		}

		start = time.Now()
		if err := inParallel(n, func(i int) error {
			_, err := env.Engine.Publish(ctx, "payment.captured", map[string]any{"order": i}, engine.Correlation(fmt.Sprintf("o-%d", i)))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		published := time.Since(start)
		for {
			page, err := env.Engine.Runs(ctx, engine.RunFilter{Workflow: "waiter", Status: []persistence.RunStatus{persistence.RunRunning}, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Runs) == 0 {
				break
			}
			if time.Since(start) > 5*time.Minute {
				t.Fatalf("runs still running %v after the events", time.Since(start))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: %d events published in %v (16 publishers), every run succeeded %v after the first event",
			b.name, n, published.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		for _, i := range []int{0, n / 2, n - 1} {
			info := mustGet(t, env.Engine, ids[i])
			if info.Run.Status != persistence.RunSucceeded || string(info.Steps[0].Output) != fmt.Sprintf(`{"order":%d}`, i) {
				t.Errorf("run %d: %s, output %s", i, info.Run.Status, info.Steps[0].Output)
			}
		}
		if b.name == "mysql+redis" {
			statementsPerEvent(t, env)
		}
	})
}

// statementsPerEvent parks 20 more waiters and matches each with one
// EventCreate through a store of one connection, whose session counters
// (Com_*, Questions) say what the matching cost.
func statementsPerEvent(t *testing.T, env *enginetest.Env) {
	t.Helper()
	ctx := context.Background()
	const m = 20
	var ids []string
	for i := range m {
		ids = append(ids, env.Trigger(t, "waiter", map[string]any{"order_id": fmt.Sprintf("m-%d", i)}))
	}
	for _, id := range ids {
		waitParked(t, env.Engine, id, "paid")
	}
	var dbName string
	if err := env.Store.(persistence.TxStore).DB().QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	cfg, err := gomysql.ParseDSN(testenv.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName, cfg.ParseTime = dbName, true
	one, err := mysql.Open(ctx, mysql.Config{DSN: cfg.FormatDSN(), MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	counters := func() (stmts, trips int64) {
		rows, err := one.DB().QueryContext(ctx, "SHOW SESSION STATUS WHERE Variable_name IN "+
			"('Questions', 'Com_select', 'Com_insert', 'Com_update', 'Com_delete', 'Com_delete_multi', 'Com_update_multi', 'Com_begin', 'Com_commit')")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name, v string
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			x, _ := strconv.ParseInt(v, 10, 64)
			if name == "Questions" {
				trips = x
			} else {
				stmts += x
			}
		}
		return stmts, trips
	}
	s0, q0 := counters()
	matched := 0
	for i := range m {
		res, err := one.EventCreate(ctx, persistence.EventCreateParams{ID: fmt.Sprintf("cost-%d", i), Name: "payment.captured",
			Payload: []byte(`{"ok":true}`), Correlation: fmt.Sprintf("m-%d", i), Dispatched: true, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		matched += len(res.Resolved)
	}
	s1, q1 := counters()
	if matched != m {
		t.Fatalf("%d of %d events matched their waiter", matched, m)
	}
	// The second SHOW counts itself once in Questions and Com_select.
	t.Logf("matching cost with %d runs waiting: %.1f statements and %.1f round trips per event (each matching one waiter)",
		10000, float64(s1-s0-1)/m, float64(q1-q0-1)/m)
}

package queue

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/clocktest"
	"github.com/dagflow/dagflow/internal/testenv"
)

// runSuite is the conformance suite every backend (real Redis, miniredis,
// Redis Cluster) must pass.
func runSuite(t *testing.T, newClient func(t testing.TB) redis.UniversalClient) {
	// setup returns a Queue with a fake clock and a long PollInterval, so
	// that anything faster than it proves a wake-up did the work.
	setup := func(t *testing.T) (*Queue, *clocktest.Clock) {
		clock := newFakeClock()
		q := newTestQueue(t, newClient(t), Config{Now: clock.Now, PollInterval: 30 * time.Second})
		return q, clock
	}
	ctx := context.Background()
	lease := time.Minute

	t.Run("Routing", func(t *testing.T) { runRouteSuite(t, setup) })

	t.Run("Ping", func(t *testing.T) {
		c := newClient(t)
		q := newTestQueue(t, c, Config{})
		if err := q.Ping(ctx); err != nil {
			t.Fatalf("ping: %v", err)
		}
		closed := newClient(t)
		closed.Close()
		qc, err := New(Config{Client: closed, Prefix: testenv.KeyPrefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := qc.Ping(ctx); err == nil || !strings.Contains(err.Error(), "queue: ping:") {
			t.Fatalf("ping on a closed client = %v, want a queue: ping: error", err)
		}
	})

	t.Run("EnqueueDequeueAck", func(t *testing.T) {
		q, clock := setup(t)
		added := mustEnqueue(t, q, "jobs", Item{ID: "a/1"}, Item{ID: "b/1"}, Item{ID: "c/1"})
		if diff := cmp.Diff([]bool{true, true, true}, added); diff != "" {
			t.Fatalf("added (-want +got):\n%s", diff)
		}
		wantStats(t, q, "jobs", Stats{Ready: 3})
		got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 2, Lease: lease})
		want := []Task{
			{ID: "a/1", Queue: "jobs", Deliveries: 1, LeaseUntil: clock.Now().Add(lease)},
			{ID: "b/1", Queue: "jobs", Deliveries: 1, LeaseUntil: clock.Now().Add(lease)},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("dequeue (-want +got):\n%s", diff)
		}
		wantStats(t, q, "jobs", Stats{Ready: 1, Leased: 2})
		if err := q.Ack(ctx, "jobs", "a/1", "b/1"); err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, "jobs", "a/1", "never-seen"); err != nil {
			t.Fatalf("second ack: %v", err)
		}
		wantStats(t, q, "jobs", Stats{Ready: 1})
		got = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
		if len(got) != 1 || got[0].ID != "c/1" {
			t.Fatalf("dequeue = %+v, want c/1", got)
		}
		if err := q.Ack(ctx, "jobs", "c/1"); err != nil {
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{})
		if added := mustEnqueue(t, q, "jobs", Item{ID: "a/1"}); !added[0] {
			t.Fatal("enqueue after ack: not added")
		}
	})

	t.Run("DuplicateEnqueue", func(t *testing.T) {
		q, clock := setup(t)
		got := mustEnqueue(t, q, "jobs", Item{ID: "r"}, Item{ID: "r"}, Item{ID: "d", At: clock.Now().Add(time.Hour)}, Item{ID: "l"})
		if diff := cmp.Diff([]bool{true, false, true, true}, got); diff != "" {
			t.Fatalf("first enqueue (-want +got):\n%s", diff)
		}
		// Lease "r", leaving "l" ready.
		if tasks := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Lease: lease}); tasks[0].ID != "r" {
			t.Fatalf("dequeued %+v, want r", tasks)
		}
		// r leased, d delayed, l ready: all already there, whenever due.
		got = mustEnqueue(t, q, "jobs", Item{ID: "r"}, Item{ID: "d"}, Item{ID: "l", At: clock.Now().Add(time.Hour)})
		if diff := cmp.Diff([]bool{false, false, false}, got); diff != "" {
			t.Fatalf("duplicate enqueue (-want +got):\n%s", diff)
		}
		wantStats(t, q, "jobs", Stats{Ready: 1, Delayed: 1, Leased: 1})
	})

	t.Run("LegacyDeadEntry", func(t *testing.T) {
		// Older versions kept a dead set: an index entry in state 3 with
		// its delivery count, the id in a dead zset and its reason in a
		// hash. Plant that as they left it, in this test's own prefix.
		q, clock := setup(t)
		k := q.keys("jobs")
		// The bucket of an id, as lua/common.lua computes it.
		sum := sha1.Sum([]byte("old"))
		bucket := fmt.Sprint(k.index, (int(sum[0])<<8|int(sum[1]))%2048)
		const deadState, deliveries = 3, 5
		if err := q.client.HSet(ctx, bucket, "old", deliveries*4+deadState).Err(); err != nil {
			t.Fatal(err)
		}
		base := q.prefix + ":{jobs}:"
		if err := q.client.ZAdd(ctx, base+"dead", redis.Z{Score: float64(clock.Now().UnixMilli()), Member: "old"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := q.client.HSet(ctx, base+"reasons", "old", "too many deliveries").Err(); err != nil {
			t.Fatal(err)
		}
		// Nothing counts or lists it, and the live-state calls pass it by.
		wantStats(t, q, "jobs", Stats{})
		for _, st := range []State{StateReady, StateDelayed, StateLeased} {
			if infos, err := q.List(ctx, "jobs", st, 0, 10); err != nil || len(infos) != 0 {
				t.Fatalf("list %s = %+v, %v; want nothing", st, infos, err)
			}
		}
		if err := q.Retry(ctx, "jobs", "old", clock.Now()); !errors.Is(err, ErrNotLeased) {
			t.Fatalf("retry of a legacy dead task: %v, want ErrNotLeased", err)
		}
		if ok, err := q.Extend(ctx, "jobs", "old", lease); err != nil || ok {
			t.Fatalf("extend of a legacy dead task = %v, %v; want false", ok, err)
		}
		if err := q.Release(ctx, "jobs", "old"); err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, "jobs", "old"); err != nil {
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{})
		// Enqueue treats it as absent and overwrites it: the task is
		// added, fresh, and runs like any other.
		if got := mustEnqueue(t, q, "jobs", Item{ID: "old"}, Item{ID: "new"}); !cmp.Equal(got, []bool{true, true}) {
			t.Fatalf("enqueue over a legacy dead entry = %v, want [true true]", got)
		}
		wantStats(t, q, "jobs", Stats{Ready: 2})
		tasks := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 2, Lease: lease})
		want := []Task{
			{ID: "old", Queue: "jobs", Deliveries: 1, LeaseUntil: clock.Now().Add(lease)},
			{ID: "new", Queue: "jobs", Deliveries: 1, LeaseUntil: clock.Now().Add(lease)},
		}
		if diff := cmp.Diff(want, tasks); diff != "" {
			t.Fatalf("dequeue (-want +got):\n%s", diff)
		}
		if err := q.Ack(ctx, "jobs", "old", "new"); err != nil {
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{})
		if n, err := q.client.HExists(ctx, bucket, "old").Result(); err != nil || n {
			t.Fatalf("index entry after ack: %v, %v; want gone", n, err)
		}
	})

	t.Run("DelayedAndSweep", func(t *testing.T) {
		q, clock := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "later", At: clock.Now().Add(time.Minute)}, Item{ID: "past", At: clock.Now().Add(-time.Minute)})
		wantStats(t, q, "jobs", Stats{Ready: 1, Delayed: 1})
		if tasks := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(tasks) != 1 || tasks[0].ID != "past" {
			t.Fatalf("dequeue = %+v, want only past", tasks)
		}
		if err := q.Ack(ctx, "jobs", "past"); err != nil {
			t.Fatal(err)
		}
		res, err := q.Sweep(ctx, "jobs", 10)
		if err != nil || res != (SweepResult{}) {
			t.Fatalf("early sweep = %+v, %v; want nothing", res, err)
		}
		clock.Advance(time.Minute)
		res, err = q.Sweep(ctx, "jobs", 10)
		if err != nil || res != (SweepResult{Promoted: 1}) {
			t.Fatalf("sweep = %+v, %v; want 1 promoted", res, err)
		}
		// Dequeue promotes by itself too.
		mustEnqueue(t, q, "jobs", Item{ID: "later2", At: clock.Now().Add(time.Second)})
		clock.Advance(time.Second)
		tasks := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if len(tasks) != 2 || tasks[0].ID != "later" || tasks[1].ID != "later2" {
			t.Fatalf("dequeue = %+v, want later, later2", tasks)
		}
	})

	t.Run("DueNeverEarly", func(t *testing.T) {
		q, clock := setup(t)
		// Due 100.6 ms from a whole millisecond: not ready at 100.4 ms
		// (the millisecond it falls in), ready at 101 ms.
		at := clock.Now().Add(100*time.Millisecond + 600*time.Microsecond)
		mustEnqueue(t, q, "jobs", Item{ID: "sub-ms", At: at})
		clock.Advance(100*time.Millisecond + 400*time.Microsecond)
		if res, err := q.Sweep(ctx, "jobs", 10); err != nil || res.Promoted != 0 {
			t.Fatalf("sweep %v before due = %+v, %v; want nothing promoted", at.Sub(clock.Now()), res, err)
		}
		clock.Advance(600 * time.Microsecond)
		tasks := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
		if len(tasks) != 1 || clock.Now().Before(at) {
			t.Fatalf("dequeue at %v = %+v, want sub-ms, not before %v", clock.Now(), tasks, at)
		}
		// Retry rounds up the same way.
		retryAt := clock.Now().Add(50*time.Millisecond + time.Microsecond)
		if err := q.Retry(ctx, "jobs", "sub-ms", retryAt); err != nil {
			t.Fatal(err)
		}
		clock.Advance(50 * time.Millisecond)
		if res, err := q.Sweep(ctx, "jobs", 10); err != nil || res.Promoted != 0 {
			t.Fatalf("sweep 1 µs before the retry = %+v, %v; want nothing promoted", res, err)
		}
	})

	t.Run("SoonerDelayedWakesWaiter", func(t *testing.T) {
		// A real clock and a poll interval far longer than the test: only
		// a wake-up can make the delayed tasks come on time.
		q := newTestQueue(t, newClient(t), Config{PollInterval: time.Minute})
		mustEnqueue(t, q, "jobs", Item{ID: "far", At: time.Now().Add(time.Hour)})
		for _, via := range []string{"enqueue", "retry"} {
			got := make(chan time.Time, 1)
			go func() {
				tasks, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
				if err != nil || len(tasks) != 1 {
					t.Errorf("%s: dequeue = %+v, %v", via, tasks, err)
				}
				got <- time.Now()
			}()
			waitForWaiters(t, q, "jobs", 1)
			due := time.Now().Add(100 * time.Millisecond)
			switch via {
			case "enqueue":
				mustEnqueue(t, q, "jobs", Item{ID: "soon", At: due})
			case "retry":
				if err := q.Retry(ctx, "jobs", "soon", due); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case at := <-got:
				// Late by the machine's load at most, never by the poll
				// interval (a minute); engine's on-time tests hold the
				// 50 ms bound on a quiet machine.
				if at.Before(due) || at.Sub(due) > time.Second {
					t.Fatalf("%s: a task due at %v came at %v (%v late)", via, due.Format(time.StampMicro), at.Format(time.StampMicro), at.Sub(due))
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the waiter slept past a sooner delayed task", via)
			}
		}
	})

	t.Run("SweepBounded", func(t *testing.T) {
		q, clock := setup(t)
		var items []Item
		for i := range 25 {
			items = append(items, Item{ID: fmt.Sprint("t", i), At: clock.Now().Add(time.Second)})
		}
		mustEnqueue(t, q, "jobs", items...)
		clock.Advance(time.Second)
		total := 0
		for {
			res, err := q.Sweep(ctx, "jobs", 10)
			if err != nil {
				t.Fatal(err)
			}
			if res.Promoted > 10 {
				t.Fatalf("sweep promoted %d, limit 10", res.Promoted)
			}
			if res.Promoted == 0 {
				break
			}
			total += res.Promoted
		}
		if total != 25 {
			t.Fatalf("promoted %d in all, want 25", total)
		}
	})

	t.Run("LeaseExpiryAndExtend", func(t *testing.T) {
		q, clock := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "x"}, Item{ID: "y"})
		tasks := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 2, Lease: time.Minute})
		if len(tasks) != 2 {
			t.Fatalf("dequeued %d, want 2", len(tasks))
		}
		clock.Advance(50 * time.Second)
		if ok, err := q.Extend(ctx, "jobs", "y", time.Minute); err != nil || !ok {
			t.Fatalf("extend y = %v, %v; want true", ok, err)
		}
		infos, err := q.List(ctx, "jobs", StateLeased, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []TaskInfo{
			{ID: "x", State: StateLeased, Deliveries: 1, Due: clock.Now().Add(10 * time.Second)},
			{ID: "y", State: StateLeased, Deliveries: 1, Due: clock.Now().Add(time.Minute)},
		}
		if diff := cmp.Diff(want, infos); diff != "" {
			t.Fatalf("leased (-want +got):\n%s", diff)
		}
		clock.Advance(10 * time.Second) // x's lease ends now
		if res, err := q.Sweep(ctx, "jobs", 10); err != nil || res != (SweepResult{Expired: 1}) {
			t.Fatalf("sweep = %+v, %v; want 1 expired", res, err)
		}
		if ok, err := q.Extend(ctx, "jobs", "x", time.Minute); err != nil || ok {
			t.Fatalf("extend of expired x = %v, %v; want false", ok, err)
		}
		tasks = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Lease: time.Minute})
		if tasks[0].ID != "x" || tasks[0].Deliveries != 2 {
			t.Fatalf("redelivery = %+v, want x with 2 deliveries", tasks[0])
		}
		// Dequeue also reclaims expired leases by itself.
		clock.Advance(2 * time.Minute)
		tasks = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 5, Lease: time.Minute})
		if len(tasks) != 2 {
			t.Fatalf("after expiry dequeued %+v, want y and x", tasks)
		}
		if err := q.Ack(ctx, "jobs", "x", "y"); err != nil {
			t.Fatal(err)
		}
		if ok, err := q.Extend(ctx, "jobs", "x", time.Minute); err != nil || ok {
			t.Fatalf("extend after ack = %v, %v; want false", ok, err)
		}
	})

	t.Run("Retry", func(t *testing.T) {
		q, clock := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "x"}, Item{ID: "y"})
		mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 2, Lease: lease})
		at := clock.Now().Add(time.Minute)
		if err := q.Retry(ctx, "jobs", "x", at); err != nil {
			t.Fatal(err)
		}
		if err := q.Retry(ctx, "jobs", "x", at); !errors.Is(err, ErrNotLeased) || !strings.Contains(err.Error(), `"x"`) {
			t.Fatalf("second retry: %v, want ErrNotLeased naming x", err)
		}
		if err := q.Retry(ctx, "jobs", "y", time.Time{}); err != nil { // due now: ready at once
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{Ready: 1, Delayed: 1})
		infos, err := q.List(ctx, "jobs", StateDelayed, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]TaskInfo{{ID: "x", State: StateDelayed, Deliveries: 1, Due: at}}, infos); diff != "" {
			t.Fatalf("delayed (-want +got):\n%s", diff)
		}
		clock.Advance(time.Minute)
		tasks := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 5, Lease: lease})
		if diff := cmp.Diff([]string{"y", "x"}, taskIDs(tasks)); diff != "" {
			t.Fatalf("after retry (-want +got):\n%s", diff)
		}
		for _, task := range tasks {
			if task.Deliveries != 2 {
				t.Errorf("%s: deliveries %d, want 2", task.ID, task.Deliveries)
			}
		}
	})

	t.Run("Release", func(t *testing.T) {
		q, _ := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "a"}, Item{ID: "b"}, Item{ID: "c"}, Item{ID: "d"})
		tasks := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 2, Lease: lease})
		if diff := cmp.Diff([]string{"a", "b"}, taskIDs(tasks)); diff != "" {
			t.Fatalf("dequeue (-want +got):\n%s", diff)
		}
		if err := q.Release(ctx, "jobs", "a", "b", "not-leased"); err != nil {
			t.Fatal(err)
		}
		infos, err := q.List(ctx, "jobs", StateReady, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []TaskInfo{{ID: "a", State: StateReady}, {ID: "b", State: StateReady}, {ID: "c", State: StateReady}, {ID: "d", State: StateReady}}
		if diff := cmp.Diff(want, infos); diff != "" {
			t.Fatalf("ready after release (-want +got):\n%s", diff)
		}
		tasks = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
		if tasks[0].ID != "a" || tasks[0].Deliveries != 1 {
			t.Fatalf("after release got %+v, want a with 1 delivery", tasks[0])
		}
	})

	t.Run("ListPages", func(t *testing.T) {
		q, clock := setup(t)
		var items []Item
		for i := range 5 {
			items = append(items, Item{ID: fmt.Sprint("t", i)})
		}
		mustEnqueue(t, q, "jobs", items...)
		for range 5 {
			clock.Advance(time.Second)
			mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
		}
		wantStats(t, q, "jobs", Stats{Leased: 5})
		infos, err := q.List(ctx, "jobs", StateLeased, 3, 5)
		if err != nil {
			t.Fatal(err)
		}
		want := []TaskInfo{
			{ID: "t3", State: StateLeased, Deliveries: 1, Due: clock.Now().Add(lease - time.Second)},
			{ID: "t4", State: StateLeased, Deliveries: 1, Due: clock.Now().Add(lease)},
		}
		if diff := cmp.Diff(want, infos); diff != "" {
			t.Fatalf("leased page (-want +got):\n%s", diff)
		}
		if infos, err := q.List(ctx, "jobs", StateLeased, 1, 0); err != nil || len(infos) != 0 {
			t.Fatalf("list with limit 0 = %+v, %v; want nothing", infos, err)
		}
		for _, st := range []State{State("lost"), State("dead")} {
			if _, err := q.List(ctx, "jobs", st, 0, 1); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("list of state %q: %v, want ErrInvalidArgument", st, err)
			}
		}
		if _, err := q.List(ctx, "jobs", StateReady, -1, 1); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("list with a negative offset: %v, want ErrInvalidArgument", err)
		}
	})

	t.Run("Priority", func(t *testing.T) {
		q, _ := setup(t)
		mustEnqueue(t, q, "low", Item{ID: "l1"}, Item{ID: "l2"})
		mustEnqueue(t, q, "high", Item{ID: "h1"})
		p := DequeueParams{Queues: []string{"high", "low"}, Max: 5, Lease: lease}
		if got := taskIDs(mustDequeue(t, q, p)); !cmp.Equal(got, []string{"h1"}) {
			t.Fatalf("first = %v, want [h1] (a batch comes from one queue)", got)
		}
		if got := taskIDs(mustDequeue(t, q, p)); !cmp.Equal(got, []string{"l1", "l2"}) {
			t.Fatalf("second = %v, want [l1 l2]", got)
		}
	})

	t.Run("Weights", func(t *testing.T) {
		q, _ := setup(t)
		const n = 400
		var a, b []Item
		for i := range n {
			a = append(a, Item{ID: fmt.Sprint("a", i)})
			b = append(b, Item{ID: fmt.Sprint("b", i)})
		}
		mustEnqueue(t, q, "qa", a...)
		mustEnqueue(t, q, "qb", b...)
		counts := map[string]int{}
		for range n {
			tasks := mustDequeue(t, q, DequeueParams{Weights: map[string]int{"qa": 3, "qb": 1}, Lease: lease})
			counts[tasks[0].Queue]++
		}
		// Expect 300 from qa; allow a wide margin for randomness.
		if counts["qa"] < 260 || counts["qa"] > 340 {
			t.Fatalf("weighted picks %v, want about 3:1", counts)
		}
		if _, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"qa"}, Weights: map[string]int{"qa": 1, "qc": 1}, Lease: lease}); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("weight for an unlisted queue: %v", err)
		}
	})

	t.Run("BlockingWakesOnEnqueue", func(t *testing.T) {
		q, _ := setup(t)
		type result struct {
			tasks []Task
			err   error
			at    time.Time
		}
		const consumers = 4
		results := make(chan result, consumers)
		for range consumers {
			go func() {
				tasks, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"other", "jobs"}, Lease: lease})
				results <- result{tasks, err, time.Now()}
			}()
		}
		waitForWaiters(t, q, "jobs", consumers)
		start := time.Now()
		var items []Item
		for i := range consumers {
			items = append(items, Item{ID: fmt.Sprint("w", i)})
		}
		mustEnqueue(t, q, "jobs", items...)
		seen := map[string]bool{}
		for range consumers {
			select {
			case r := <-results:
				if r.err != nil || len(r.tasks) != 1 {
					t.Fatalf("dequeue = %v, %v", r.tasks, r.err)
				}
				seen[r.tasks[0].ID] = true
				if d := r.at.Sub(start); d > 5*time.Second {
					t.Fatalf("woke after %v, want well under PollInterval (30s)", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("blocked consumers were not woken by Enqueue")
			}
		}
		if len(seen) != consumers {
			t.Fatalf("tasks %v, want %d distinct", seen, consumers)
		}
	})

	t.Run("BlockingWakesOneAtATime", func(t *testing.T) {
		// Several waiters, tasks arriving one per Enqueue: each must reach
		// someone quickly even though a notification wakes one waiter.
		q, _ := setup(t)
		const consumers, tasks = 3, 9
		got := make(chan string, tasks)
		cctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range consumers {
			wg.Go(func() {
				for {
					ts, err := q.Dequeue(cctx, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
					if err != nil {
						return
					}
					for _, task := range ts {
						got <- task.ID
					}
				}
			})
		}
		defer func() { cancel(); wg.Wait() }()
		for i := range tasks {
			mustEnqueue(t, q, "jobs", Item{ID: fmt.Sprint("one", i)})
			if i%3 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		for i := range tasks {
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d of %d tasks delivered", i, tasks)
			}
		}
	})

	t.Run("BlockingWakesAcrossProcesses", func(t *testing.T) {
		// Two Queues on the same keys stand for two processes, each with
		// two sleeping consumers; tasks arrive one by one.
		client := newClient(t)
		q1 := newTestQueue(t, client, Config{PollInterval: 30 * time.Second})
		q2, err := New(Config{Client: client, Prefix: q1.prefix, PollInterval: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q2.Close()
		const tasks = 8
		got := make(chan string, tasks)
		cctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, q := range []*Queue{q1, q2, q1, q2} {
			wg.Go(func() {
				for {
					ts, err := q.Dequeue(cctx, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
					if err != nil {
						return
					}
					for _, task := range ts {
						got <- task.ID
					}
				}
			})
		}
		defer func() { cancel(); wg.Wait() }()
		waitForWaiters(t, q1, "jobs", 2)
		waitForWaiters(t, q2, "jobs", 2)
		for i := range tasks {
			mustEnqueue(t, q1, "jobs", Item{ID: fmt.Sprint("x", i)})
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				t.Fatalf("task %d not delivered", i)
			}
		}
	})

	t.Run("BlockingWakesWhenDelayedDue", func(t *testing.T) {
		q := newTestQueue(t, newClient(t), Config{PollInterval: 30 * time.Second})
		due := time.Now().Add(300 * time.Millisecond)
		mustEnqueue(t, q, "jobs", Item{ID: "soon", At: due})
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		tasks, err := q.Dequeue(cctx, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("dequeue = %v, %v", tasks, err)
		}
		// Never before its due time (measured from the due time itself,
		// not from after a slow Enqueue returned), and long before the
		// poll interval.
		if d := time.Since(due); d < 0 || d > 5*time.Second {
			t.Fatalf("delayed task came %v after its due time, want 0 to 5s", d)
		}
	})

	t.Run("CancelAndClose", func(t *testing.T) {
		q, _ := setup(t)
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := q.Dequeue(cctx, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
			errc <- err
		}()
		waitForWaiters(t, q, "jobs", 1)
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("dequeue after cancel: %v", err)
			}
		case <-time.After(time.Second):
			t.Fatal("cancel did not unblock Dequeue")
		}
		go func() {
			_, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"jobs"}, Lease: lease})
			errc <- err
		}()
		waitForWaiters(t, q, "jobs", 1)
		q.Close()
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("dequeue after close: %v", err)
			}
		case <-time.After(time.Second):
			t.Fatal("Close did not unblock Dequeue")
		}
		if _, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"jobs"}, Lease: lease}); !errors.Is(err, ErrClosed) {
			t.Fatalf("dequeue on closed queue: %v", err)
		}
	})

	t.Run("ConcurrentSweeps", func(t *testing.T) {
		q, clock := setup(t)
		var items []Item
		for i := range 300 {
			items = append(items, Item{ID: fmt.Sprint("s", i), At: clock.Now().Add(time.Second)})
		}
		mustEnqueue(t, q, "jobs", items...)
		clock.Advance(time.Second)
		var mu sync.Mutex
		total := 0
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					res, err := q.Sweep(ctx, "jobs", 7)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					total += res.Promoted
					mu.Unlock()
					if res.Promoted == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		if total != 300 {
			t.Fatalf("promoted %d, want 300", total)
		}
		wantStats(t, q, "jobs", Stats{Ready: 300})
	})

	t.Run("Validation", func(t *testing.T) {
		q, _ := setup(t)
		long := strings.Repeat("x", 201)
		for _, id := range []string{"", "a b", "a{b}", "tab\t", "é", long} {
			_, err := q.Enqueue(ctx, "jobs", Item{ID: id})
			if !errors.Is(err, ErrInvalidID) || !strings.HasPrefix(err.Error(), "queue: ") {
				t.Errorf("enqueue id %q: %v, want ErrInvalidID", id, err)
			}
		}
		for _, name := range []string{"", "1abc", "a{b}", "a:b", strings.Repeat("q", 65)} {
			_, err := q.Enqueue(ctx, name, Item{ID: "x"})
			if !errors.Is(err, ErrInvalidQueue) {
				t.Errorf("enqueue to %q: %v, want ErrInvalidQueue", name, err)
			}
		}
		if _, err := q.Enqueue(ctx, "a:b", Item{ID: "x"}); err == nil || !strings.Contains(err.Error(), `"a:b"`) {
			t.Errorf("error does not name the queue: %v", err)
		}
		if err := ValidateID(strings.Repeat("y", 200)); err != nil {
			t.Errorf("200-byte id: %v", err)
		}
		if err := ValidateQueue("Q" + strings.Repeat("q", 63)); err != nil {
			t.Errorf("64-byte queue name: %v", err)
		}
		if _, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"jobs"}}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("dequeue without lease: %v", err)
		}
		if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New without client: %v", err)
		}
	})

	t.Run("Limits", func(t *testing.T) { runLimitSuite(t, newClient) })
	t.Run("LimitKeysAreExact", func(t *testing.T) { runExactLimitKeys(t, newClient) })

	t.Run("Bind", func(t *testing.T) {
		q, _ := setup(t)
		if owner, err := q.Bind(ctx, "db-1"); err != nil || owner != "db-1" {
			t.Fatalf("first bind: %q, %v", owner, err)
		}
		if owner, err := q.Bind(ctx, "db-1"); err != nil || owner != "db-1" {
			t.Errorf("bind again: %q, %v", owner, err)
		}
		if owner, err := q.Bind(ctx, "db-2"); err != nil || owner != "db-1" {
			t.Errorf("bind of another store: %q, %v; want the first store's id", owner, err)
		}
		// Redis lost the binding (a flush): the next Bind writes it again.
		if err := q.client.Del(ctx, q.bindingKey()).Err(); err != nil {
			t.Fatal(err)
		}
		if owner, err := q.Bind(ctx, "db-2"); err != nil || owner != "db-2" {
			t.Errorf("bind after a flush: %q, %v", owner, err)
		}
		if _, err := q.Bind(ctx, ""); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("bind of an empty id: %v", err)
		}
	})
}

func mustEnqueue(t testing.TB, q *Queue, queue string, items ...Item) []bool {
	t.Helper()
	added, err := q.Enqueue(context.Background(), queue, items...)
	if err != nil {
		t.Fatal(err)
	}
	return added
}

func mustDequeue(t testing.TB, q *Queue, p DequeueParams) []Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tasks, err := q.Dequeue(ctx, p)
	if err != nil {
		t.Fatalf("dequeue: %v", err)
	}
	return tasks
}

func wantStats(t testing.TB, q *Queue, queue string, want Stats) {
	t.Helper()
	got, err := q.Stats(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("stats of %s = %+v, want %+v", queue, got, want)
	}
}

func taskIDs(tasks []Task) []string {
	ids := make([]string, len(tasks))
	for i, task := range tasks {
		ids[i] = task.ID
	}
	return ids
}

// waitForWaiters waits until n Dequeue calls of q sleep waiting on queue.
func waitForWaiters(t testing.TB, q *Queue, queue string, n int) {
	t.Helper()
	ch := q.keys(queue).channel
	deadline := time.Now().Add(5 * time.Second)
	for {
		q.notifier.mu.Lock()
		c := 0
		if tp := q.notifier.topics[ch]; tp != nil {
			for _, w := range tp.waiters {
				if w.sleeping {
					c++
				}
			}
		}
		q.notifier.mu.Unlock()
		if c >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d consumers waiting on %s", c, n, queue)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

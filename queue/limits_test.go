package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// runLimitSuite is the part of the conformance suite about Limit.
func runLimitSuite(t *testing.T, newClient func(t testing.TB) redis.UniversalClient) {
	ctx := context.Background()
	lease := time.Minute
	setup := func(t *testing.T, limits map[string]Limit) (*Queue, func(time.Duration)) {
		clock := newFakeClock()
		q := newTestQueue(t, newClient(t), Config{Now: clock.Now, PollInterval: 30 * time.Second, Limits: limits})
		return q, clock.Advance
	}
	// nothingFor asserts that a Dequeue gets nothing for d (it blocks).
	nothingFor := func(t *testing.T, q *Queue, queue string, d time.Duration) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		got, err := q.Dequeue(c, DequeueParams{Queues: []string{queue}, Max: 10, Lease: lease})
		if !errors.Is(err, context.DeadlineExceeded) || len(got) > 0 {
			t.Fatalf("dequeue over the limit = %v, %v; want nothing until the deadline", taskIDs(got), err)
		}
	}

	t.Run("Concurrency", func(t *testing.T) {
		q, advance := setup(t, map[string]Limit{"jobs": {Concurrency: 2}})
		mustEnqueue(t, q, "jobs", Item{ID: "a"}, Item{ID: "b"}, Item{ID: "c"}, Item{ID: "d"}, Item{ID: "e"})
		got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "a,b" {
			t.Fatalf("first dequeue = %s, want a,b (2 slots)", ids)
		}
		nothingFor(t, q, "jobs", 100*time.Millisecond)
		wantStats(t, q, "jobs", Stats{Ready: 3, Leased: 2})

		// An ack frees a slot and wakes a consumer waiting for one, long
		// before its PollInterval (30s).
		type result struct {
			tasks []Task
			err   error
		}
		done := make(chan result, 1)
		go func() {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			tasks, err := q.Dequeue(c, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
			done <- result{tasks, err}
		}()
		waitForWaiters(t, q, "jobs", 1)
		if err := q.Ack(ctx, "jobs", "a"); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || strings.Join(taskIDs(r.tasks), ",") != "c" {
			t.Fatalf("dequeue after an ack = %v, %v; want c", taskIDs(r.tasks), r.err)
		}
		// The tasks that waited spent no delivery.
		if r.tasks[0].Deliveries != 1 {
			t.Errorf("c's deliveries = %d, want 1", r.tasks[0].Deliveries)
		}
		// Retry and Release give slots back too.
		if err := q.Retry(ctx, "jobs", "b", time.Time{}.Add(1)); err != nil {
			t.Fatal(err)
		}
		got = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "d" {
			t.Fatalf("dequeue after a retry = %s, want d", ids)
		}
		if err := q.Release(ctx, "jobs", "d"); err != nil {
			t.Fatal(err)
		}
		got = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "d" {
			t.Fatalf("dequeue after a release = %s, want d", ids)
		}
		// The consumer holding c and d dies: its slots come back when
		// its leases run out, not before.
		advance(lease - time.Second)
		nothingFor(t, q, "jobs", 50*time.Millisecond)
		advance(time.Second)
		got = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if len(got) != 2 {
			t.Fatalf("dequeue after the leases ran out = %v, want 2 tasks", taskIDs(got))
		}
		wantStats(t, q, "jobs", Stats{Ready: 2, Leased: 2})

		// Another queue of the same Queue is not limited.
		mustEnqueue(t, q, "free", Item{ID: "x"}, Item{ID: "y"}, Item{ID: "z"})
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"free"}, Max: 10, Lease: lease}); len(got) != 3 {
			t.Fatalf("unlimited queue gave %v, want 3 tasks", taskIDs(got))
		}
	})

	t.Run("Rate", func(t *testing.T) {
		q, advance := setup(t, map[string]Limit{"jobs": {Rate: 4, Per: time.Second}})
		var items []Item
		for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			items = append(items, Item{ID: id})
		}
		mustEnqueue(t, q, "jobs", items...)
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("first dequeue = %v, want 1 task (burst 1)", taskIDs(got))
		}
		// The next token is due in 250ms (fake time, which does not move):
		// the consumer sleeps until then and gets nothing.
		nothingFor(t, q, "jobs", 100*time.Millisecond)
		advance(249 * time.Millisecond)
		nothingFor(t, q, "jobs", 50*time.Millisecond)
		advance(time.Millisecond)
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("dequeue when the token is due = %v, want 1 task", taskIDs(got))
		}
		// An idle while refills the bucket up to Burst only.
		advance(time.Hour)
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("dequeue after an hour = %v, want 1 task (burst 1)", taskIDs(got))
		}
		// (The hour also ended the first two leases: they are ready again.)
		wantStats(t, q, "jobs", Stats{Ready: 7, Leased: 1})

		// A consumer late for its token keeps the rest of its lateness,
		// up to nine tenths of a token: the bucket held 1.9 after the
		// hour, so the next token is due 25ms after that take, not 250ms.
		advance(24 * time.Millisecond)
		nothingFor(t, q, "jobs", 50*time.Millisecond)
		advance(time.Millisecond)
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("dequeue 25ms after a late take = %v, want 1 task (the carried lateness)", taskIDs(got))
		}
		// Then the tokens come at the rate again, one per 250ms: a late
		// take (100ms late) does not push the next one back.
		advance(350 * time.Millisecond)
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("dequeue of a late token = %v, want 1 task", taskIDs(got))
		}
		advance(149 * time.Millisecond)
		nothingFor(t, q, "jobs", 50*time.Millisecond)
		advance(time.Millisecond)
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("dequeue at the token's own time after a late take = %v, want 1 task", taskIDs(got))
		}
	})

	t.Run("RateBurstAndWake", func(t *testing.T) {
		clock := newFakeClock()
		q := newTestQueue(t, newClient(t), Config{Now: clock.Now, PollInterval: 30 * time.Second,
			Limits: map[string]Limit{"jobs": {Rate: 10, Per: time.Second, Burst: 3, Concurrency: 4}}})
		var items []Item
		for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
			items = append(items, Item{ID: id})
		}
		mustEnqueue(t, q, "jobs", items...)
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 3 {
			t.Fatalf("first dequeue = %v, want the burst of 3", taskIDs(got))
		}
		clock.Advance(time.Second)
		// 10 tokens are due, the bucket holds 3, the concurrency allows 1.
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("second dequeue = %v, want 1 (4 slots, 3 held)", taskIDs(got))
		}
	})

	t.Run("PerKeyConcurrency", func(t *testing.T) {
		q, advance := setup(t, map[string]Limit{"jobs": {PerTask: true}})
		one := func(key string) *TaskLimit { return &TaskLimit{Concurrency: 1, Key: key} }
		// Two of customer A at the head: the second must not block B's
		// and the unlimited task behind it.
		mustEnqueue(t, q, "jobs", Item{ID: "a1", Limit: one("A")}, Item{ID: "a2", Limit: one("A")},
			Item{ID: "a3", Limit: one("A")}, Item{ID: "b1", Limit: one("B")}, Item{ID: "free"})
		got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "a1,b1,free" {
			t.Fatalf("first dequeue = %s, want a1,b1,free (one per key, the rest parked)", ids)
		}
		// Parked tasks wait as delayed ones: nothing is handed out.
		wantStats(t, q, "jobs", Stats{Delayed: 2, Leased: 3})
		if held, parked, err := q.KeyHeld(ctx, "jobs", "A"); err != nil || held != 1 || parked != 2 {
			t.Errorf("KeyHeld(A) = %d, %d, %v; want 1 held, 2 parked", held, parked, err)
		}
		nothingFor(t, q, "jobs", 100*time.Millisecond)

		// An ack of a1 frees A's slot and wakes a waiting consumer with a2.
		done := make(chan []Task, 1)
		go func() {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			tasks, _ := q.Dequeue(c, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
			done <- tasks
		}()
		waitForWaiters(t, q, "jobs", 1)
		if err := q.Ack(ctx, "jobs", "a1"); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if ids := strings.Join(taskIDs(r), ","); ids != "a2" {
			t.Fatalf("dequeue after the ack = %s, want a2", ids)
		}
		if r[0].Deliveries != 1 {
			t.Errorf("a2's deliveries = %d, want 1 (parking spends none)", r[0].Deliveries)
		}
		// A release gives the slot back too.
		if err := q.Release(ctx, "jobs", "a2"); err != nil {
			t.Fatal(err)
		}
		got = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "a3" && ids != "a2" {
			t.Fatalf("dequeue after the release = %s, want one of A's", ids)
		}
		// The holder dies: its slot comes back when its lease runs out.
		nothingFor(t, q, "jobs", 50*time.Millisecond)
		advance(lease)
		got = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if n := len(got); n == 0 {
			t.Fatalf("dequeue after the leases ran out = nothing")
		}
		a := 0
		for _, task := range got {
			if strings.HasPrefix(task.ID, "a") {
				a++
			}
		}
		if a != 1 {
			t.Fatalf("dequeue after the leases ran out = %v, want exactly one of A's", taskIDs(got))
		}
	})

	t.Run("PerTaskRate", func(t *testing.T) {
		q, advance := setup(t, map[string]Limit{"jobs": {PerTask: true}})
		rate := func(key string) *TaskLimit { return &TaskLimit{Rate: 2, Per: time.Second, RateKey: key} }
		mustEnqueue(t, q, "jobs", Item{ID: "a1", Limit: rate("A")}, Item{ID: "a2", Limit: rate("A")},
			Item{ID: "b1", Limit: rate("B")}, Item{ID: "b2", Limit: rate("B")})
		got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "a1,b1" {
			t.Fatalf("first dequeue = %s, want a1,b1 (one token per bucket)", ids)
		}
		nothingFor(t, q, "jobs", 100*time.Millisecond)
		advance(500 * time.Millisecond)
		got = mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "a2,b2" {
			t.Fatalf("dequeue when the tokens are due = %s, want a2,b2", ids)
		}
		for _, task := range got {
			if task.Deliveries != 1 {
				t.Errorf("%s's deliveries = %d, want 1", task.ID, task.Deliveries)
			}
		}
	})

	t.Run("TaskLimitWithoutPerTask", func(t *testing.T) {
		// A process that does not know that tasks of the queue carry
		// limits (no PerTask, no SetPerTask) still holds them: a task's
		// limit is found in Redis.
		prefix := testenv.KeyPrefix(t)
		clock := newFakeClock()
		c := newClient(t)
		producer := newTestQueue(t, c, Config{Prefix: prefix, Now: clock.Now, PollInterval: 30 * time.Second})
		consumer := newTestQueue(t, c, Config{Prefix: prefix, Now: clock.Now, PollInterval: 30 * time.Second})
		one := &TaskLimit{Concurrency: 1, Key: "A"}
		mustEnqueue(t, producer, "jobs", Item{ID: "a1", Limit: one}, Item{ID: "a2", Limit: one}, Item{ID: "free"})
		got := mustDequeue(t, consumer, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "a1,free" {
			t.Fatalf("dequeue by a process without PerTask = %s, want a1,free (a2 waits for A's slot)", ids)
		}
		// Its ack gives the slot back and wakes a2 long before a2's due
		// time (a1's lease deadline, a minute away on the fake clock).
		done := make(chan []Task, 1)
		go func() {
			cx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			tasks, _ := consumer.Dequeue(cx, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
			done <- tasks
		}()
		waitForWaiters(t, consumer, "jobs", 1)
		if err := consumer.Ack(ctx, "jobs", "a1"); err != nil {
			t.Fatal(err)
		}
		if ids := strings.Join(taskIDs(<-done), ","); ids != "a2" {
			t.Fatalf("dequeue after the ack = %s, want a2", ids)
		}
	})

	t.Run("SameKeyInOneBatch", func(t *testing.T) {
		// One dequeue counts the tasks it lets through itself: of five
		// tasks of one key with two slots, two are leased.
		q, _ := setup(t, map[string]Limit{"jobs": {PerTask: true}})
		two := &TaskLimit{Concurrency: 2, Key: "A"}
		for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
			mustEnqueue(t, q, "jobs", Item{ID: id, Limit: two})
		}
		got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "a1,a2" {
			t.Fatalf("dequeue = %s, want a1,a2 (two slots)", ids)
		}
		if held, parked, err := q.KeyHeld(ctx, "jobs", "A"); err != nil || held != 2 || parked != 3 {
			t.Errorf("KeyHeld(A) = %d, %d, %v; want 2 held, 3 parked", held, parked, err)
		}
	})

	t.Run("ParkedWithoutStaleEntries", func(t *testing.T) {
		q, advance := setup(t, map[string]Limit{"jobs": {PerTask: true}})
		one := &TaskLimit{Concurrency: 1, Key: "A"}
		mustEnqueue(t, q, "jobs", Item{ID: "a1", Limit: one}, Item{ID: "a2", Limit: one}, Item{ID: "a3", Limit: one})
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("first dequeue = %v, want a1 only", taskIDs(got))
		}
		// a2 and a3 fall due at a1's deadline, find A still held (a1's
		// lease was extended) and park again: each is counted once.
		advance(lease / 2)
		if ok, err := q.Extend(ctx, "jobs", "a1", lease); err != nil || !ok {
			t.Fatalf("extend a1 = %v, %v", ok, err)
		}
		advance(lease/2 + time.Millisecond)
		nothingFor(t, q, "jobs", 50*time.Millisecond)
		if held, parked, err := q.KeyHeld(ctx, "jobs", "A"); err != nil || held != 1 || parked != 2 {
			t.Fatalf("KeyHeld(A) after parking again = %d, %d, %v; want 1 held, 2 parked", held, parked, err)
		}
		// A parked task acked (its run was cancelled) leaves the waiters.
		if err := q.Ack(ctx, "jobs", "a3"); err != nil {
			t.Fatal(err)
		}
		if _, parked, err := q.KeyHeld(ctx, "jobs", "A"); err != nil || parked != 1 {
			t.Fatalf("parked after a3's ack = %d, %v; want 1", parked, err)
		}
		// The holder's ack hands the slot to a2, which leaves them too.
		if err := q.Ack(ctx, "jobs", "a1"); err != nil {
			t.Fatal(err)
		}
		got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "a2" {
			t.Fatalf("dequeue after a1's ack = %s, want a2", ids)
		}
		if held, parked, err := q.KeyHeld(ctx, "jobs", "A"); err != nil || held != 1 || parked != 0 {
			t.Fatalf("KeyHeld(A) with a2 leased = %d, %d, %v; want 1 held, 0 parked", held, parked, err)
		}
	})

	t.Run("KeyScanGoesOn", func(t *testing.T) {
		// More parked tasks than one dequeue looks at, ahead of a task
		// that may run: the consumer looks again at once, it does not
		// sleep until the parked ones fall due (a minute away).
		q, _ := setup(t, map[string]Limit{"jobs": {PerTask: true}})
		one := &TaskLimit{Concurrency: 1, Key: "A"}
		mustEnqueue(t, q, "jobs", Item{ID: "a-hold", Limit: one})
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 1, Lease: lease}); len(got) != 1 {
			t.Fatalf("first dequeue = %v, want a-hold", taskIDs(got))
		}
		var items []Item
		for i := range 250 {
			items = append(items, Item{ID: fmt.Sprintf("a%03d", i), Limit: one})
		}
		mustEnqueue(t, q, "jobs", append(items, Item{ID: "b", Limit: &TaskLimit{Concurrency: 1, Key: "B"}})...)
		got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
		if ids := strings.Join(taskIDs(got), ","); ids != "b" {
			t.Fatalf("dequeue behind 250 parked tasks = %s, want b", ids)
		}
	})

	t.Run("RateWaitersTakeTurns", func(t *testing.T) {
		// Tasks waiting for one bucket are due one token apart, not all
		// at the next token (they would all wake, one would run and the
		// rest park again, for every token).
		q, advance := setup(t, map[string]Limit{"jobs": {PerTask: true}})
		tenPerSec := &TaskLimit{Rate: 10, Per: time.Second, RateKey: "A"}
		var items []Item
		for i := range 8 {
			items = append(items, Item{ID: fmt.Sprintf("a%d", i), Limit: tenPerSec})
		}
		mustEnqueue(t, q, "jobs", items...)
		if got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease}); len(got) != 1 {
			t.Fatalf("first dequeue = %v, want one (burst 1)", taskIDs(got))
		}
		due, err := q.client.ZRangeWithScores(ctx, q.keys("jobs").delayed, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 7 {
			t.Fatalf("%d tasks delayed, want 7", len(due))
		}
		for i := 1; i < len(due); i++ {
			if gap := due[i].Score - due[i-1].Score; gap < 100 {
				t.Fatalf("waiters due %v ms apart (%v); want a token's time, 100 ms, between turns", gap, due)
			}
		}
		// Each turn lets its waiter through, in order.
		for i := 1; i < 8; i++ {
			advance(100 * time.Millisecond)
			got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 10, Lease: lease})
			if ids := strings.Join(taskIDs(got), ","); ids != fmt.Sprintf("a%d", i) {
				t.Fatalf("dequeue at turn %d = %s, want a%d", i, ids, i)
			}
		}
	})

	t.Run("RateBucketTimeNeverGoesBack", func(t *testing.T) {
		// Two processes whose clocks differ by a second share a bucket
		// of 1 per second, burst 2: the late clock's call must not set
		// the bucket's time back, or the second between is refilled
		// twice and a third task starts at once.
		prefix := testenv.KeyPrefix(t)
		early, late := newFakeClock(), newFakeClock()
		early.Advance(time.Second)
		c := newClient(t)
		perTask := map[string]Limit{"jobs": {PerTask: true}}
		qa := newTestQueue(t, c, Config{Prefix: prefix, Now: early.Now, PollInterval: 30 * time.Second, Limits: perTask})
		qb := newTestQueue(t, c, Config{Prefix: prefix, Now: late.Now, PollInterval: 30 * time.Second, Limits: perTask})
		lim := &TaskLimit{Rate: 1, Per: time.Second, Burst: 2, RateKey: "A"}
		mustEnqueue(t, qa, "jobs", Item{ID: "a1", Limit: lim}, Item{ID: "a2", Limit: lim}, Item{ID: "a3", Limit: lim})
		if got := mustDequeue(t, qa, DequeueParams{Queues: []string{"jobs"}, Max: 1, Lease: lease}); len(got) != 1 {
			t.Fatalf("dequeue = %v, want one", taskIDs(got))
		}
		if got := mustDequeue(t, qb, DequeueParams{Queues: []string{"jobs"}, Max: 1, Lease: lease}); len(got) != 1 {
			t.Fatalf("dequeue by the late clock = %v, want one (the burst's second token)", taskIDs(got))
		}
		nothingFor(t, qa, "jobs", 100*time.Millisecond)
	})

	t.Run("InvalidLimits", func(t *testing.T) {
		c := newClient(t)
		for _, tc := range []struct {
			limits map[string]Limit
			want   string
		}{
			{map[string]Limit{"jobs": {Concurrency: -1}}, `queue "jobs": Concurrency -1 is negative`},
			{map[string]Limit{"jobs": {Rate: -2, Per: time.Second}}, `queue "jobs": Rate -2 is negative`},
			{map[string]Limit{"jobs": {Rate: 5}}, `queue "jobs": Rate 5 needs a Per of at least 1ms, got 0s`},
			{map[string]Limit{"jobs": {Per: time.Second}}, `queue "jobs": Per and Burst need a Rate`},
			{map[string]Limit{"jobs": {Rate: 1, Per: time.Second, Burst: -1}}, `queue "jobs": Burst -1 is negative`},
			{map[string]Limit{"bad name": {Concurrency: 1}}, `invalid queue name`},
		} {
			_, err := New(Config{Client: c, Limits: tc.limits})
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New with %+v = %v, want ErrInvalidConfig saying %q", tc.limits, err, tc.want)
			}
		}
	})
}

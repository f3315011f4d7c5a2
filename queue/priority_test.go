package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

func TestTaskPrioritiesRedis(t *testing.T) { runPrioritySuite(t, newRealRedis) }

func TestTaskPrioritiesMiniredis(t *testing.T) { runPrioritySuite(t, newMiniredis) }

// runPrioritySuite checks task priorities within a queue and pausing a
// queue, on every backend.
func runPrioritySuite(t *testing.T, newClient func(t testing.TB) redis.UniversalClient) {
	setup := func(t *testing.T) *Queue {
		return newTestQueue(t, newClient(t), Config{Now: newFakeClock().Now, PollInterval: 30 * time.Second})
	}
	ctx := context.Background()
	lease := time.Minute
	one := func(max int) DequeueParams {
		return DequeueParams{Queues: []string{"jobs"}, Max: max, Lease: lease}
	}

	t.Run("HighestFirstThenFIFO", func(t *testing.T) {
		q := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "d1"}, Item{ID: "low", Priority: -3}, Item{ID: "d2"},
			Item{ID: "h1", Priority: 5}, Item{ID: "top", Priority: MaxPriority}, Item{ID: "h2", Priority: 5})
		wantStats(t, q, "jobs", Stats{Ready: 6})
		infos, err := q.List(ctx, "jobs", StateReady, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		want := []TaskInfo{{ID: "h1", State: StateReady, Priority: 5}, {ID: "h2", State: StateReady, Priority: 5},
			{ID: "d1", State: StateReady}, {ID: "d2", State: StateReady}}
		if diff := cmp.Diff(want, infos); diff != "" {
			t.Fatalf("ready page (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"top", "h1", "h2", "d1"}, taskIDs(mustDequeue(t, q, one(4)))); diff != "" {
			t.Fatalf("first batch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"d2", "low"}, taskIDs(mustDequeue(t, q, one(10)))); diff != "" {
			t.Fatalf("second batch (-want +got):\n%s", diff)
		}
		wantStats(t, q, "jobs", Stats{Leased: 6})
	})

	t.Run("NextBatchAfterFlood", func(t *testing.T) {
		q := setup(t)
		var flood []Item
		for i := range 3000 {
			flood = append(flood, Item{ID: fmt.Sprint("bulk/", i), Priority: -1})
		}
		mustEnqueue(t, q, "jobs", flood...)
		mustDequeue(t, q, one(100))
		mustEnqueue(t, q, "jobs", Item{ID: "urgent", Priority: 1})
		got := mustDequeue(t, q, one(100))
		if len(got) != 100 || got[0].ID != "urgent" {
			t.Fatalf("batch after the flood starts with %q (%d tasks), want urgent", got[0].ID, len(got))
		}
	})

	t.Run("KeptThroughRetryReleaseAndExpiry", func(t *testing.T) {
		clock := newFakeClock()
		q := newTestQueue(t, newClient(t), Config{Now: clock.Now, PollInterval: 30 * time.Second})
		mustEnqueue(t, q, "jobs", Item{ID: "r", Priority: 2}, Item{ID: "l", Priority: 2}, Item{ID: "x", Priority: 2})
		mustDequeue(t, q, one(3))
		mustEnqueue(t, q, "jobs", Item{ID: "plain1"}, Item{ID: "plain2"})
		if err := q.Retry(ctx, "jobs", "r", clock.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := q.Release(ctx, "jobs", "l"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * lease) // r is due, x's lease expired
		got := taskIDs(mustDequeue(t, q, one(5)))
		if diff := cmp.Diff([]string{"l", "r", "x", "plain1", "plain2"}, got); diff != "" {
			t.Fatalf("after retry, release and expiry (-want +got):\n%s", diff)
		}
		if err := q.Ack(ctx, "jobs", got...); err != nil {
			t.Fatal(err)
		}
		// An acked task's priority is forgotten: the same id enqueued
		// again without one is a default task.
		mustEnqueue(t, q, "jobs", Item{ID: "plain3"}, Item{ID: "r"})
		if diff := cmp.Diff([]string{"plain3", "r"}, taskIDs(mustDequeue(t, q, one(5)))); diff != "" {
			t.Fatalf("re-enqueued (-want +got):\n%s", diff)
		}
	})

	t.Run("AckOfReadyPrioritized", func(t *testing.T) {
		q := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "a", Priority: 4}, Item{ID: "b", Priority: 4}, Item{ID: "c"})
		if err := q.Ack(ctx, "jobs", "a", "c"); err != nil {
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{Ready: 1})
		if diff := cmp.Diff([]string{"b"}, taskIDs(mustDequeue(t, q, one(5)))); diff != "" {
			t.Fatalf("left (-want +got):\n%s", diff)
		}
	})

	t.Run("InvalidPriority", func(t *testing.T) {
		q := setup(t)
		for _, p := range []int{MaxPriority + 1, MinPriority - 1} {
			if _, err := q.Enqueue(ctx, "jobs", Item{ID: "a", Priority: p}); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("priority %d: %v, want ErrInvalidArgument", p, err)
			}
		}
		wantStats(t, q, "jobs", Stats{})
	})

	t.Run("PauseKeepsTasksAndResumeWakes", func(t *testing.T) {
		q := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "a"}, Item{ID: "b", Priority: 3})
		if err := q.Pause(ctx, "jobs"); err != nil {
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{Ready: 2, Paused: true})
		mustEnqueue(t, q, "jobs", Item{ID: "c"})
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		tasks, err := q.Dequeue(short, DequeueParams{Queues: []string{"jobs", "other"}, Max: 5, Lease: lease})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dequeue from a paused queue = %v, %v; want to wait", taskIDs(tasks), err)
		}
		// Other queues are served meanwhile.
		mustEnqueue(t, q, "other", Item{ID: "o"})
		if got := taskIDs(mustDequeue(t, q, DequeueParams{Queues: []string{"jobs", "other"}, Max: 5, Lease: lease})); !cmp.Equal(got, []string{"o"}) {
			t.Fatalf("dequeue = %v, want [o] from the queue not paused", got)
		}
		done := make(chan []Task, 1)
		go func() { done <- mustDequeue(t, q, one(5)) }()
		waitForWaiters(t, q, "jobs", 1)
		start := time.Now()
		if err := q.Resume(ctx, "jobs"); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-done:
			if diff := cmp.Diff([]string{"b", "a", "c"}, taskIDs(got)); diff != "" {
				t.Fatalf("after resume (-want +got):\n%s", diff)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("resume woke the consumer after %v", d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("resume did not wake the waiting consumer")
		}
		wantStats(t, q, "jobs", Stats{Leased: 3})
		paused, err := q.Paused(ctx, "jobs")
		if err != nil || paused {
			t.Fatalf("paused after resume = %v, %v", paused, err)
		}
	})

	t.Run("PauseValidation", func(t *testing.T) {
		q := setup(t)
		if err := q.Pause(ctx, "no space"); !errors.Is(err, ErrInvalidQueue) {
			t.Fatalf("pause of a bad name: %v, want ErrInvalidQueue", err)
		}
		if err := q.Resume(ctx, "jobs"); err != nil {
			t.Fatalf("resume of a queue not paused: %v", err)
		}
	})
}

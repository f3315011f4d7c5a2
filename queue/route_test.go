package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/clocktest"
)

// runRouteSuite is the conformance suite of routing by kind (route.go),
// run by runSuite on every backend.
func runRouteSuite(t *testing.T, setup func(t *testing.T) (*Queue, *clocktest.Clock)) {
	ctx := context.Background()
	lease := time.Minute
	jobs := []string{"jobs"}

	t.Run("RoutedToItsKind", func(t *testing.T) {
		q, _ := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "a/1"}, Item{ID: "b/1"})
		got := mustDequeue(t, q, DequeueParams{Queues: jobs, Lease: lease})
		if len(got) != 1 || got[0].ID != "a/1" || got[0].Deliveries != 1 {
			t.Fatalf("dequeue = %+v, want a/1, delivery 1", got)
		}
		if err := q.Route(ctx, "jobs", "a/1", "signup/create"); err != nil {
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{Ready: 2, Routed: 1})
		list, err := q.List(ctx, "jobs", StateReady, 0, 10)
		if err != nil || len(list) != 2 || list[0].ID != "b/1" || list[1].ID != "a/1" {
			t.Fatalf("ready list = %+v, %v; want b/1 then the routed a/1", list, err)
		}
		// A consumer of other kinds gets the other task, never the routed one.
		other := DequeueParams{Queues: jobs, Max: 10, Lease: lease, Kinds: []string{"billing/a"}}
		if got := mustDequeue(t, q, other); len(got) != 1 || got[0].ID != "b/1" {
			t.Fatalf("other kind's dequeue = %+v, want b/1 only", got)
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if got, err := q.Dequeue(short, DequeueParams{Queues: jobs, Lease: lease}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dequeue without kinds = %+v, %v; want to wait", got, err)
		}
		// Its kind's consumer gets it, its first delivery undone.
		mine := DequeueParams{Queues: jobs, Max: 10, Lease: lease, Kinds: []string{"billing/a", "signup/create"}}
		got = mustDequeue(t, q, mine)
		if len(got) != 1 || got[0].ID != "a/1" || got[0].Deliveries != 1 {
			t.Fatalf("its kind's dequeue = %+v, want a/1, delivery 1", got)
		}
		wantStats(t, q, "jobs", Stats{Leased: 2})
		if err := q.Ack(ctx, "jobs", "a/1", "b/1"); err != nil {
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{})
		assertNoRoutingKeys(t, q, "jobs")
	})

	t.Run("RoutedFirst", func(t *testing.T) {
		q, _ := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "a/1"})
		mustDequeue(t, q, DequeueParams{Queues: jobs, Lease: lease})
		if err := q.Route(ctx, "jobs", "a/1", "k"); err != nil {
			t.Fatal(err)
		}
		mustEnqueue(t, q, "jobs", Item{ID: "b/1"}, Item{ID: "c/1"})
		got := mustDequeue(t, q, DequeueParams{Queues: jobs, Max: 2, Lease: lease, Kinds: []string{"k"}})
		if ids := taskIDs(got); len(ids) != 2 || ids[0] != "a/1" || ids[1] != "b/1" {
			t.Fatalf("dequeue = %v, want the routed a/1, then b/1", ids)
		}
	})

	t.Run("RouteWakesItsKind", func(t *testing.T) {
		q, clock := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "a/1"})
		mustDequeue(t, q, DequeueParams{Queues: jobs, Lease: lease})
		// The kind's consumer has already seen the queue with routed
		// tasks once (so it sends its kinds), and sleeps.
		if err := q.Route(ctx, "jobs", "a/1", "k"); err != nil {
			t.Fatal(err)
		}
		mustDequeue(t, q, DequeueParams{Queues: jobs, Lease: lease, Kinds: []string{"k"}})
		mustEnqueue(t, q, "jobs", Item{ID: "b/1"})
		mustDequeue(t, q, DequeueParams{Queues: jobs, Lease: lease})
		done := make(chan []Task, 1)
		go func() {
			tasks, _ := q.Dequeue(ctx, DequeueParams{Queues: jobs, Lease: lease, Kinds: []string{"k"}})
			done <- tasks
		}()
		waitForWaiters(t, q, "jobs", 1)
		start := time.Now()
		if err := q.Route(ctx, "jobs", "b/1", "k"); err != nil {
			t.Fatal(err)
		}
		select {
		case tasks := <-done:
			if len(tasks) != 1 || tasks[0].ID != "b/1" {
				t.Fatalf("woken dequeue = %+v, want b/1", tasks)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("woken after %v", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("a consumer of the kind was not woken by Route (poll interval 30 s, clock %v)", clock.Now())
		}
	})

	t.Run("RouteRefusals", func(t *testing.T) {
		q, _ := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "a/1"})
		if err := q.Route(ctx, "jobs", "a/1", "k"); !errors.Is(err, ErrNotLeased) {
			t.Fatalf("route of a ready task = %v, want ErrNotLeased", err)
		}
		mustDequeue(t, q, DequeueParams{Queues: jobs, Lease: lease})
		if err := q.Route(ctx, "jobs", "a/1", "bad kind"); !errors.Is(err, ErrInvalidID) {
			t.Fatalf("route to a kind with a space = %v, want ErrInvalidID", err)
		}
		if _, err := q.Dequeue(ctx, DequeueParams{Queues: jobs, Lease: lease, Kinds: []string{"a\nb"}}); !errors.Is(err, ErrInvalidID) {
			t.Fatalf("dequeue with a kind holding a newline = %v, want ErrInvalidID", err)
		}
		wantStats(t, q, "jobs", Stats{Leased: 1})
	})

	t.Run("AckRemovesRouted", func(t *testing.T) {
		q, _ := setup(t)
		mustEnqueue(t, q, "jobs", Item{ID: "a/1"})
		mustDequeue(t, q, DequeueParams{Queues: jobs, Lease: lease})
		if err := q.Route(ctx, "jobs", "a/1", "k"); err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, "jobs", "a/1"); err != nil {
			t.Fatal(err)
		}
		wantStats(t, q, "jobs", Stats{})
		if added := mustEnqueue(t, q, "jobs", Item{ID: "a/1"}); !added[0] {
			t.Fatal("enqueue after the ack of a routed task: not added")
		}
		got := mustDequeue(t, q, DequeueParams{Queues: jobs, Lease: lease, Kinds: []string{"k"}})
		if len(got) != 1 || got[0].ID != "a/1" {
			t.Fatalf("dequeue = %+v, want a/1 from the ready list", got)
		}
	})
}

// assertNoRoutingKeys checks that routing left no key behind once every
// routed task was leased.
func assertNoRoutingKeys(t *testing.T, q *Queue, queue string) {
	t.Helper()
	base := q.prefix + ":{" + queue + "}:"
	for _, k := range []string{"routed", "rk", "r:signup/create"} {
		n, err := q.client.Exists(context.Background(), base+k).Result()
		if err != nil || n != 0 {
			t.Errorf("key %s: exists %d, %v; want gone", base+k, n, err)
		}
	}
}

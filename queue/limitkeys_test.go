package queue

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// runExactLimitKeys is the part of the conformance suite about the keys
// of task limits: a key is its exact bytes, so a value that differs from
// another only by a trailing space, a trailing tab, its case or one more
// character has slots and a token bucket of its own.
func runExactLimitKeys(t *testing.T, newClient func(t testing.TB) redis.UniversalClient) {
	ctx := context.Background()
	lease := time.Minute
	keys := []string{"A", "A ", "A\t", "A  ", "a", "AA"}

	t.Run("Concurrency", func(t *testing.T) {
		q := newTestQueue(t, newClient(t), Config{Now: newFakeClock().Now, PollInterval: 30 * time.Second,
			Limits: map[string]Limit{"jobs": {PerTask: true}}})
		var items []Item
		for i, k := range keys {
			items = append(items, Item{ID: "first-" + string(rune('0'+i)), Limit: &TaskLimit{Concurrency: 1, Key: k}})
		}
		for i, k := range keys {
			items = append(items, Item{ID: "second-" + string(rune('0'+i)), Limit: &TaskLimit{Concurrency: 1, Key: k}})
		}
		mustEnqueue(t, q, "jobs", items...)
		got := taskIDs(mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 20, Lease: lease}))
		slices.Sort(got)
		if ids := strings.Join(got, ","); ids != "first-0,first-1,first-2,first-3,first-4,first-5" {
			t.Fatalf("dequeue = %s, want the first task of each of the %d keys (one slot each)", ids, len(keys))
		}
		for _, k := range keys {
			if held, parked, err := q.KeyHeld(ctx, "jobs", k); err != nil || held != 1 || parked != 1 {
				t.Errorf("KeyHeld(%q) = %d held, %d parked, %v; want 1 and 1", k, held, parked, err)
			}
		}
	})

	t.Run("Rate", func(t *testing.T) {
		q := newTestQueue(t, newClient(t), Config{Now: newFakeClock().Now, PollInterval: 30 * time.Second,
			Limits: map[string]Limit{"jobs": {PerTask: true}}})
		var items []Item
		for i, k := range keys {
			lim := &TaskLimit{Rate: 1, Per: time.Hour, RateKey: k}
			items = append(items, Item{ID: "r" + string(rune('0'+i)) + "a", Limit: lim}, Item{ID: "r" + string(rune('0'+i)) + "b", Limit: lim})
		}
		mustEnqueue(t, q, "jobs", items...)
		got := mustDequeue(t, q, DequeueParams{Queues: []string{"jobs"}, Max: 20, Lease: lease})
		if len(got) != len(keys) {
			t.Fatalf("dequeue = %v, want one task of each of the %d buckets", taskIDs(got), len(keys))
		}
		for _, task := range got {
			if !strings.HasSuffix(task.ID, "a") {
				t.Errorf("dequeue handed out %s, want only the first task of each bucket", task.ID)
			}
		}
	})
}

package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// bindingKey holds the id of the store (the database) that owns this
// prefix's tasks: "<prefix>:store".
func (q *Queue) bindingKey() string { return q.prefix + ":store" }

// Bind records that the tasks under this queue's prefix belong to the
// store whose id is storeID, unless the prefix is already bound. It
// returns the id the prefix is bound to: storeID, or another store's
// (then the caller must not touch the prefix's tasks, which are another
// database's). The binding is rewritten after Redis loses its data, by
// the first Bind that follows.
func (q *Queue) Bind(ctx context.Context, storeID string) (string, error) {
	if storeID == "" {
		return "", fmt.Errorf("%w: empty store id", ErrInvalidConfig)
	}
	key := q.bindingKey()
	for try := 0; ; try++ {
		set, err := q.client.SetNX(ctx, key, storeID, 0).Result()
		if err != nil {
			return "", fmt.Errorf("queue: bind prefix %q: %w", q.prefix, err)
		}
		if set {
			return storeID, nil
		}
		owner, err := q.client.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) && try == 0 {
			continue // deleted between the two calls (a flush): once more
		}
		if err != nil {
			return "", fmt.Errorf("queue: read the binding of prefix %q: %w", q.prefix, err)
		}
		return owner, nil
	}
}

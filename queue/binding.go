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
	// One SET NX GET: sets the binding unless there is one, and answers
	// the one there was (redis.Nil: none, so it is now storeID's). One
	// command, so the ACL rule needs nothing beyond SET.
	owner, err := q.client.SetArgs(ctx, q.bindingKey(), storeID, redis.SetArgs{Mode: "NX", Get: true}).Result()
	if errors.Is(err, redis.Nil) {
		return storeID, nil
	}
	if err != nil {
		return "", fmt.Errorf("queue: bind prefix %q: %w", q.prefix, err)
	}
	return owner, nil
}

package queue

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/dagflow/dagflow/internal/clocktest"
	"github.com/dagflow/dagflow/internal/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

// newFakeClock returns a settable clock for Config.Now, at the present
// to the millisecond.
func newFakeClock() *clocktest.Clock { return clocktest.New(time.Now().Truncate(time.Millisecond)) }

// newRealRedis returns a client of the shared loopback Redis.
func newRealRedis(t testing.TB) redis.UniversalClient {
	t.Helper()
	addr := testenv.RequireRedis(t)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	return c
}

// newMiniredis returns a client of an in-process miniredis.
func newMiniredis(t testing.TB) redis.UniversalClient {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

// newTestQueue returns a Queue on its own key prefix, whose keys are
// deleted when the test ends.
func newTestQueue(t testing.TB, c redis.UniversalClient, cfg Config) *Queue {
	t.Helper()
	cfg.Client = c
	if cfg.Prefix == "" {
		cfg.Prefix = testenv.KeyPrefix(t)
	}
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		q.Close()
		deleteKeys(t, c, cfg.Prefix+":*")
	})
	return q
}

// deleteKeys deletes the keys matching pattern (on every master of a
// Cluster) and nothing else.
func deleteKeys(t testing.TB, c redis.UniversalClient, pattern string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for _, k := range batch {
			if err := c.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return del(ctx, n) })
	} else {
		err = del(ctx, c)
	}
	if err != nil {
		t.Errorf("delete test keys %s: %v", pattern, err)
	}
}

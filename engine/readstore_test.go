package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
)

// replicaStore is a read replica that may be behind in schema (a
// migration not yet replicated) and counts the runs listed on it.
type replicaStore struct {
	persistence.Store
	behind atomic.Bool
	lists  atomic.Int64
}

func (s *replicaStore) SchemaVersion(ctx context.Context) (persistence.SchemaVersion, error) {
	v, err := s.Store.SchemaVersion(ctx)
	if s.behind.Load() {
		v.Database = v.Binary - 1
	}
	return v, err
}

func (s *replicaStore) RunList(ctx context.Context, p persistence.RunListParams) (persistence.RunPage, error) {
	s.lists.Add(1)
	return s.Store.RunList(ctx, p)
}

// A read replica whose schema is behind the binary serves no read until
// it has caught up; ReadPrimary reads bypass it even then.
func TestReadStoreBehindInSchemaIsNotUsed(t *testing.T) {
	base := sqliteStore(t)
	rep := &replicaStore{Store: base}
	rep.behind.Store(true)
	env := enginetest.New(t, enginetest.Options{Store: base, Clock: engine.SystemClock,
		Configure: func(c *engine.Config) {
			c.ReadStore = rep
			c.NodeHeartbeat, c.NodeTimeout = 100*time.Millisecond, time.Second
			c.ReadStoreMaxLag = 300 * time.Millisecond
		}})
	ctx := context.Background()
	time.Sleep(1500 * time.Millisecond) // heartbeats taken, a check or more done
	if lag, ok := env.Engine.ReplicaLag(ctx); ok {
		t.Fatalf("ReplicaLag of a replica behind in schema = %v, used; want not used", lag)
	}
	if _, err := env.Engine.Runs(ctx, engine.RunFilter{}); err != nil {
		t.Fatal(err)
	}
	if n := rep.lists.Load(); n != 0 {
		t.Fatalf("a replica behind in schema served %d listings", n)
	}

	rep.behind.Store(false)
	testenv.Eventually(t, 10*time.Second, func() bool {
		_, ok := env.Engine.ReplicaLag(ctx)
		return ok
	}, "the replica is not used once its schema caught up")
	if _, err := env.Engine.Runs(ctx, engine.RunFilter{}); err != nil {
		t.Fatal(err)
	}
	if n := rep.lists.Load(); n != 1 {
		t.Fatalf("the caught-up replica served %d listings; want 1", n)
	}
	if _, err := env.Engine.Runs(engine.ReadPrimary(ctx), engine.RunFilter{}); err != nil {
		t.Fatal(err)
	}
	if n := rep.lists.Load(); n != 1 {
		t.Fatalf("a ReadPrimary listing went to the replica (%d listings there)", n)
	}
}

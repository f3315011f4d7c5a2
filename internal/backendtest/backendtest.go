// Package backendtest is the pair of backends dagflow's own tests run the
// engine on: the embedded default (SQLite and miniredis) and the real
// services (MariaDB and Redis on the loopback addresses internal/testenv
// names), each test with a database and a Redis key prefix of its own.
// With CI=true an unreachable service fails the test instead of skipping
// it.
package backendtest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// Backend is one pair of a store and a Redis.
type Backend struct {
	Name string
	// Options returns enginetest options for a fresh, private store and
	// Redis namespace, closed when the test ends.
	Options func(t testing.TB) enginetest.Options
}

// All returns the embedded default and the real services, in that order.
func All() []Backend {
	return []Backend{
		{Name: "sqlite+miniredis", Options: func(testing.TB) enginetest.Options { return enginetest.Options{} }},
		{Name: "mysql+redis", Options: MySQL},
	}
}

// MySQL returns options for a private MariaDB database and Redis key
// prefix on the shared loopback services.
func MySQL(t testing.TB) enginetest.Options {
	t.Helper()
	addr := testenv.RequireRedis(t)
	st, err := mysql.Open(context.Background(), mysql.Config{DSN: testenv.MySQLDatabase(t), AutoMigrate: true})
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	prefix := testenv.KeyPrefix(t)
	testenv.DeleteKeys(t, c, prefix)
	return enginetest.Options{Store: st, Redis: c, Prefix: prefix}
}

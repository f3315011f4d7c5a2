package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

// backendFlags are the connection settings shared by the commands that
// talk to servers.
type backendFlags struct {
	mysqlDSN  string
	sqlite    string
	redisAddr string
	prefix    string
	migrate   bool
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (b *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.mysqlDSN, "mysql-dsn", envOr("DAGFLOW_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/dagflow"), "MySQL DSN (env DAGFLOW_MYSQL_DSN)")
	fs.StringVar(&b.sqlite, "sqlite", os.Getenv("DAGFLOW_SQLITE"), "use this SQLite file instead of MySQL (env DAGFLOW_SQLITE)")
	fs.StringVar(&b.redisAddr, "redis-addr", envOr("DAGFLOW_REDIS_ADDR", "127.0.0.1:6379"), "Redis address (env DAGFLOW_REDIS_ADDR)")
	fs.StringVar(&b.prefix, "prefix", envOr("DAGFLOW_PREFIX", "dagflow"), "Redis key prefix (env DAGFLOW_PREFIX)")
	fs.BoolVar(&b.migrate, "migrate", false, "apply migrations before starting")
}

func (b *backendFlags) openStore(ctx context.Context) (persistence.Store, error) {
	if b.sqlite != "" {
		// sqlite's and mysql's errors name their package (and the file).
		st, err := sqlite.Open(ctx, sqlite.Config{Path: b.sqlite, AutoMigrate: b.migrate})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := mysql.Open(ctx, mysql.Config{DSN: b.mysqlDSN, AutoMigrate: b.migrate})
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (b *backendFlags) openRedis(ctx context.Context) (redis.UniversalClient, error) {
	c := redis.NewClient(&redis.Options{Addr: b.redisAddr})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis %s: %w", b.redisAddr, err)
	}
	return c, nil
}

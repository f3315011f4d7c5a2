package bench

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

// environment is the bench's own corner of the servers: a database it
// created and a Redis key prefix nobody else uses. close removes both and
// touches nothing else.
type environment struct {
	backend  string // "mysql+redis" or "embedded"
	servers  string // versions, for the report
	store    persistence.Store
	mysqlDB  *sql.DB       // the store's, for seeding the history; nil when embedded
	rdb      *redis.Client // the engine's client, counted by hook
	hook     *countingHook
	admin    *redis.Client // the bench's own reads: INFO, SCAN, MEMORY USAGE
	serverDB *sql.DB       // MySQL without a database: SHOW GLOBAL STATUS, CREATE/DROP DATABASE
	// tidb is set when the MySQL server is TiDB, which fills none of
	// the SHOW GLOBAL STATUS counters the bench reads (they are reported
	// n/a) and has no InnoDB pages to write back.
	tidb     bool
	database string // MySQL database or SQLite file
	prefix   string
	cleanups []func()
}

func openEnv(ctx context.Context, cfg Config) (env *environment, err error) {
	env = &environment{prefix: "dagflow-bench-" + uuid.NewString()[:8], hook: &countingHook{}}
	defer func() {
		if err != nil {
			env.close()
		}
	}()
	if cfg.Embedded {
		env.backend = "embedded"
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, fmt.Errorf("in-process redis: %w", err)
		}
		env.cleanups = append(env.cleanups, mr.Close)
		dir, err := os.MkdirTemp("", "dagflow-bench-")
		if err != nil {
			return nil, err
		}
		env.cleanups = append(env.cleanups, func() { os.RemoveAll(dir) })
		env.database = filepath.Join(dir, "bench.db")
		st, err := sqlite.Open(ctx, sqlite.Config{Path: env.database, AutoMigrate: true})
		if err != nil {
			return nil, err
		}
		env.cleanups = append(env.cleanups, func() { st.Close() })
		env.store = st
		env.servers = "miniredis (in process) + SQLite (temporary file)"
		env.rdb = redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: cfg.Workers + cfg.Triggers + 16})
		env.admin = redis.NewClient(&redis.Options{Addr: mr.Addr()})
	} else {
		env.backend = "mysql+redis"
		mc, err := gomysql.ParseDSN(cfg.MySQLDSN)
		if err != nil {
			return nil, fmt.Errorf("-mysql-dsn: %w", err)
		}
		mc.DBName = ""
		env.serverDB, err = sql.Open("mysql", mc.FormatDSN())
		if err != nil {
			return nil, fmt.Errorf("-mysql-dsn: %w", err)
		}
		env.serverDB.SetMaxOpenConns(2)
		var version string
		if err := env.serverDB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return nil, fmt.Errorf("mysql at %s: %w", mc.Addr, err)
		}
		env.tidb = strings.Contains(version, "TiDB")
		if name := cfg.HistoryDB; name != "" {
			// Kept: a history seeded once serves many measurements.
			if _, err := env.serverDB.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
				return nil, fmt.Errorf("create the -history-db database: %w", err)
			}
			env.database = name
		} else {
			name := "dagflow_bench_" + strings.ReplaceAll(uuid.NewString()[:13], "-", "")
			if _, err := env.serverDB.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
				return nil, fmt.Errorf("create the bench database: %w", err)
			}
			env.database = name
			env.cleanups = append(env.cleanups, func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				if _, err := env.serverDB.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
					fmt.Fprintf(os.Stderr, "bench: drop database %s: %v\n", name, err)
				}
			})
		}
		mc.DBName = env.database
		st, err := mysql.Open(ctx, mysql.Config{DSN: mc.FormatDSN(), AutoMigrate: true, MaxOpenConns: cfg.Workers + cfg.Triggers + 8})
		if err != nil {
			return nil, err
		}
		env.cleanups = append(env.cleanups, func() { st.Close() })
		env.store, env.mysqlDB = st, st.DB()
		env.rdb = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, PoolSize: cfg.Workers + cfg.Triggers + 16})
		env.admin = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})
		info, err := env.admin.Info(ctx, "server").Result()
		if err != nil {
			return nil, fmt.Errorf("redis at %s: %w", cfg.RedisAddr, err)
		}
		env.servers = fmt.Sprintf("MySQL %s at %s + Redis %s at %s", version, mc.Addr, infoField(info, "redis_version"), cfg.RedisAddr)
	}
	env.rdb.AddHook(env.hook)
	env.cleanups = append(env.cleanups, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := deletePrefix(ctx, env.admin, env.prefix); err != nil {
			fmt.Fprintf(os.Stderr, "bench: delete keys under %s: %v\n", env.prefix, err)
		}
		env.rdb.Close()
		env.admin.Close()
	})
	return env, nil
}

// close undoes openEnv, newest first.
func (env *environment) close() {
	for i := len(env.cleanups) - 1; i >= 0; i-- {
		env.cleanups[i]()
	}
	env.cleanups = nil
	if env.serverDB != nil {
		env.serverDB.Close()
	}
}

// deletePrefix removes every key under prefix+":" (and nothing else).
// It unlinks each key on its own (pipelined): on a Cluster node the keys
// of one SCAN batch lie in many slots, which one UNLINK cannot take.
func deletePrefix(ctx context.Context, rdb *redis.Client, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	flush := func() error {
		pipe := rdb.Pipeline()
		for _, k := range batch {
			pipe.Unlink(ctx, k)
		}
		batch = batch[:0]
		_, err := pipe.Exec(ctx)
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return flush()
	}
	return nil
}

// prefixMemory sums MEMORY USAGE (every element counted) over the keys
// under prefix+":".
func (env *environment) prefixMemory(ctx context.Context, prefix string) (int64, error) {
	var total int64
	iter := env.admin.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	flush := func() error {
		pipe := env.admin.Pipeline()
		cmds := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return err
		}
		for _, c := range cmds {
			total += c.Val() // a key deleted meanwhile counts 0
		}
		keys = keys[:0]
		return nil
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 500 {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return 0, err
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return total, nil
}

// countingHook counts what the engine's Redis client sends: one round trip
// per command or pipeline.
type countingHook struct {
	roundTrips atomic.Int64
	commands   atomic.Int64
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.roundTrips.Add(1)
		h.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.roundTrips.Add(1)
		h.commands.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// mysqlCounters are the SHOW GLOBAL STATUS variables the bench reads.
var mysqlCounters = []string{
	"Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_begin", "Com_commit",
	"Com_rollback", "Com_stmt_prepare", "Com_stmt_execute", "Com_stmt_close", "Handler_commit",
}

// snapshot is the counters at one instant.
type snapshot struct {
	at         time.Time
	mysql      map[string]int64 // nil when embedded or on TiDB
	redisCmds  map[string]int64 // INFO commandstats calls; nil when embedded
	roundTrips int64            // engine client, from the hook
	commands   int64
}

func (env *environment) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{roundTrips: env.hook.roundTrips.Load(), commands: env.hook.commands.Load()}
	if env.serverDB != nil {
		if !env.tidb {
			if err := env.mysqlStatus(ctx, &s); err != nil {
				return s, err
			}
		}
		info, err := env.admin.Info(ctx, "commandstats").Result()
		if err != nil {
			return s, fmt.Errorf("redis commandstats: %w", err)
		}
		s.redisCmds = parseCommandStats(info)
	}
	s.at = time.Now()
	return s, nil
}

// parseCommandStats reads the calls of each command from INFO
// commandstats ("cmdstat_evalsha:calls=12,usec=...").
func parseCommandStats(info string) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return out
}

func sumCalls(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return "?"
}

// mysqlStatus reads the mysqlCounters into s.mysql.
func (env *environment) mysqlStatus(ctx context.Context, s *snapshot) error {
	s.mysql = map[string]int64{}
	q := "SHOW GLOBAL STATUS WHERE Variable_name IN ('" + strings.Join(mysqlCounters, "', '") + "')"
	rows, err := env.serverDB.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("mysql status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return err
		}
		n, _ := strconv.ParseInt(value, 10, 64)
		s.mysql[name] = n
	}
	return rows.Close()
}

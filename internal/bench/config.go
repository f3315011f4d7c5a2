package bench

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is what a bench session is asked to do. RegisterFlags sets the
// defaults of `dagflow bench`; Validate checks a Config before Run.
type Config struct {
	// MySQLDSN names the server the bench creates, uses and drops its own
	// database on; the database the DSN names, if any, is not used.
	MySQLDSN string
	// RedisAddr is the Redis the bench uses under its own key prefix.
	RedisAddr string
	// Embedded uses an in-process Redis (miniredis) and a temporary
	// SQLite file instead of the servers.
	Embedded bool
	// Runs are the order runs of the full-load measurement.
	Runs int
	// Warmup are the runs before it, not measured.
	Warmup int
	// Workers is the engine's concurrency (engine.Config.Concurrency).
	Workers int
	// Triggers are the goroutines calling Trigger at full load.
	Triggers int
	// Rate, when set, adds a fixed-rate measurement after the full load.
	Rate Rate
	// Duration is the length of the fixed-rate measurement.
	Duration time.Duration
	// Backlog, when positive, measures Redis memory with this many steps
	// queued and no workers (a real Redis only).
	Backlog int
	// History, when positive, pre-fills this many finished runs before
	// measuring (MySQL only).
	History int
	// HistoryDB, when set, names a MySQL database the bench uses and
	// keeps instead of a temporary one: with History, it tops the
	// history up to History runs (a seed interrupted or done before is
	// resumed, not repeated), so a large history is written once and
	// measured against many times.
	HistoryDB string
	// Purge deletes the History runs (engine.Purge, the retention sweep)
	// while the full-load measurement runs, to measure what retention
	// costs the hot path.
	Purge bool
	// PurgeShare is the sweep's engine.Retention.Share (0: the engine's
	// default).
	PurgeShare float64
	// Sample is the runs per measurement read back for the latencies.
	Sample int
	// CPUProfile, when set, is a file for a CPU profile of the full load.
	CPUProfile string
	// LatencyLog, when set, is a file for every sampled step's dispatch
	// latency (CSV), in order of ready time.
	LatencyLog string
	// JSONOnly leaves the table out of the report (see Result.Print).
	JSONOnly bool
	// Metrics registers the measured engine's Prometheus metrics on a
	// fresh registry (engine.Config.Registerer), to measure their cost.
	Metrics bool
	// Tracing gives the measured engine an OpenTelemetry SDK
	// TracerProvider whose batched spans are discarded: the cost of
	// making the spans, without an exporter's.
	Tracing bool
	// Timeout bounds the whole session.
	Timeout time.Duration
	// Procs, when positive, runs the steps in this many worker processes
	// of the same binary (RunProcs) instead of the bench's own engine.
	Procs int
	// Queues spreads the runs of a Procs session over this many queues
	// (one order workflow each; on a Redis Cluster, on different masters).
	Queues int
	// RedisCluster, when set, are the nodes of a Redis Cluster to use
	// instead of RedisAddr (Procs sessions only).
	RedisCluster []string
}

// Rate is the --rate flag: runs per second, or a percentage of the
// full-load rate measured just before ("50%"). The zero Rate is off.
type Rate struct {
	PerSecond float64
	Percent   float64
}

// String formats r as Set reads it.
func (r *Rate) String() string {
	switch {
	case r == nil:
		return ""
	case r.Percent > 0:
		return strconv.FormatFloat(r.Percent, 'g', -1, 64) + "%"
	case r.PerSecond > 0:
		return strconv.FormatFloat(r.PerSecond, 'g', -1, 64)
	}
	return ""
}

// Set reads runs per second ("700"), a percentage ("50%"), or "0" or ""
// for off.
func (r *Rate) Set(s string) error {
	*r = Rate{}
	if s == "" || s == "0" {
		return nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 || v > 100 {
			return fmt.Errorf("%q is not a percentage in (0, 100]", s)
		}
		r.Percent = v
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q is not a positive number of runs per second (or a percentage like 50%%)", s)
	}
	r.PerSecond = v
	return nil
}

func (r Rate) on() bool { return r.PerSecond > 0 || r.Percent > 0 }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// RegisterFlags defines the flags of `dagflow bench` on fs, each setting
// its field of c, with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.MySQLDSN, "mysql-dsn", envOr("DAGFLOW_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"), "MySQL server DSN (env DAGFLOW_MYSQL_DSN); the bench creates, uses and drops its own database, whatever database the DSN names")
	fs.StringVar(&c.RedisAddr, "redis-addr", envOr("DAGFLOW_REDIS_ADDR", "127.0.0.1:6379"), "Redis address (env DAGFLOW_REDIS_ADDR); the bench uses and deletes its own key prefix")
	fs.BoolVar(&c.Embedded, "embedded", false, "use an in-process Redis (miniredis) and a temporary SQLite file instead of the servers")
	fs.IntVar(&c.Runs, "runs", 20000, "order runs in the full-load measurement")
	fs.IntVar(&c.Warmup, "warmup", 1000, "order runs before the measurement (not measured)")
	fs.IntVar(&c.Workers, "workers", 1024, "engine concurrency: steps run or waiting for their completion to commit, at once (no-op steps are cheap, so many; the more, the larger the group commits)")
	fs.IntVar(&c.Triggers, "triggers", 32, "goroutines triggering runs at full load")
	fs.Var(&c.Rate, "rate", "after the full-load run, trigger runs at this fixed rate (runs/s, or a percentage of the measured full-load rate, e.g. 50%) for -duration and report latencies; 0 or empty: skip")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "length of the fixed-rate measurement")
	fs.IntVar(&c.Backlog, "backlog", 0, "measure Redis memory per queued step with this many steps waiting (workers off); 0: skip (the issue's figure is 100000)")
	fs.IntVar(&c.History, "history", 0, "pre-fill this many finished order runs (with steps and attempts) before measuring (MySQL only)")
	fs.StringVar(&c.HistoryDB, "history-db", "", "use and keep this MySQL database (created if missing) instead of a temporary one; with -history, top its history up to that many runs, so a large history is seeded once")
	fs.BoolVar(&c.Purge, "purge", false, "delete the -history runs (the retention sweep, engine.Purge) while the full load runs")
	fs.Float64Var(&c.PurgeShare, "purge-share", 0, "with -purge: the sweep's share of its time in batches (engine.Retention.Share; 0: the engine's default)")
	fs.IntVar(&c.Sample, "sample", 2000, "runs per measurement whose steps are read back for the latency percentiles")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the full-load measurement to this file")
	fs.StringVar(&c.LatencyLog, "latency-log", "", "write every sampled step's dispatch latency to this file (CSV: phase, step, ready unix ns, dispatch µs), to see when the slow ones happened")
	fs.BoolVar(&c.JSONOnly, "json-only", false, "print only the JSON line")
	fs.BoolVar(&c.Metrics, "metrics", false, "register the engine's Prometheus metrics (on a registry nothing scrapes), to measure their cost")
	fs.BoolVar(&c.Tracing, "tracing", false, "trace the engine with an OpenTelemetry SDK provider whose spans are batched and discarded (the cost of tracing without an exporter's)")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Minute, "give up when a phase has not finished by then")
	fs.IntVar(&c.Procs, "procs", 0, "run the steps in this many worker processes of this binary (each with -workers slots), the bench only triggering; reports steps/s over all of them and CPU per step of the engines and the servers apart; 0: one engine in the bench's process")
	fs.IntVar(&c.Queues, "queues", 1, "with -procs: spread the runs over this many queues (on a Redis Cluster, over its masters)")
	fs.Func("redis-cluster", "with -procs: comma-separated nodes of a Redis Cluster to use instead of -redis-addr", func(s string) error {
		c.RedisCluster = nil
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.RedisCluster = append(c.RedisCluster, a)
			}
		}
		return nil
	})
}

// Validate reports every setting of c that is out of range or that
// cannot be combined with another, naming each by its flag.
func (c *Config) Validate() error {
	var errs []error
	if c.Runs < 1 {
		errs = append(errs, fmt.Errorf("-runs %d: must be at least 1", c.Runs))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("-warmup %d: must not be negative", c.Warmup))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("-workers %d: must be at least 1", c.Workers))
	}
	if c.Triggers < 1 {
		errs = append(errs, fmt.Errorf("-triggers %d: must be at least 1", c.Triggers))
	}
	if c.Rate.on() && c.Duration < time.Second {
		errs = append(errs, fmt.Errorf("-duration %v: the fixed-rate measurement needs at least 1s", c.Duration))
	}
	if c.Backlog < 0 {
		errs = append(errs, fmt.Errorf("-backlog %d: must not be negative", c.Backlog))
	}
	if c.Backlog > 0 && c.Embedded {
		errs = append(errs, errors.New("-backlog measures a real Redis's memory; it cannot be used with -embedded"))
	}
	if c.History < 0 {
		errs = append(errs, fmt.Errorf("-history %d: must not be negative", c.History))
	}
	if c.Purge && c.History == 0 {
		errs = append(errs, errors.New("-purge deletes the -history runs: it needs -history"))
	}
	if c.PurgeShare != 0 && (!c.Purge || c.PurgeShare < 0 || c.PurgeShare > 1) {
		errs = append(errs, fmt.Errorf("-purge-share %v: needs -purge, and a share above 0 and at most 1", c.PurgeShare))
	}
	if c.History > 0 && c.Embedded {
		errs = append(errs, errors.New("-history pre-fills MySQL; it cannot be used with -embedded"))
	}
	if c.HistoryDB != "" {
		if c.Purge {
			errs = append(errs, errors.New("-purge deletes the history that -history-db keeps: use one or the other"))
		}
		if c.Embedded {
			errs = append(errs, errors.New("-history-db names a MySQL database; it cannot be used with -embedded"))
		}
		if !validDBName(c.HistoryDB) {
			errs = append(errs, fmt.Errorf("-history-db %q: use 1 to 64 letters, digits and underscores", c.HistoryDB))
		}
	}
	if c.Sample < 1 {
		errs = append(errs, fmt.Errorf("-sample %d: must be at least 1", c.Sample))
	}
	if c.Procs < 0 {
		errs = append(errs, fmt.Errorf("-procs %d: must not be negative", c.Procs))
	}
	if c.Queues < 1 {
		errs = append(errs, fmt.Errorf("-queues %d: must be at least 1", c.Queues))
	}
	if c.Procs == 0 && (c.Queues > 1 || len(c.RedisCluster) > 0) {
		errs = append(errs, errors.New("-queues and -redis-cluster need -procs"))
	}
	if c.Procs > 0 && (c.Rate.on() || c.Backlog > 0 || c.History > 0 || c.HistoryDB != "" || c.CPUProfile != "" || c.LatencyLog != "" || c.Metrics || c.Tracing) {
		errs = append(errs, errors.New("-procs measures full-load throughput only: it cannot be combined with -rate, -backlog, -history, -history-db, -cpuprofile, -latency-log, -metrics or -tracing"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout %v: must be positive", c.Timeout))
	}
	return errors.Join(errs...)
}

// validDBName reports whether name is a database name the bench may
// create and quote without escaping.
func validDBName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

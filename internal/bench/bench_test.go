package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// runFlags does what `dagflow bench args...` does: parses the flags, runs
// the bench and prints its report to stdout.
func runFlags(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg Config
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := Run(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return res.Print(stdout, cfg.JSONOnly)
}

// runBenchCmd runs the bench with the flags args and returns the parsed
// JSON line (the last line of the report) and the human table before it.
func runBenchCmd(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if err := runFlags(ctx, args, &out, &errb); err != nil {
		t.Fatalf("bench %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	var res map[string]any
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatalf("the last line of the output is not JSON: %v\n%s", err, out.String())
	}
	for _, l := range lines[:len(lines)-1] {
		if strings.HasPrefix(l, "{") {
			t.Errorf("more than one JSON line:\n%s", out.String())
		}
	}
	return res, strings.Join(lines[:len(lines)-1], "\n")
}

// positive checks that each key holds a number above zero.
func positive(t *testing.T, res map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		v, ok := res[k].(float64)
		if !ok || !(v > 0) {
			t.Errorf("%s = %v, want a positive number", k, res[k])
		}
	}
}

// machineBusy checks shares of the machine's CPUs: in (0, 1] on Linux,
// where /proc/stat is read, null elsewhere.
func machineBusy(t *testing.T, res map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if runtime.GOOS != "linux" {
			if res[k] != nil {
				t.Errorf("%s = %v, want null off Linux", k, res[k])
			}
			continue
		}
		if v, ok := res[k].(float64); !ok || v <= 0 || v > 1 {
			t.Errorf("%s = %v, want a share in (0, 1]", k, res[k])
		}
	}
}

// The keys every JSON line has, measured or null.
var benchKeys = []string{
	"backend", "commit", "commit_source", "runs", "workers", "history", "seconds", "runs_per_s", "steps_per_s", "errors",
	"dispatch_p50_ms", "dispatch_p90_ms", "dispatch_p99_ms", "run_p50_ms", "run_p99_ms",
	"dispatch_root_p50_ms", "dispatch_root_p99_ms", "dispatch_released_p50_ms", "dispatch_released_p99_ms",
	"rate_offered_runs_per_s", "rate_dispatch_p99_ms", "rate_run_p50_ms", "rate_run_p99_ms",
	"rate_dispatch_root_p99_ms", "rate_dispatch_released_p99_ms",
	"mysql_round_trips_per_step", "mysql_statements_per_step", "mysql_transactions_per_step",
	"redis_round_trips_per_step", "redis_server_calls_per_step", "redis_bytes_per_queued_step",
	"backlog_steps", "peak_rss_mib", "cpu_s_per_1000_steps", "database", "redis_prefix",
	"steps_per_claim_tx", "steps_per_complete_tx", "claimed_via_queue", "claimed_at_release", "claimed_at_create",
	"machine_cpu_busy", "rate_machine_cpu_busy", "rate_cpu_s_per_1000_steps",
	"runs_per_create_tx", "rate_runs_per_create_tx", "rate_steps_per_complete_tx",
	"trigger_p50_ms", "trigger_p99_ms", "rate_trigger_p50_ms", "rate_trigger_p99_ms",
}

func TestBenchEmbedded(t *testing.T) {
	latLog := filepath.Join(t.TempDir(), "latency.csv")
	res, table := runBenchCmd(t, "--embedded", "--runs", "200", "--warmup", "20", "--workers", "16",
		"--rate", "50", "--duration", "1s", "--latency-log", latLog)
	checkLatencyLog(t, latLog, map[string]int{
		"full": 4 * int(res["sampled_runs"].(float64)), "rate": 4 * int(res["rate_sampled_runs"].(float64)),
	})
	for _, k := range benchKeys {
		if _, ok := res[k]; !ok {
			t.Errorf("JSON line lacks %q", k)
		}
	}
	positive(t, res, "runs_per_s", "steps_per_s", "dispatch_p50_ms", "dispatch_p99_ms", "run_p50_ms",
		"run_p99_ms", "rate_achieved_runs_per_s", "rate_run_p99_ms", "redis_round_trips_per_step",
		"peak_rss_mib", "cpu_s_per_1000_steps", "dispatch_root_p99_ms", "dispatch_released_p99_ms",
		"rate_dispatch_root_p99_ms", "rate_dispatch_released_p99_ms", "rate_cpu_s_per_1000_steps",
		"runs_per_create_tx", "rate_runs_per_create_tx", "rate_steps_per_complete_tx",
		"trigger_p50_ms", "trigger_p99_ms", "rate_trigger_p50_ms", "rate_trigger_p99_ms")
	machineBusy(t, res, "machine_cpu_busy", "rate_machine_cpu_busy")
	if res["errors"] != 0.0 || res["backend"] != "embedded" || res["mysql_round_trips_per_step"] != nil {
		t.Errorf("errors %v, backend %v, mysql %v", res["errors"], res["backend"], res["mysql_round_trips_per_step"])
	}
	if sp, rp := res["steps_per_s"].(float64), res["runs_per_s"].(float64); sp < 3.99*rp || sp > 4.01*rp {
		t.Errorf("steps/s %v is not 4 x runs/s %v", sp, rp)
	}
	for _, want := range []string{"FULL LOAD", "FIXED RATE", "dispatch p50/p90/p99", "root / released p50, p99", "Redis round trips", "machine CPU busy", "Trigger p50, p99"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	// The temporary SQLite file and its directory are gone.
	if _, err := os.Stat(filepath.Dir(res["database"].(string))); !os.IsNotExist(err) {
		t.Errorf("the bench left %s behind (%v)", res["database"], err)
	}
}

// checkLatencyLog checks a --latency-log file: its header, then per phase
// the wanted number of lines of a known step, in order of ready time,
// with a latency that is not negative.
func checkLatencyLog(t *testing.T, path string, want map[string]int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != "phase,step,ready_unix_ns,dispatch_us" {
		t.Fatalf("latency log header %q", lines[0])
	}
	got := map[string]int{}
	last := map[string]int64{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 4 || stepIndex(f[1]) < 0 {
			t.Fatalf("latency log line %q", l)
		}
		ready, err1 := strconv.ParseInt(f[2], 10, 64)
		us, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || us < 0 || ready < last[f[0]] {
			t.Fatalf("latency log line %q (previous ready %d)", l, last[f[0]])
		}
		last[f[0]] = ready
		got[f[0]]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("latency log lines per phase %v, want %v", got, want)
	}
}

// TestBenchLatencyLogBadPath: a log that cannot be created, or written
// (/dev/full, where there is one), fails the bench with an error naming
// the flag.
func TestBenchLatencyLogBadPath(t *testing.T) {
	paths := []string{filepath.Join(t.TempDir(), "no-such-dir", "latency.csv")}
	if _, err := os.Stat("/dev/full"); err == nil {
		paths = append(paths, "/dev/full")
	}
	for _, bad := range paths {
		var out, errb bytes.Buffer
		err := runFlags(context.Background(), []string{"--embedded", "--runs", "10", "--warmup", "0", "--latency-log", bad}, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), "-latency-log") {
			t.Errorf("--latency-log %s: error %v: want a failure naming -latency-log", bad, err)
		}
	}
}

func TestBenchMySQL(t *testing.T) {
	redisAddr := testenv.RequireRedis(t)
	dsn := testenv.MySQLDSN()
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Ping(); err != nil {
		cfg, _ := gomysql.ParseDSN(dsn)
		testenv.Unavailable(t, "mysql at "+cfg.Addr, err)
	}
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	// Few workers, so that steps also go through the queue (Redis round
	// trips are counted) and not all are claimed at create or release.
	res, table := runBenchCmd(t, "--mysql-dsn", dsn, "--redis-addr", redisAddr, "--runs", "150", "--workers", "16",
		"--warmup", "10", "--history", "500", "--rate", "50%", "--duration", "1s", "--backlog", "3000",
		"--cpuprofile", prof)
	positive(t, res, "runs_per_s", "steps_per_s", "dispatch_p50_ms", "dispatch_p90_ms", "dispatch_p99_ms",
		"run_p50_ms", "run_p99_ms", "rate_offered_runs_per_s", "rate_run_p50_ms", "rate_dispatch_p99_ms",
		"mysql_round_trips_per_step", "mysql_statements_per_step", "mysql_transactions_per_step",
		"redis_round_trips_per_step", "redis_server_calls_per_step", "redis_bytes_per_queued_step",
		"backlog_steps", "history_seed_seconds", "peak_rss_mib", "cpu_s_per_1000_steps", "rate_cpu_s_per_1000_steps",
		"runs_per_create_tx", "rate_runs_per_create_tx", "trigger_p99_ms", "rate_trigger_p99_ms")
	machineBusy(t, res, "machine_cpu_busy", "rate_machine_cpu_busy")
	if v, ok := res["reconcile_pass_ms"].(float64); !ok || v <= 0 {
		t.Errorf("reconcile_pass_ms = %v, want a positive time", res["reconcile_pass_ms"])
	}
	if v, ok := res["history_settle_seconds"].(float64); !ok || v < 0 {
		t.Errorf("history_settle_seconds = %v, want a duration", res["history_settle_seconds"])
	}
	if sum := res["claimed_via_queue"].(float64) + res["claimed_at_release"].(float64) + res["claimed_at_create"].(float64); sum < 0.999 || sum > 1.001 {
		t.Errorf("claimed via the queue, at release and at create add up to %v, want 1", sum)
	}
	if res["errors"] != 0.0 || res["backlog_steps"] != 3000.0 || res["history"] != 500.0 {
		t.Errorf("errors %v, backlog_steps %v, history %v", res["errors"], res["backlog_steps"], res["history"])
	}
	if !strings.Contains(table, "BACKLOG") || !strings.Contains(table, "MySQL round trips") {
		t.Errorf("table lacks the backlog or MySQL rows:\n%s", table)
	}
	if st, err := os.Stat(prof); err != nil || st.Size() == 0 {
		t.Errorf("no CPU profile: %v", err)
	}
	// The bench's database and keys are gone.
	db := res["database"].(string)
	if !strings.HasPrefix(db, "dagflow_bench_") {
		t.Fatalf("database %q", db)
	}
	var name string
	switch err := admin.QueryRow("SHOW DATABASES LIKE '" + db + "'").Scan(&name); err {
	case sql.ErrNoRows:
	case nil:
		t.Errorf("database %s still exists", db)
	default:
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	keys, _, err := rdb.Scan(context.Background(), 0, res["redis_prefix"].(string)+":*", 10000).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		t.Errorf("%d keys left under %s, e.g. %s", len(keys), res["redis_prefix"], keys[0])
	}
}

func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "-runs 0"},
		{[]string{"--workers", "-1"}, "-workers -1"},
		{[]string{"--rate", "fast"}, `"fast" is not a positive number`},
		{[]string{"--rate", "150%"}, `"150%" is not a percentage`},
		{[]string{"--rate", "10", "--duration", "10ms"}, "-duration 10ms"},
		{[]string{"--embedded", "--backlog", "10"}, "-backlog measures a real Redis"},
		{[]string{"--embedded", "--history", "10"}, "-history pre-fills MySQL"},
		{[]string{"--purge"}, "-purge deletes the -history runs: it needs -history"},
	} {
		var out, errb bytes.Buffer
		if err := runFlags(context.Background(), tc.args, &out, &errb); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: error %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}

// TestReadyAt: a released step is ready when the last of its upstream
// handlers returned, and not before all of them have.
func TestReadyAt(t *testing.T) {
	var r runRec
	r.ended[stepIndex("notify")].Store(200)
	if _, ok := readyAt(&r, []string{"notify", "points"}); ok {
		t.Error("ready with points not returned")
	}
	r.ended[stepIndex("points")].Store(150)
	if got, ok := readyAt(&r, []string{"notify", "points"}); !ok || got != 200 {
		t.Errorf("readyAt = %d, %v; want 200 (the later of the two)", got, ok)
	}
	if _, ok := readyAt(&r, []string{"notify", "elsewhere"}); ok {
		t.Error("ready after a step the bench does not record")
	}
}

// TestTraceSampler: the report names the sampler the SDK took from the
// environment, as a production node's does, so that a traced
// measurement says what share of the spans it recorded.
func TestTraceSampler(t *testing.T) {
	for _, tc := range []struct {
		sampler, arg string
		tracing      bool
		want         string
	}{
		{"", "", false, ""},
		{"parentbased_traceidratio", "0.1", false, ""},
		{"", "", true, "parentbased_always_on"},
		{"  ParentBased_TraceIDRatio ", " 0.1", true, "parentbased_traceidratio:0.1"},
		{"always_off", "", true, "always_off"},
	} {
		env := map[string]string{"OTEL_TRACES_SAMPLER": tc.sampler, "OTEL_TRACES_SAMPLER_ARG": tc.arg}
		if got := traceSampler(tc.tracing, func(k string) string { return env[k] }); got != tc.want {
			t.Errorf("tracing %v, sampler %q arg %q: got %q, want %q", tc.tracing, tc.sampler, tc.arg, got, tc.want)
		}
	}
}

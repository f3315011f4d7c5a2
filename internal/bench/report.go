package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is what Run measured: the JSON line of `dagflow bench`. Keys are
// stable; a figure that was not measured (phase skipped, or not measurable
// on the embedded backends) is null. docs/benchmarks.md documents them.
type Result struct {
	Backend string `json:"backend"`
	Servers string `json:"servers"`
	Commit  string `json:"commit"`
	// CommitSource says where Commit comes from: "build" (recorded in the
	// binary by go build), "working directory" (the binary holds no
	// revision, as with go run or -buildvcs=false, so it is the HEAD of
	// the directory the bench runs in, which need not be what it was
	// built from), or "" (unknown).
	CommitSource string `json:"commit_source"`
	Go           string `json:"go"`
	CPUs         int    `json:"cpus"`
	Runs         int    `json:"runs"`
	Warmup       int    `json:"warmup"`
	Workers      int    `json:"workers"`
	Triggers     int    `json:"triggers"`
	History      int    `json:"history"`
	// Metrics: the engine kept its Prometheus metrics (--metrics).
	Metrics bool `json:"metrics"`
	// Tracing: the engine made spans (see Config.Tracing).
	Tracing bool `json:"tracing"`
	// TraceSampler is, with Tracing, the sampler the SDK took from
	// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, as a production
	// node's does ("parentbased_traceidratio:0.1"; "parentbased_always_on"
	// when unset); "" without tracing.
	TraceSampler string `json:"trace_sampler"`

	HistorySeedSeconds *float64 `json:"history_seed_seconds"`
	// HistorySettleSeconds is how long the server took, after the seed,
	// to write the run tables' dirty pages back (the bench waits for it).
	HistorySettleSeconds *float64 `json:"history_settle_seconds"`
	// PurgedRuns and PurgeBatches are what -purge deleted while the full
	// load ran (the sweep is stopped when the full load ends).
	PurgedRuns   *int `json:"purged_runs,omitempty"`
	PurgeBatches *int `json:"purge_batches,omitempty"`
	// PurgeShare is the sweep's Retention.Share (with -purge).
	PurgeShare *float64 `json:"purge_share,omitempty"`
	// ReconcilePassMs is the median time of one reconcile pass
	// (Engine.Reconcile) with the engine idle, after the history.
	ReconcilePassMs *float64 `json:"reconcile_pass_ms"`

	// Full load: cfg.Runs triggered as fast as cfg.Triggers goroutines can.
	Seconds   float64 `json:"seconds"`
	RunsPerS  float64 `json:"runs_per_s"`
	StepsPerS float64 `json:"steps_per_s"`
	Errors    int64   `json:"errors"`
	// Steps per claim and per completion transaction (the group commit).
	ClaimBatch  float64 `json:"steps_per_claim_tx"`
	CommitBatch float64 `json:"steps_per_complete_tx"`
	CreateBatch float64 `json:"runs_per_create_tx"`
	// Fractions of the full-load steps claimed through the queue, at
	// release and at create.
	ClaimedViaQueue  float64  `json:"claimed_via_queue"`
	ClaimedAtRelease float64  `json:"claimed_at_release"`
	ClaimedAtCreate  float64  `json:"claimed_at_create"`
	SampledRuns      int      `json:"sampled_runs"`
	DispatchP50Ms    *float64 `json:"dispatch_p50_ms"`
	DispatchP90Ms    *float64 `json:"dispatch_p90_ms"`
	DispatchP99Ms    *float64 `json:"dispatch_p99_ms"`
	// The dispatch of root steps (queued when their run was created) and
	// of the steps their upstream's completion released.
	DispatchRootP50Ms     *float64 `json:"dispatch_root_p50_ms"`
	DispatchRootP99Ms     *float64 `json:"dispatch_root_p99_ms"`
	DispatchReleasedP50Ms *float64 `json:"dispatch_released_p50_ms"`
	DispatchReleasedP99Ms *float64 `json:"dispatch_released_p99_ms"`
	RunP50Ms              *float64 `json:"run_p50_ms"`
	RunP90Ms              *float64 `json:"run_p90_ms"`
	RunP99Ms              *float64 `json:"run_p99_ms"`
	// The Trigger call itself: called -> returned (the run and its first
	// steps stored).
	TriggerP50Ms *float64 `json:"trigger_p50_ms"`
	TriggerP99Ms *float64 `json:"trigger_p99_ms"`
	// MachineCPUBusy is the busy share of all the machine's CPUs over the
	// full-load phase (servers on the same machine included; Linux only).
	MachineCPUBusy *float64 `json:"machine_cpu_busy"`

	// Fixed offered rate (--rate), open loop, for --duration.
	RateOfferedRunsPerS       *float64 `json:"rate_offered_runs_per_s"`
	RateRuns                  *int     `json:"rate_runs"`
	RateAchievedRunsPerS      *float64 `json:"rate_achieved_runs_per_s"`
	RateLateTriggers          *int     `json:"rate_late_triggers"`
	RateErrors                *int64   `json:"rate_errors"`
	RateSampledRuns           *int     `json:"rate_sampled_runs"`
	RateDispatchP50Ms         *float64 `json:"rate_dispatch_p50_ms"`
	RateDispatchP90Ms         *float64 `json:"rate_dispatch_p90_ms"`
	RateDispatchP99Ms         *float64 `json:"rate_dispatch_p99_ms"`
	RateDispatchRootP50Ms     *float64 `json:"rate_dispatch_root_p50_ms"`
	RateDispatchRootP99Ms     *float64 `json:"rate_dispatch_root_p99_ms"`
	RateDispatchReleasedP50Ms *float64 `json:"rate_dispatch_released_p50_ms"`
	RateDispatchReleasedP99Ms *float64 `json:"rate_dispatch_released_p99_ms"`
	RateRunP50Ms              *float64 `json:"rate_run_p50_ms"`
	RateRunP90Ms              *float64 `json:"rate_run_p90_ms"`
	RateRunP99Ms              *float64 `json:"rate_run_p99_ms"`
	RateTriggerP50Ms          *float64 `json:"rate_trigger_p50_ms"`
	RateTriggerP99Ms          *float64 `json:"rate_trigger_p99_ms"`
	// The same for the fixed-rate phase, and this process's CPU per 1,000
	// of its steps: how busy the machine was at that rate, and what a
	// step cost when batches are small.
	RateRunsPerCreateTx        *float64 `json:"rate_runs_per_create_tx"`
	RateStepsPerCompleteTx     *float64 `json:"rate_steps_per_complete_tx"`
	RateMachineCPUBusy         *float64 `json:"rate_machine_cpu_busy"`
	RateCPUSecondsPer1000Steps *float64 `json:"rate_cpu_s_per_1000_steps"`

	// Server counters over the full-load window, per step. MySQL's are
	// global: other clients of a shared server add to them. They are
	// null (n/a) on TiDB, whose SHOW GLOBAL STATUS has none of them.
	MySQLRoundTripsPerStep   *float64           `json:"mysql_round_trips_per_step"`
	MySQLStatementsPerStep   *float64           `json:"mysql_statements_per_step"`
	MySQLTransactionsPerStep *float64           `json:"mysql_transactions_per_step"`
	MySQLCountersPerStep     map[string]float64 `json:"mysql_counters_per_step"`
	MySQLIdleQuestionsPerS   *float64           `json:"mysql_idle_questions_per_s"`

	RedisRoundTripsPerStep  float64            `json:"redis_round_trips_per_step"`
	RedisCommandsPerStep    float64            `json:"redis_commands_per_step"`
	RedisServerCallsPerStep *float64           `json:"redis_server_calls_per_step"`
	RedisCallsPerStepByCmd  map[string]float64 `json:"redis_server_calls_per_step_by_command"`
	RedisIdleCallsPerS      *float64           `json:"redis_idle_calls_per_s"`
	BacklogSteps            *int64             `json:"backlog_steps"`
	BacklogRedisBytes       *int64             `json:"backlog_redis_bytes"`
	RedisBytesPerQueuedStep *float64           `json:"redis_bytes_per_queued_step"`
	PeakRSSMiB              float64            `json:"peak_rss_mib"`
	CPUSecondsPer1000Steps  float64            `json:"cpu_s_per_1000_steps"`
	Database                string             `json:"database"`
	RedisPrefix             string             `json:"redis_prefix"`
}

func newResult(cfg Config, env *environment) *Result {
	r := &Result{
		Backend: env.backend, Servers: env.servers, Go: runtime.Version(),
		CPUs: runtime.NumCPU(), Runs: cfg.Runs, Warmup: cfg.Warmup, Workers: cfg.Workers,
		Triggers: cfg.Triggers, History: cfg.History, Metrics: cfg.Metrics, Tracing: cfg.Tracing, Database: env.database, RedisPrefix: env.prefix,
		TraceSampler: traceSampler(cfg.Tracing, os.Getenv),
	}
	r.Commit, r.CommitSource = buildCommit()
	return r
}

// buildCommit is the VCS revision the binary was built from ("+dirty"
// for uncommitted changes) and "build". `go build` records it; when the
// binary holds none (`go run`, -buildvcs=false) it asks git about the
// working directory and says so, and is empty when that fails too.
func buildCommit() (string, string) {
	fromDir := func() (string, string) {
		if c := gitCommit(); c != "" {
			return c, "working directory"
		}
		return "", ""
	}
	var rev, dirty string
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fromDir()
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return fromDir()
	}
	return rev + dirty, "build"
}

func gitCommit() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rev, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(rev))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		s += "+dirty"
	}
	return s
}

func (r *Result) setFullLoad(p phaseResult, before, after snapshot) {
	steps := float64(p.runs * len(orderSteps))
	r.Seconds = p.seconds()
	r.RunsPerS = p.runsPerSecond()
	r.StepsPerS = steps / p.seconds()
	r.Errors = p.failed
	r.ClaimBatch, r.CommitBatch, r.CreateBatch = p.claimBatch, p.commitBatch, p.createBatch
	r.ClaimedViaQueue, r.ClaimedAtRelease, r.ClaimedAtCreate = p.viaQueue, p.atRelease, p.atCreate
	r.RedisRoundTripsPerStep = float64(after.roundTrips-before.roundTrips) / steps
	r.RedisCommandsPerStep = float64(after.commands-before.commands) / steps
	r.CPUSecondsPer1000Steps = p.cpuPer1000Steps()
	r.MachineCPUBusy = p.machineBusy
	if before.mysql != nil {
		d := func(name string) float64 { return float64(after.mysql[name] - before.mysql[name]) }
		r.MySQLCountersPerStep = map[string]float64{}
		for _, name := range mysqlCounters {
			r.MySQLCountersPerStep[name] = round3(d(name) / steps)
		}
		// Questions counts COM_QUERY and COM_STMT_EXECUTE but not the
		// COM_STMT_PREPARE each parameterized query also costs.
		r.MySQLRoundTripsPerStep = ptr((d("Questions") + d("Com_stmt_prepare")) / steps)
		r.MySQLStatementsPerStep = ptr((d("Com_select") + d("Com_insert") + d("Com_update") + d("Com_delete")) / steps)
		r.MySQLTransactionsPerStep = ptr((d("Com_commit") + d("Com_rollback")) / steps)
	}
	if before.redisCmds != nil {
		r.RedisServerCallsPerStep = ptr(float64(sumCalls(after.redisCmds)-sumCalls(before.redisCmds)) / steps)
		r.RedisCallsPerStepByCmd = map[string]float64{}
		for name, n := range after.redisCmds {
			if delta := n - before.redisCmds[name]; delta > 0 {
				r.RedisCallsPerStepByCmd[name] = round3(float64(delta) / steps)
			}
		}
	}
}

func (r *Result) setLatencies(l latencySample, phase string) {
	all := l.dispatches()
	d50, d90, d99 := percentileMs(all, 50), percentileMs(all, 90), percentileMs(all, 99)
	r50, r90, r99 := percentileMs(l.run, 50), percentileMs(l.run, 90), percentileMs(l.run, 99)
	o50, o99 := percentileMs(l.root, 50), percentileMs(l.root, 99)
	e50, e99 := percentileMs(l.released, 50), percentileMs(l.released, 99)
	t50, t99 := percentileMs(l.trigger, 50), percentileMs(l.trigger, 99)
	if phase == "rate" {
		r.RateTriggerP50Ms, r.RateTriggerP99Ms = t50, t99
		r.RateSampledRuns = &l.runs
		r.RateDispatchP50Ms, r.RateDispatchP90Ms, r.RateDispatchP99Ms = d50, d90, d99
		r.RateDispatchRootP50Ms, r.RateDispatchRootP99Ms = o50, o99
		r.RateDispatchReleasedP50Ms, r.RateDispatchReleasedP99Ms = e50, e99
		r.RateRunP50Ms, r.RateRunP90Ms, r.RateRunP99Ms = r50, r90, r99
		return
	}
	r.SampledRuns = l.runs
	r.DispatchP50Ms, r.DispatchP90Ms, r.DispatchP99Ms = d50, d90, d99
	r.DispatchRootP50Ms, r.DispatchRootP99Ms = o50, o99
	r.DispatchReleasedP50Ms, r.DispatchReleasedP99Ms = e50, e99
	r.RunP50Ms, r.RunP90Ms, r.RunP99Ms = r50, r90, r99
	r.TriggerP50Ms, r.TriggerP99Ms = t50, t99
}

func (r *Result) setRate(offered float64, p phaseResult) {
	r.RateOfferedRunsPerS = ptr(offered)
	r.RateRuns = &p.runs
	r.RateAchievedRunsPerS = ptr(p.runsPerSecond())
	r.RateLateTriggers = &p.triggerLate
	r.RateErrors = &p.failed
	r.RateMachineCPUBusy = p.machineBusy
	r.RateRunsPerCreateTx, r.RateStepsPerCompleteTx = ptr(p.createBatch), ptr(p.commitBatch)
	if p.procCPU > 0 {
		r.RateCPUSecondsPer1000Steps = ptr(p.cpuPer1000Steps())
	}
}

func (r *Result) setProcess() {
	r.PeakRSSMiB = float64(peakRSS()) / (1 << 20)
}

// percentileMs is the nearest-rank percentile p of ds in milliseconds, or
// nil for no data.
func percentileMs(ds []time.Duration, p float64) *float64 {
	if len(ds) == 0 {
		return nil
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	k = min(max(k, 0), len(s)-1)
	return ptr(round3(float64(s[k]) / float64(time.Millisecond)))
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// Print writes the report of `dagflow bench` to w: the table (unless
// jsonOnly), then r as one JSON line.
func (r *Result) Print(w io.Writer, jsonOnly bool) error {
	if !jsonOnly {
		r.printTable(w)
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(line))
	return err
}

// printTable writes the human-readable report.
func (r *Result) printTable(w io.Writer) {
	f := func(v *float64, format string) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf(format, *v)
	}
	pair := func(a, b *float64) string { return f(a, "%.2f") + ", " + f(b, "%.2f") }
	ms := func(a, b, c *float64) string {
		if a == nil {
			return "-"
		}
		s := f(a, "%.2f") + " / " + f(b, "%.2f")
		if c != nil {
			s += " / " + f(c, "%.2f")
		}
		return s
	}
	commit := r.Commit
	switch {
	case commit == "":
		commit = "(commit unknown)"
	case r.CommitSource != "build":
		commit += " (the working directory's; the binary holds no revision)"
	}
	fmt.Fprintln(w, "dagflow bench: order workflow (reserve -> notify || points -> ship), no-op handlers")
	fmt.Fprintf(w, "  backend: %s\n", r.Servers)
	fmt.Fprintf(w, "  build:   %s, %s, %d CPUs\n", commit, r.Go, r.CPUs)
	fmt.Fprintf(w, "  setup:   %d workers, %d trigger goroutines, %d warm-up runs, %d runs of history", r.Workers, r.Triggers, r.Warmup, r.History)
	if r.HistorySeedSeconds != nil {
		fmt.Fprintf(w, " (written in %.1f s", *r.HistorySeedSeconds)
		if r.HistorySettleSeconds != nil {
			fmt.Fprintf(w, ", back to disk %.1f s later", *r.HistorySettleSeconds)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value, note string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, value, note) }
	fmt.Fprintln(tw, "  \t\t")
	row("FULL LOAD", fmt.Sprintf("%d runs in %.2f s", r.Runs, r.Seconds), "closed loop: triggers as fast as they return")
	row("throughput", fmt.Sprintf("%.1f runs/s, %.1f steps/s", r.RunsPerS, r.StepsPerS), "first trigger -> last step committed")
	row("dispatch p50/p90/p99", ms(r.DispatchP50Ms, r.DispatchP90Ms, r.DispatchP99Ms)+" ms", fmt.Sprintf("step ready -> handler start; %d runs sampled", r.SampledRuns))
	row("  root / released p50, p99", pair(r.DispatchRootP50Ms, r.DispatchRootP99Ms)+" / "+pair(r.DispatchReleasedP50Ms, r.DispatchReleasedP99Ms)+" ms",
		"root (ready: queued by its run's create transaction) / released (ready: last upstream handler returned)")
	row("run p50/p90/p99", ms(r.RunP50Ms, r.RunP90Ms, r.RunP99Ms)+" ms", "Trigger called -> run finished_at (store time)")
	row("Trigger p50, p99", pair(r.TriggerP50Ms, r.TriggerP99Ms)+" ms", "Trigger called -> returned")
	row("errors", fmt.Sprint(r.Errors), "engine errors + failed + dead steps")
	row("group commit", fmt.Sprintf("%.1f / %.1f / %.1f", r.ClaimBatch, r.CommitBatch, r.CreateBatch), "steps per claim / per completion transaction, runs per creation transaction")
	row("claimed", fmt.Sprintf("%.0f%% / %.0f%% / %.0f%%", 100*r.ClaimedViaQueue, 100*r.ClaimedAtRelease, 100*r.ClaimedAtCreate),
		"via the queue / at release / at create")
	row("machine CPU busy", pct(r.MachineCPUBusy), busyNote)
	if r.RateOfferedRunsPerS != nil {
		fmt.Fprintln(tw, "  \t\t")
		row("FIXED RATE", fmt.Sprintf("%.1f runs/s offered, %d runs", *r.RateOfferedRunsPerS, *r.RateRuns), "open loop: one trigger per tick, not waiting for earlier ones")
		row("achieved", f(r.RateAchievedRunsPerS, "%.1f runs/s"), fmt.Sprintf("%d triggers started >10ms late", *r.RateLateTriggers))
		row("dispatch p50/p90/p99", ms(r.RateDispatchP50Ms, r.RateDispatchP90Ms, r.RateDispatchP99Ms)+" ms", fmt.Sprintf("%d runs sampled", *r.RateSampledRuns))
		row("  root / released p50, p99", pair(r.RateDispatchRootP50Ms, r.RateDispatchRootP99Ms)+" / "+pair(r.RateDispatchReleasedP50Ms, r.RateDispatchReleasedP99Ms)+" ms", "")
		row("run p50/p90/p99", ms(r.RateRunP50Ms, r.RateRunP90Ms, r.RateRunP99Ms)+" ms", "")
		row("Trigger p50, p99", pair(r.RateTriggerP50Ms, r.RateTriggerP99Ms)+" ms", "")
		row("errors", fmt.Sprint(*r.RateErrors), "")
		row("group commit", f(r.RateStepsPerCompleteTx, "%.1f")+" / "+f(r.RateRunsPerCreateTx, "%.1f"), "steps per completion transaction / runs per creation transaction")
		row("machine CPU busy", pct(r.RateMachineCPUBusy), busyNote)
		row("CPU", f(r.RateCPUSecondsPer1000Steps, "%.3f s per 1,000 steps"), cpuNote(r.Backend))
	}
	fmt.Fprintln(tw, "  \t\t")
	row("PER STEP (full load)", "", "")
	if r.MySQLRoundTripsPerStep != nil {
		row("MySQL round trips", f(r.MySQLRoundTripsPerStep, "%.2f"), "(Questions + Com_stmt_prepare) / steps; GLOBAL counters: other clients add noise")
		row("MySQL statements", f(r.MySQLStatementsPerStep, "%.2f"), "Com_select + insert + update + delete")
		row("MySQL transactions", f(r.MySQLTransactionsPerStep, "%.2f"), "Com_commit + Com_rollback")
	} else if r.Backend == "embedded" {
		row("MySQL", "-", "not measured: SQLite store")
	} else {
		row("MySQL", "n/a", "TiDB fills none of the SHOW GLOBAL STATUS counters read here")
	}
	if r.MySQLIdleQuestionsPerS != nil {
		row("MySQL idle noise", fmt.Sprintf("%.0f questions/s", *r.MySQLIdleQuestionsPerS), fmt.Sprintf("= %.2f per step at this rate, measured with the engine idle", *r.MySQLIdleQuestionsPerS/r.StepsPerS))
	}
	row("Redis round trips", fmt.Sprintf("%.2f", r.RedisRoundTripsPerStep), "engine client: a command or a pipeline is one (exact)")
	row("Redis commands", fmt.Sprintf("%.2f", r.RedisCommandsPerStep), "engine client: pipelined commands counted one by one")
	if r.RedisServerCallsPerStep != nil {
		row("Redis server calls", f(r.RedisServerCallsPerStep, "%.2f"), "INFO commandstats, global, includes calls inside scripts: "+topCommands(r.RedisCallsPerStepByCmd, 4))
	}
	row("CPU", fmt.Sprintf("%.3f s per 1,000 steps", r.CPUSecondsPer1000Steps), cpuNote(r.Backend))
	row("peak RSS", fmt.Sprintf("%.1f MiB", r.PeakRSSMiB), "whole process, up to the end of the measurements")
	if r.BacklogSteps != nil {
		fmt.Fprintln(tw, "  \t\t")
		row("BACKLOG", fmt.Sprintf("%d queued steps", *r.BacklogSteps), "workers off")
		row("Redis memory", fmt.Sprintf("%.1f B per queued step", *r.RedisBytesPerQueuedStep), fmt.Sprintf("sum of MEMORY USAGE over the prefix: %d bytes", *r.BacklogRedisBytes))
	}
	tw.Flush()
}

// busyNote explains the machine CPU busy rows.
const busyNote = "all CPUs of this machine, servers on it included (/proc/stat)"

// pct formats a share as a percentage, "-" when not measured.
func pct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100**v)
}

func cpuNote(backend string) string {
	if backend == "embedded" {
		return "this process: engine, bench, and the in-process Redis and SQLite"
	}
	return "this process (engine + bench), not the servers"
}

// topCommands names the n most called commands with calls per step.
func topCommands(m map[string]float64, n int) string {
	if len(m) == 0 {
		return "-"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return m[names[i]] > m[names[j]] || m[names[i]] == m[names[j]] && names[i] < names[j]
	})
	if len(names) > n {
		names = names[:n]
	}
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.2f", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// traceSampler names the sampler of the bench's TracerProvider, which,
// as a production node's, the SDK reads from the environment; "" without
// tracing.
func traceSampler(tracing bool, getenv func(string) string) string {
	if !tracing {
		return ""
	}
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	if name == "" {
		return "parentbased_always_on"
	}
	if arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); arg != "" {
		return name + ":" + arg
	}
	return name
}

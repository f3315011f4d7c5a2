package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// The overview's numbers, sampled at most every sampleEvery by one
// sampler per Dashboard (however many pages show them): runs started,
// finished and failed per minute over the last chartMinutes minutes (from
// the runs created in that window: a few index ranges), steps per second
// (from the live nodes' counters), queue depths, dead letters (up to
// deadCap) and live nodes.

const (
	sampleEvery = 5 * time.Second
	// sampleTimeout bounds one sample's store reads.
	sampleTimeout = 10 * time.Second
	chartMinutes  = 15
	maxSamples    = 60
	sampleSlots   = 30
	runsCap       = 5000
	deadCap       = 1000
)

type sample struct {
	At          time.Time
	StepsPerSec float64
	Ready       int64
}

type overviewData struct {
	At                        time.Time
	Started, Finished, Failed []int // per minute, oldest first
	RunsCapped                bool
	StepsPerSec               float64
	Samples                   []sample
	Queues                    []client.Queue
	QueuesAvailable           bool
	Ready                     int64
	Dead                      int
	DeadCapped                bool
	Nodes                     int
	NodesTotal                int
	Err                       string
}

type sampler struct {
	d        *Dashboard
	mu       sync.Mutex
	last     overviewData
	have     bool
	samples  []sample
	steps    int64
	stepsAt  time.Time
	sampling sync.Mutex
}

func newSampler(d *Dashboard) *sampler { return &sampler{d: d} }

// get returns the numbers, sampling again when the last sample is older
// than sampleEvery.
func (s *sampler) get(ctx context.Context) overviewData {
	s.sampling.Lock()
	defer s.sampling.Unlock()
	now := s.d.cfg.Now()
	s.mu.Lock()
	fresh := s.have && now.Sub(s.last.At) < sampleEvery
	last := s.last
	s.mu.Unlock()
	if fresh {
		return last
	}
	// The sample is shared by every page for sampleEvery: it is taken on
	// a context the requester's leaving does not cancel halfway (which
	// would serve a partial sample to everyone), bounded on its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sampleTimeout)
	od := s.take(sctx, now)
	cancel()
	s.mu.Lock()
	s.last, s.have = od, true
	s.mu.Unlock()
	return od
}

// take samples the numbers at now: the runs' counts per minute, the
// nodes, the dead letters and the queues; a read that fails is named in
// Err and the sample goes on without it.
func (s *sampler) take(ctx context.Context, now time.Time) overviewData {
	e := s.d.e
	od := overviewData{At: now, Started: make([]int, chartMinutes), Finished: make([]int, chartMinutes), Failed: make([]int, chartMinutes)}
	var errs []string
	if err := countRuns(ctx, e, &od, now); err != nil {
		errs = append(errs, err.Error())
	}
	nodes, err := e.AllNodes(ctx)
	if err != nil {
		errs = append(errs, err.Error())
	}
	done, avg := countNodes(&od, nodes)
	dead, err := e.DeadLetters(ctx, persistence.StepListDeadParams{Limit: deadCap})
	if err != nil {
		errs = append(errs, err.Error())
	}
	od.Dead, od.DeadCapped = len(dead.Steps), dead.NextCursor != ""
	if s.d.cfg.Queues != nil {
		od.QueuesAvailable = true
		qs, err := s.d.cfg.Queues(ctx)
		if err != nil {
			errs = append(errs, err.Error())
		}
		od.Queues = qs
		for _, q := range qs {
			od.Ready += q.Ready
		}
	}
	s.addSample(&od, done, avg, now)
	if len(errs) > 0 {
		od.Err = fmt.Sprint(errs)
	}
	return od
}

// countRuns counts into od the runs started, finished and failed in each
// of the chartMinutes minutes up to now, from the runs created in that
// window, a page at a time up to runsCap (RunsCapped past it). It stops
// at the first read that fails.
func countRuns(ctx context.Context, e Engine, od *overviewData, now time.Time) error {
	from := now.Truncate(time.Minute).Add(-(chartMinutes - 1) * time.Minute)
	bucket := func(t time.Time) int {
		if t.Before(from) || t.After(now) {
			return -1
		}
		return int(t.Sub(from) / time.Minute)
	}
	cursor, seen := "", 0
	for {
		page, err := e.Runs(ctx, engine.RunFilter{CreatedAfter: from, Cursor: cursor, Limit: 1000})
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			if b := bucket(r.CreatedAt); b >= 0 {
				od.Started[b]++
			}
			if r.FinishedAt != nil {
				if b := bucket(*r.FinishedAt); b >= 0 {
					od.Finished[b]++
					if r.Status == persistence.RunFailed || r.Status == persistence.RunCompensated {
						od.Failed[b]++
					}
				}
			}
		}
		seen += len(page.Runs)
		if page.NextCursor == "" {
			return nil
		}
		if seen >= runsCap {
			od.RunsCapped = true
			return nil
		}
		cursor = page.NextCursor
	}
}

// countNodes counts the nodes into od and returns the steps the live
// ones have done and their steps per second, each since it started.
func countNodes(od *overviewData, nodes []engine.NodeInfo) (done int64, avg float64) {
	for _, n := range nodes {
		od.NodesTotal++
		if n.Alive {
			od.Nodes++
			done += n.StepsDone
			if up := n.HeartbeatAt.Sub(n.StartedAt).Seconds(); up > 1 {
				avg += float64(n.StepsDone) / up
			}
		}
	}
	return done, avg
}

// addSample sets od's steps per second, from the steps done since the
// last sample (avg, the nodes' own average, until there are two), and
// adds od to the samples the charts draw, the last maxSamples of them.
func (s *sampler) addSample(od *overviewData, done int64, avg float64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	od.StepsPerSec = avg // until there are two samples
	if !s.stepsAt.IsZero() && done >= s.steps {
		if dt := now.Sub(s.stepsAt).Seconds(); dt > 0 {
			od.StepsPerSec = float64(done-s.steps) / dt
		}
	}
	s.steps, s.stepsAt = done, now
	s.samples = append(s.samples, sample{At: now, StepsPerSec: od.StepsPerSec, Ready: od.Ready})
	if len(s.samples) > maxSamples {
		s.samples = s.samples[len(s.samples)-maxSamples:]
	}
	od.Samples = append([]sample(nil), s.samples...)
}

// chart is a small bar chart drawn as SVG.
type chart struct {
	Title  string
	Total  string
	Bars   []bar
	Width  float64
	Height float64
	Class  string
}

type bar struct {
	X, Y, W, H float64
	Label      string
}

func barChart(title, class string, values []float64, labels []string, total string) chart {
	const w, h = 240.0, 56.0
	c := chart{Title: title, Total: total, Width: w, Height: h, Class: class}
	mx := 0.0
	for _, v := range values {
		mx = max(mx, v)
	}
	if len(values) == 0 {
		return c
	}
	bw := w / float64(len(values))
	for i, v := range values {
		bh := 0.0
		if mx > 0 {
			bh = (h - 2) * v / mx
		}
		if v > 0 {
			bh = max(bh, 2)
		}
		c.Bars = append(c.Bars, bar{X: float64(i)*bw + 1, Y: h - bh, W: max(bw-2, 1), H: bh, Label: labels[i]})
	}
	return c
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request, s *session) error {
	od := d.stats.get(r.Context())
	labels := make([]string, chartMinutes)
	from := od.At.Truncate(time.Minute).Add(-(chartMinutes - 1) * time.Minute)
	for i := range labels {
		labels[i] = from.Add(time.Duration(i) * time.Minute).UTC().Format("15:04")
	}
	f := func(xs []int) ([]float64, int) {
		out, sum := make([]float64, len(xs)), 0
		for i, x := range xs {
			out[i], sum = float64(x), sum+x
		}
		return out, sum
	}
	started, ns := f(od.Started)
	finished, nf := f(od.Finished)
	failed, nx := f(od.Failed)
	for i := range labels {
		labels[i] = fmt.Sprintf("%s: %d started, %d finished, %d failed", labels[i], od.Started[i], od.Finished[i], od.Failed[i])
	}
	// The samples' charts keep a fixed width of slots, newest right, so
	// that a page opened a moment ago does not draw one wide bar.
	slots := max(len(od.Samples), sampleSlots)
	sps := make([]float64, slots)
	ready := make([]float64, slots)
	sl := make([]string, slots)
	off := slots - len(od.Samples)
	for i := range off {
		sl[i] = "not sampled"
	}
	for i, x := range od.Samples {
		sps[off+i], ready[off+i] = x.StepsPerSec, float64(x.Ready)
		sl[off+i] = fmt.Sprintf("%s: %.1f steps/s, %d ready", x.At.UTC().Format("15:04:05"), x.StepsPerSec, x.Ready)
	}
	charts := []chart{
		barChart("Runs started / min", "c-started", started, labels, fmt.Sprint(ns)),
		barChart("Runs finished / min", "c-finished", finished, labels, fmt.Sprint(nf)),
		barChart("Runs failed / min", "c-failed", failed, labels, fmt.Sprint(nx)),
		barChart("Steps / s", "c-steps", sps, sl, fmt.Sprintf("%.1f", od.StepsPerSec)),
		barChart("Ready tasks", "c-ready", ready, sl, fmt.Sprint(od.Ready)),
	}
	d.render(w, r, s, http.StatusOK, "overview", "Overview", map[string]any{"O": od, "Charts": charts, "Minutes": chartMinutes})
	return nil
}

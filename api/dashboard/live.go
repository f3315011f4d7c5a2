package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// Live updates: one detector per Dashboard asks the store what changed,
// once per PollInterval while at least one page holds a stream, and
// hands each stream the runs that changed. The number of streams does
// not change the number of store queries.

// fullRefreshEvery: without a change feed (a store that is not a
// persistence.ChangeFeed), every page is told to refresh this often.
const fullRefreshEvery = 5 * time.Second

// maxRunsPerEvent bounds the run ids an event lists; more are sent as
// "everything changed".
const maxRunsPerEvent = 200

// DetectorStats counts the change detector's work.
type DetectorStats struct {
	// Polls is how many times it asked the store what changed.
	Polls int64
	// Subscribers is how many streams are open now.
	Subscribers int
	// Broadcasts is how many changes it told the streams of.
	Broadcasts int64
}

// change is what a stream is told: the runs that changed, or all.
type change struct {
	runs map[string]bool
	all  bool
}

func (c *change) merge(o change) {
	if c.all || o.all {
		c.all, c.runs = true, nil
		return
	}
	if c.runs == nil {
		c.runs = map[string]bool{}
	}
	for id := range o.runs {
		c.runs[id] = true
	}
	if len(c.runs) > maxRunsPerEvent {
		c.all, c.runs = true, nil
	}
}

type subscriber struct {
	mu      sync.Mutex
	pending change
	has     bool
	notify  chan struct{}
}

type detector struct {
	store persistence.Store
	feed  persistence.ChangeFeed
	every time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	stop    chan struct{}
	done    chan struct{}
	polls   atomic.Int64
	casts   atomic.Int64
	latest  time.Time
	started bool
	// closed ends every stream (CloseStreams): a server's graceful
	// shutdown waits for open requests, and a stream never ends by
	// itself.
	closed    chan struct{}
	closeOnce sync.Once
}

func newDetector(store persistence.Store, every time.Duration, log *slog.Logger) *detector {
	feed, _ := store.(persistence.ChangeFeed)
	return &detector{store: store, feed: feed, every: every, log: log, subs: map[*subscriber]struct{}{}, closed: make(chan struct{})}
}

// Stats returns the detector's counters.
func (d *detector) Stats() DetectorStats {
	d.mu.Lock()
	n := len(d.subs)
	d.mu.Unlock()
	return DetectorStats{Polls: d.polls.Load(), Subscribers: n, Broadcasts: d.casts.Load()}
}

// subscribe adds a stream; the first one starts the polling loop.
func (d *detector) subscribe() *subscriber {
	s := &subscriber{notify: make(chan struct{}, 1)}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.subs[s] = struct{}{}
	if len(d.subs) == 1 {
		d.stop, d.done = make(chan struct{}), make(chan struct{})
		go d.loop(d.stop, d.done)
	}
	return s
}

// unsubscribe removes a stream; the last one stops the loop.
func (d *detector) unsubscribe(s *subscriber) {
	d.mu.Lock()
	delete(d.subs, s)
	var done chan struct{}
	if len(d.subs) == 0 && d.stop != nil {
		close(d.stop)
		done = d.done
		d.stop, d.done = nil, nil
	}
	d.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (d *detector) loop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(d.every)
	defer t.Stop()
	lastFull := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if d.feed == nil {
			if time.Since(lastFull) >= fullRefreshEvery {
				lastFull = time.Now()
				d.broadcast(change{all: true})
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, ok := d.poll(ctx)
		cancel()
		if ok {
			d.broadcast(c)
		}
	}
}

// poll asks the store what changed since the last poll.
func (d *detector) poll(ctx context.Context) (change, bool) {
	d.polls.Add(1)
	d.mu.Lock()
	after, started := d.latest, d.started
	d.mu.Unlock()
	res, err := d.feed.StepListChanged(ctx, persistence.StepListChangedParams{After: after, Limit: 1000})
	if err != nil {
		d.log.Warn("dashboard: the change detector cannot read the store", "err", err)
		return change{}, false
	}
	d.mu.Lock()
	d.latest, d.started = res.Latest, true
	d.mu.Unlock()
	if !started || after.IsZero() {
		return change{}, false
	}
	if res.More {
		return change{all: true}, true
	}
	if len(res.RunIDs) == 0 {
		return change{}, false
	}
	c := change{runs: map[string]bool{}}
	for _, id := range res.RunIDs {
		c.runs[id] = true
	}
	return c, true
}

func (d *detector) broadcast(c change) {
	d.casts.Add(1)
	d.mu.Lock()
	subs := make([]*subscriber, 0, len(d.subs))
	for s := range d.subs {
		subs = append(subs, s)
	}
	d.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		s.pending.merge(c)
		s.has = true
		s.mu.Unlock()
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

func (s *subscriber) take() (change, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, has := s.pending, s.has
	s.pending, s.has = change{}, false
	return c, has
}

// events is a page's event stream: "change" events naming the runs that
// changed (or "all"), filtered to ?run= when the page shows one run, and
// a heartbeat comment while nothing changes.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, _ *session) error {
	select {
	case <-d.live.closed:
		http.Error(w, "dashboard: the server is shutting down", http.StatusServiceUnavailable)
		return nil
	default:
	}
	rc := http.NewResponseController(w)
	run := r.URL.Query().Get("run")
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The server's WriteTimeout must not cut a stream: each write pushes
	// the deadline on.
	extend := func() { rc.SetWriteDeadline(time.Now().Add(d.cfg.Heartbeat + 30*time.Second)) }
	// Subscribed before the client sees the answer: no change it causes
	// after that is missed.
	sub := d.live.subscribe()
	defer d.live.unsubscribe(sub)
	extend()
	fmt.Fprintf(w, "retry: 3000\n: connected\n\n")
	if err := rc.Flush(); err != nil {
		return nil
	}
	hb := time.NewTicker(d.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-d.live.closed:
			return nil
		case <-hb.C:
			extend()
			if _, err := fmt.Fprintf(w, ": heartbeat %d\n\n", time.Now().Unix()); err != nil {
				return nil
			}
		case <-sub.notify:
			c, ok := sub.take()
			if !ok || (run != "" && !c.all && !c.runs[run]) {
				continue
			}
			ev := struct {
				All  bool     `json:"all"`
				Runs []string `json:"runs,omitempty"`
			}{All: c.all}
			if run != "" {
				ev.Runs = []string{run}
			} else {
				for id := range c.runs {
					ev.Runs = append(ev.Runs, id)
				}
			}
			b, _ := json.Marshal(ev)
			extend()
			if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", b); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

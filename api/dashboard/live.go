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

// changeOverlap is how far behind its newest change the detector reads
// again: update times come from the writers' clocks, so a change can be
// stamped before one already read. Changes read twice are skipped by
// run and time. A change stamped more than this behind the newest one
// is missed by the stream (run pages of unfinished runs still refresh
// every 30 s).
const changeOverlap = 5 * time.Second

// changeLimit bounds the new changes one poll reads; past it, every
// page is told to refresh. maxChangeLimit is the store's own bound
// (persistence.StepListChangedParams.Limit).
const (
	changeLimit    = 1000
	maxChangeLimit = 10000
)

// listEventGap: a stream of a page that is not one run's (lists, the
// overview) gets at most one change event this often, so that under
// load 50 open list pages re-render 10 times a second, not 50. A run's
// page hears of its run at once.
const listEventGap = 5 * time.Second

// sessionCheckEvery is how often an open stream checks its session
// again (besides ending at once when the session is dropped): a revoked
// key or an expired session ends its streams within this.
const sessionCheckEvery = 2 * time.Second

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
	feed  persistence.ChangeFeed // nil: a full refresh every fullRefreshEvery
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
	// seen are the changes read within changeOverlap of latest: the
	// next poll reads them again and skips them.
	seen map[persistence.StepChange]struct{}
	// noOverlap: the store lists no Changes, so windows cannot be
	// deduplicated and are not overlapped.
	noOverlap bool
	// closed ends every stream (CloseStreams): a server's graceful
	// shutdown waits for open requests, and a stream never ends by
	// itself.
	closed    chan struct{}
	closeOnce sync.Once
}

func newDetector(feed persistence.ChangeFeed, every time.Duration, log *slog.Logger) *detector {
	return &detector{feed: feed, every: every, log: log, subs: map[*subscriber]struct{}{}, closed: make(chan struct{})}
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
	// With no stream open nobody hears of changes: the next loop takes a
	// new watermark rather than replaying what changed meanwhile.
	defer func() {
		d.mu.Lock()
		d.latest, d.started, d.seen = time.Time{}, false, nil
		d.mu.Unlock()
	}()
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

// poll asks the store what changed since the last poll, reading
// changeOverlap back from the newest change it has read. The first poll
// only takes the watermark.
func (d *detector) poll(ctx context.Context) (change, bool) {
	d.polls.Add(1)
	d.mu.Lock()
	latest, started, overlap := d.latest, d.started, !d.noOverlap
	d.mu.Unlock()
	if !started || latest.IsZero() {
		top, err := d.feed.StepListChanged(ctx, persistence.StepListChangedParams{})
		if err != nil {
			d.log.Warn("dashboard: the change detector cannot read the store", "err", err)
			return change{}, false
		}
		d.restart(ctx, top.Latest, overlap)
		return change{}, false
	}
	after, limit := latest, changeLimit
	if overlap {
		// The window's changes already seen do not count against the
		// limit of new ones.
		d.mu.Lock()
		after, limit = latest.Add(-changeOverlap), min(changeLimit+len(d.seen), maxChangeLimit)
		d.mu.Unlock()
	}
	res, err := d.feed.StepListChanged(ctx, persistence.StepListChangedParams{After: after, Limit: limit})
	if err != nil {
		d.log.Warn("dashboard: the change detector cannot read the store", "err", err)
		return change{}, false
	}
	if res.More {
		// More changed than one question reads: tell every page to
		// refresh once and go on from the newest change, rather than
		// replaying the backlog a limit at a time (an "all" each poll).
		top, err := d.feed.StepListChanged(ctx, persistence.StepListChangedParams{})
		if err != nil || top.Latest.Before(res.Latest) {
			top.Latest = res.Latest
		}
		d.restart(ctx, top.Latest, overlap)
		return change{all: true}, true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if res.Latest.After(d.latest) {
		d.latest = res.Latest
	}
	if len(res.RunIDs) > 0 && len(res.Changes) == 0 {
		d.noOverlap = true // a store that lists no Changes
	}
	c := change{runs: map[string]bool{}}
	if len(res.Changes) == 0 {
		for _, id := range res.RunIDs {
			c.runs[id] = true
		}
	}
	for _, ch := range res.Changes {
		ch.At = ch.At.UTC()
		if _, ok := d.seen[ch]; ok {
			continue
		}
		d.seen[ch] = struct{}{}
		c.runs[ch.RunID] = true
	}
	// The next poll reads after latest-changeOverlap: older changes will
	// not come back.
	floor := d.latest.Add(-changeOverlap)
	for ch := range d.seen {
		if !ch.At.After(floor) {
			delete(d.seen, ch)
		}
	}
	if len(c.runs) == 0 {
		return change{}, false
	}
	return c, true
}

// restart sets the watermark to latest, the changes up to it told of:
// those the next poll's overlap window reads again count as seen.
func (d *detector) restart(ctx context.Context, latest time.Time, overlap bool) {
	seen := map[persistence.StepChange]struct{}{}
	if overlap && !latest.IsZero() {
		w, err := d.feed.StepListChanged(ctx, persistence.StepListChangedParams{After: latest.Add(-changeOverlap), Limit: maxChangeLimit})
		if err == nil {
			for _, ch := range w.Changes {
				if !ch.At.After(latest) {
					ch.At = ch.At.UTC()
					seen[ch] = struct{}{}
				}
			}
		}
	}
	d.mu.Lock()
	d.latest, d.started, d.seen = latest, true, seen
	d.mu.Unlock()
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
// a heartbeat comment while nothing changes. The stream ends when its
// session does: logout, expiry, or its key's revocation.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, s *session) error {
	select {
	case <-d.live.closed:
		http.Error(w, "dashboard: the server is shutting down", http.StatusServiceUnavailable)
		return nil
	default:
	}
	st := &stream{w: w, rc: http.NewResponseController(w), run: r.URL.Query().Get("run"),
		writeFor: d.cfg.Heartbeat + 30*time.Second}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Subscribed before the client sees the answer: no change it causes
	// after that is missed.
	sub := d.live.subscribe()
	defer d.live.unsubscribe(sub)
	st.extend()
	fmt.Fprintf(w, "retry: 3000\n: connected\n\n")
	if err := st.rc.Flush(); err != nil {
		return nil
	}
	hb := time.NewTicker(d.cfg.Heartbeat)
	defer hb.Stop()
	check := time.NewTicker(min(sessionCheckEvery, d.cfg.Heartbeat))
	defer check.Stop()
	ended := d.sessions.ended(s.id)
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-d.live.closed:
			return nil
		case <-ended:
			return nil
		case <-check.C:
			if !d.stillValid(r, s.id) {
				return nil
			}
			continue
		case <-hb.C:
			st.extend()
			if _, err := fmt.Fprintf(w, ": heartbeat %d\n\n", time.Now().Unix()); err != nil {
				return nil
			}
		case <-sub.notify:
			c, ok := sub.take()
			if !ok || !st.wants(c) || st.hold(c) {
				continue
			}
			if !st.send(c) {
				return nil
			}
		case <-st.gate:
			c, ok := st.release()
			if !ok {
				continue
			}
			if !st.send(c) {
				return nil
			}
		}
		if err := st.rc.Flush(); err != nil {
			return nil
		}
	}
}

// stream is one open event stream (events): where it writes, the run
// its page shows (none for a list page), and a list page's changes held
// until listEventGap is over.
type stream struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	run      string
	writeFor time.Duration // each write's deadline, from the write on

	last    time.Time        // when the last event was sent
	held    change           // a list page's changes waiting for the gap
	holding bool             // held has something
	gate    <-chan time.Time // fires when the gap is over
}

// extend pushes the write deadline on: the server's WriteTimeout must
// not cut a stream.
func (st *stream) extend() { st.rc.SetWriteDeadline(time.Now().Add(st.writeFor)) }

// wants reports whether the page hears of c: a run's page only of its
// run (or of everything).
func (st *stream) wants(c change) bool { return st.run == "" || c.all || c.runs[st.run] }

// hold keeps c, merged with the changes held already, when a list page
// had an event less than listEventGap ago, and reports whether it did:
// a list page re-renders at most every listEventGap.
func (st *stream) hold(c change) bool {
	if st.run != "" || time.Since(st.last) >= listEventGap {
		return false
	}
	st.held.merge(c)
	st.holding = true
	if st.gate == nil {
		st.gate = time.After(listEventGap - time.Since(st.last))
	}
	return true
}

// release returns the changes held when the gap is over, if any.
func (st *stream) release() (change, bool) {
	st.gate = nil
	if !st.holding {
		return change{}, false
	}
	c := st.held
	st.held, st.holding = change{}, false
	return c, true
}

// send writes a "change" event of c and reports whether the write went
// through.
func (st *stream) send(c change) bool {
	ev := struct {
		All  bool     `json:"all"`
		Runs []string `json:"runs,omitempty"`
	}{All: c.all}
	if st.run != "" {
		ev.Runs = []string{st.run}
	} else {
		for id := range c.runs {
			ev.Runs = append(ev.Runs, id)
		}
	}
	b, _ := json.Marshal(ev)
	st.extend()
	st.last = time.Now()
	_, err := fmt.Fprintf(st.w, "event: change\ndata: %s\n\n", b)
	return err == nil
}

package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// StartRequest asks a Starter for the run of one tick.
type StartRequest struct {
	Schedule string
	Workflow string
	Input    []byte // JSON, as stored with the schedule
	Tick     time.Time
	// IdempotencyKey is "schedule:<name>:<tick unix seconds>" for a tick
	// (see Key), so that starting the same tick twice, on any node, gives
	// the same run.
	IdempotencyKey string
}

// Starter starts runs; the engine is one. It is all the scheduler knows of
// the engine.
type Starter interface {
	// CanStart reports whether this node can start runs of workflow (it is
	// registered here). Schedules of other workflows are left to the
	// nodes that have them.
	CanStart(workflow string) bool
	// Start starts the run and returns its id. A repeated IdempotencyKey
	// must return the existing run and start nothing.
	Start(ctx context.Context, r StartRequest) (runID string, err error)
}

// Clock tells the scheduler the time (the engine's injected clock).
type Clock interface {
	Now() time.Time
}

// Config configures a Scheduler. Store, Starter and Clock are required.
type Config struct {
	// Store is the part of the store the scheduler reads and writes; a
	// persistence.Store is one.
	Store   persistence.Scheduling
	Starter Starter
	Clock   Clock
	// Logger default slog.Default().
	Logger *slog.Logger
	// Grace is how late a tick may be handled and still count as on time;
	// older unhandled ticks are missed and follow the catch-up policy.
	// Default 10s. Keep it above the interval between passes.
	Grace time.Duration
	// MaxFiresPerPass bounds the ticks one pass handles per schedule (a
	// long catch-up continues on the next passes). Default 100.
	MaxFiresPerPass int
	// OnMissed, when set, is told of the ticks of a schedule that a pass
	// dropped by its catch-up policy (n at least 1), once per drop: the
	// node whose pass dropped them tells it, no other. Metrics count them.
	// It is also told n = 0 for each schedule a pass handles before any
	// drop, so that a counter exists at 0 before its first increment.
	OnMissed func(schedule string, n int)
}

// Scheduler fires the stored schedules. Every engine node runs one; they
// coordinate only through the store (see the package documentation).
type Scheduler struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	specs  map[string]*Spec // by name + "\x00" + spec + "\x00" + tz
	warned map[string]bool

	passMu sync.Mutex // one pass at a time; guards set
	set    set
}

// New returns a scheduler for cfg.
func New(cfg Config) (*Scheduler, error) {
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, errors.New("cron: Config.Store is required"))
	}
	if cfg.Starter == nil {
		errs = append(errs, errors.New("cron: Config.Starter is required"))
	}
	if cfg.Clock == nil {
		errs = append(errs, errors.New("cron: Config.Clock is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.MaxFiresPerPass <= 0 {
		cfg.MaxFiresPerPass = 100
	}
	return &Scheduler{cfg: cfg, log: cfg.Logger, specs: map[string]*Spec{}, warned: map[string]bool{}}, nil
}

// Key returns the idempotency key of a schedule's tick:
// "schedule:<name>:<tick unix seconds>".
func Key(name string, tick time.Time) string {
	return fmt.Sprintf("schedule:%s:%d", name, tick.Unix())
}

func (s *Scheduler) spec(sc persistence.Schedule) (*Spec, error) {
	k := sc.Name + "\x00" + sc.Spec + "\x00" + sc.TimeZone
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp, ok := s.specs[k]; ok {
		return sp, nil
	}
	sp, err := Parse(sc.Name, sc.Spec, sc.TimeZone)
	if err != nil {
		if !s.warned[k] {
			s.warned[k] = true
			s.log.Error("schedule not fired: invalid spec", "schedule", sc.Name, "err", err)
		}
		return nil, err
	}
	s.specs[k] = sp
	return sp, nil
}

// Sync stores the declared schedules: each is created or updated (keeping
// its last tick, paused flag and history, and clearing Disabled), unless
// an operator owns it (created, edited or deleted it at run time): the
// operator's version wins, and Sync logs it. A
// stored schedule that this node does not declare is left as it is: in a
// rolling deploy the nodes of the older version do not declare the newer
// one's schedules, and one node's code is not the cluster's. It keeps
// firing on the nodes that run its workflow; an operator retires it with
// Disable (or Pause). Sync logs the schedules it leaves.
func (s *Scheduler) Sync(ctx context.Context, decls []persistence.Schedule) error {
	now := s.cfg.Clock.Now()
	declared := map[string]bool{}
	for _, d := range decls {
		if _, err := Parse(d.Name, d.Spec, d.TimeZone); err != nil {
			return err
		}
		d.CreatedAt, d.UpdatedAt = now, now
		stored, err := s.cfg.Store.ScheduleUpsert(ctx, d)
		if err != nil {
			return fmt.Errorf("cron: schedule %q: %w", d.Name, err)
		}
		if stored.Owner == persistence.OwnerOperator {
			s.log.Warn("a declared schedule is owned by an operator, who created, edited or deleted it at run time: the operator's version is kept, not this node's",
				"schedule", d.Name, "deleted", stored.Deleted, "spec", stored.Spec, "declared_spec", d.Spec)
		}
		declared[d.Name] = true
	}
	if len(decls) == 0 {
		return nil
	}
	stored, err := s.cfg.Store.ScheduleList(ctx)
	if err != nil {
		return fmt.Errorf("cron: list schedules: %w", err)
	}
	for _, sc := range stored {
		if !declared[sc.Name] && !sc.Disabled && !sc.Paused {
			s.log.Info("a stored schedule is not declared by this node: it keeps firing where its workflow runs; disable it if it was retired",
				"schedule", sc.Name, "workflow", sc.Workflow)
		}
	}
	return nil
}

// PassResult counts what one pass did.
type PassResult struct {
	Fired    int // runs started (or found started) for ticks
	Skipped  int // ticks skipped by the overlap policy
	Buffered int // ticks buffered by buffer_one
	Missed   int // missed ticks dropped by the catch-up policy
}

// Run runs a pass now and then every interval until ctx ends.
func (s *Scheduler) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Pass(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("schedule pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass brings this node's schedules up to date with the store (the
// changes since the last pass) and handles the due ticks of the
// schedules that have one. Passes on many nodes at once are safe; on one
// Scheduler they run one at a time. A schedule whose pass fails is left
// for the next pass; the errors are joined.
func (s *Scheduler) Pass(ctx context.Context) (PassResult, error) {
	s.passMu.Lock()
	defer s.passMu.Unlock()
	var res PassResult
	if err := s.refresh(ctx, s.cfg.Clock.Now()); err != nil {
		return res, err
	}
	now := s.cfg.Clock.Now()
	due := s.popDue(now)
	var errs []error
	for i, e := range due {
		if ctx.Err() != nil {
			for _, rest := range due[i:] {
				s.setDue(rest, now)
			}
			break
		}
		if err := s.evaluate(ctx, e, now, &res); err != nil {
			errs = append(errs, fmt.Errorf("cron: schedule %q: %w", e.sc.Name, err))
		}
	}
	return res, errors.Join(errs...)
}

// evaluate handles a due schedule, read again by its key unless this pass
// read it already, and sets when it is due next.
func (s *Scheduler) evaluate(ctx context.Context, e *entry, now time.Time, res *PassResult) error {
	if !e.fresh {
		sc, err := s.cfg.Store.ScheduleGet(ctx, e.sc.Name)
		if errors.Is(err, persistence.ErrScheduleNotFound) {
			// Deleted since the change read: the next read removes it.
			s.setDue(e, now.Add(time.Second))
			return nil
		}
		if err != nil {
			s.setDue(e, now)
			return err
		}
		e.sc = sc
	}
	e.fresh = false
	cursor, lost, err := s.handle(ctx, e.sc, e.spec, res)
	e.sc.LastTick = cursor
	switch {
	case err != nil, lost:
		// Look again next pass, reading the cursor another node moved.
		s.setDue(e, now)
		return err
	}
	s.schedule(e, now)
	if !e.due.After(now) && !e.every {
		// More due ticks than one pass handles (MaxFiresPerPass): the
		// next pass goes on.
		s.setDue(e, now)
	}
	return nil
}

// handle runs the once-per-tick protocol for one schedule:
//
//  1. read the cursor (LastTick) from the store;
//  2. for a tick to fire: start its run with the tick's idempotency key,
//     record it in the history, then move the cursor to it with a
//     compare-and-set;
//  3. for a tick not to fire (missed, skipped, buffered): move the cursor
//     first, then record the history row;
//  4. stop at the first compare-and-set that fails: another node is ahead
//     (lost: the cursor this node knows is stale).
//
// It returns the cursor as this node moved it.
func (s *Scheduler) handle(ctx context.Context, sc persistence.Schedule, spec *Spec, res *PassResult) (cur *time.Time, lost bool, err error) {
	now := s.cfg.Clock.Now()
	cursor := sc.LastTick
	if s.cfg.OnMissed != nil {
		s.cfg.OnMissed(sc.Name, 0)
	}
	if sc.Paused || sc.Disabled {
		// Keep the cursor at the present, so that resuming does not fire
		// the ticks of the pause.
		p := spec.Prev(now)
		if p.IsZero() || (cursor != nil && !p.After(*cursor)) {
			return cursor, false, nil
		}
		ok, err := s.advance(ctx, sc.Name, cursor, p, now)
		return &p, !ok, err
	}
	if Overlap(sc.Overlap) == OverlapBufferOne && cursor != nil {
		if fired, err := s.fireBuffered(ctx, sc, spec, *cursor); err != nil {
			return cursor, false, err
		} else if fired {
			res.Fired++
		}
	}
	anchor := sc.CreatedAt
	if cursor != nil {
		anchor = *cursor
	}
	p := planTicks(spec, anchor, now, s.cfg.Grace, CatchUp(sc.CatchUp), sc.CatchUpWindow, s.cfg.MaxFiresPerPass)
	if !p.skipTo.IsZero() {
		ok, err := s.advance(ctx, sc.Name, cursor, p.skipTo, now)
		if err != nil || !ok {
			return cursor, !ok, err
		}
		reason := fmt.Sprintf("missed %d tick(s) from %s to %s (catch-up %s)", p.skipped,
			p.skipFrom.UTC().Format(time.RFC3339), p.skipTo.UTC().Format(time.RFC3339), catchUpName(sc.CatchUp))
		if p.skippedMore {
			reason = fmt.Sprintf("missed %d or more ticks from %s to %s (catch-up %s)", p.skipped,
				p.skipFrom.UTC().Format(time.RFC3339), p.skipTo.UTC().Format(time.RFC3339), catchUpName(sc.CatchUp))
		}
		s.record(ctx, sc.Name, p.skipTo, persistence.TickSkipped, "", reason, now)
		s.log.Warn("schedule missed ticks", "schedule", sc.Name, "reason", reason)
		res.Missed += p.skipped
		if s.cfg.OnMissed != nil && p.skipped > 0 {
			s.cfg.OnMissed(sc.Name, p.skipped)
		}
		t := p.skipTo
		cursor = &t
	}
	for _, tick := range p.fire {
		outcome, reason, err := s.decide(ctx, sc, spec, tick)
		if err != nil {
			return cursor, false, err
		}
		if outcome == persistence.TickFired {
			runID, err := s.start(ctx, sc, tick)
			if err != nil {
				return cursor, false, err
			}
			s.record(ctx, sc.Name, tick, outcome, runID, reason, now)
			ok, err := s.advance(ctx, sc.Name, cursor, tick, now)
			if err != nil || !ok {
				return cursor, !ok, err
			}
			res.Fired++
		} else {
			ok, err := s.advance(ctx, sc.Name, cursor, tick, now)
			if err != nil || !ok {
				return cursor, !ok, err
			}
			s.record(ctx, sc.Name, tick, outcome, "", reason, now)
			if outcome == persistence.TickBuffered {
				res.Buffered++
			} else {
				res.Skipped++
			}
		}
		t := tick
		cursor = &t
	}
	return cursor, false, nil
}

// start starts the run of a tick. A run that already holds the tick's key
// with another input (the schedule's input changed in between) is the
// tick's run: it is returned rather than an error that would hold the
// schedule back forever.
func (s *Scheduler) start(ctx context.Context, sc persistence.Schedule, tick time.Time) (string, error) {
	runID, err := s.cfg.Starter.Start(ctx, StartRequest{Schedule: sc.Name, Workflow: sc.Workflow,
		Input: sc.Input, Tick: tick, IdempotencyKey: Key(sc.Name, tick)})
	var conflict *persistence.IdempotencyConflictError
	if errors.As(err, &conflict) {
		return conflict.RunID, nil
	}
	if err != nil {
		return "", fmt.Errorf("start run for tick %s: %w", tick.UTC().Format(time.RFC3339), err)
	}
	return runID, nil
}

func catchUpName(c string) string {
	if c == "" {
		return string(CatchUpNone)
	}
	return c
}

func (s *Scheduler) advance(ctx context.Context, name string, from *time.Time, to, now time.Time) (bool, error) {
	ok, err := s.cfg.Store.ScheduleAdvance(ctx, persistence.ScheduleAdvanceParams{Name: name, From: from, To: to, Now: now})
	if err != nil {
		return false, fmt.Errorf("advance to %s: %w", to.UTC().Format(time.RFC3339), err)
	}
	return ok, nil
}

// record appends to the history. A lost history row loses no run, so a
// failure is logged rather than returned.
func (s *Scheduler) record(ctx context.Context, name string, tick time.Time, outcome, runID, reason string, now time.Time) {
	err := s.cfg.Store.ScheduleTickRecord(ctx, persistence.ScheduleTick{Schedule: name, Tick: tick,
		Outcome: outcome, RunID: runID, Reason: reason, CreatedAt: now})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("schedule history not recorded", "schedule", name, "tick", tick, "outcome", outcome, "err", err)
	}
}

// recentRuns is how many of a schedule's newest runs the overlap policies
// look at for an unfinished one.
const recentRuns = 10

func (s *Scheduler) recent(ctx context.Context, name string) (latest *persistence.Run, open *persistence.Run, err error) {
	page, err := s.cfg.Store.RunList(ctx, persistence.RunListParams{Schedule: name, Limit: recentRuns})
	if err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	if len(page.Runs) == 0 {
		return nil, nil, nil
	}
	latest = &page.Runs[0]
	for i := range page.Runs {
		if !page.Runs[i].Status.Terminal() {
			return latest, &page.Runs[i], nil
		}
	}
	return latest, nil, nil
}

// decide applies the overlap policy to a tick.
func (s *Scheduler) decide(ctx context.Context, sc persistence.Schedule, spec *Spec, tick time.Time) (outcome, reason string, err error) {
	switch Overlap(sc.Overlap) {
	case OverlapSkip, OverlapBufferOne:
	default:
		return persistence.TickFired, "", nil
	}
	_, open, err := s.recent(ctx, sc.Name)
	if err != nil || open == nil {
		return persistence.TickFired, "", err
	}
	if Overlap(sc.Overlap) == OverlapBufferOne && spec.Next(open.CreatedAt).Equal(tick) {
		return persistence.TickBuffered, fmt.Sprintf("run %s unfinished; starts when it finishes", open.ID), nil
	}
	return persistence.TickSkipped, fmt.Sprintf("run %s unfinished (overlap %s)", open.ID, sc.Overlap), nil
}

// fireBuffered starts the buffered tick of a buffer_one schedule once the
// run it waited for has finished: the first tick after that run was
// created, if it came (and was handled) before the run finished.
func (s *Scheduler) fireBuffered(ctx context.Context, sc persistence.Schedule, spec *Spec, cursor time.Time) (bool, error) {
	latest, open, err := s.recent(ctx, sc.Name)
	if err != nil || latest == nil || open != nil || latest.FinishedAt == nil {
		return false, err
	}
	tb := spec.Next(latest.CreatedAt)
	if tb.IsZero() || tb.After(*latest.FinishedAt) || tb.After(cursor) {
		return false, nil
	}
	runID, err := s.start(ctx, sc, tb)
	if err != nil {
		return false, err
	}
	s.record(ctx, sc.Name, tb, persistence.TickFired, runID,
		fmt.Sprintf("buffered while run %s ran", latest.ID), s.cfg.Clock.Now())
	return true, nil
}

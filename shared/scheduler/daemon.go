package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/store"
)

// Daemon defaults.
const (
	DefaultGranularity = time.Second
	DefaultPoll        = 200 * time.Millisecond
	DefaultMaxIdle     = 5 * time.Second
)

// DaemonConfig configures a Daemon.
type DaemonConfig struct {
	// Engine decides and executes. Required.
	Engine *Engine
	// Granularity is the tick resolution: wake-ups are rounded up to it.
	// Default 1s (cron's finest field is seconds).
	Granularity time.Duration
	// Poll is how often schedule edits are polled for when the server has
	// no change streams; default 200ms.
	Poll time.Duration
	// MaxIdle bounds the sleep between ticks, so that sweeps (failover,
	// retries) run and the wake-up time is recomputed even without edits;
	// default 5s.
	MaxIdle time.Duration
	// Logger receives structured logs; nil uses the engine's.
	Logger *slog.Logger
	// OnTick, when set, sees every tick's summary (tests, benchmarks).
	OnTick func(*Summary)
	// OnEdit, when set, sees every schedule edit the watcher picks up, with
	// the time it saw it.
	OnEdit func(scheduleID string, seen time.Time)
	// OnLead and OnLose, when set, are called when the daemon takes and
	// loses the tick lease.
	OnLead func(epoch int64)
	OnLose func(err error)
}

// Daemon holds the tick lease, ticks on its own timer at second
// granularity, and wakes early on schedule edits. Several daemons may run:
// one leads, the others wait for the lease, and when the leader loses it
// (crash, pause, partition), another takes over.
type Daemon struct {
	cfg     DaemonConfig
	e       *Engine
	log     *slog.Logger
	leading atomic.Bool
	mode    atomic.Value // "change-stream" or "poll"
}

// NewDaemon checks cfg and returns a Daemon.
func NewDaemon(cfg DaemonConfig) (*Daemon, error) {
	if cfg.Engine == nil {
		return nil, errors.New("scheduler: daemon: DaemonConfig.Engine is required")
	}
	if cfg.Granularity <= 0 {
		cfg.Granularity = DefaultGranularity
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = DefaultMaxIdle
	}
	d := &Daemon{cfg: cfg, e: cfg.Engine, log: cfg.Logger}
	if d.log == nil {
		d.log = cfg.Engine.log
	}
	d.mode.Store("")
	return d, nil
}

// Leading reports whether the daemon holds the tick lease now.
func (d *Daemon) Leading() bool { return d.leading.Load() }

// WatchMode is "change-stream" or "poll" once the daemon has led, else "".
func (d *Daemon) WatchMode() string { return d.mode.Load().(string) }

// Run waits for the tick lease, leads until it is lost, and waits again,
// until ctx is done. Runs in flight finish (or are cancelled with ctx)
// before it returns.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.e.Wait()
	for ctx.Err() == nil {
		l, err := d.e.cfg.Leases.AcquireWait(ctx, TickLease, d.e.cfg.TickLeaseTTL)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("scheduler: daemon: %w", err)
		}
		d.leading.Store(true)
		d.log.Info("daemon leads", "holder", l.Holder(), "epoch", l.Epoch())
		if d.cfg.OnLead != nil {
			d.cfg.OnLead(l.Epoch())
		}
		lerr := d.lead(ctx, l)
		d.leading.Store(false)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.e.cfg.TickLeaseTTL)
		_ = l.Release(rctx)
		cancel()
		if ctx.Err() != nil {
			d.log.Info("daemon stopped leading: shutting down", "epoch", l.Epoch())
		} else {
			d.log.Warn("daemon stopped leading", "epoch", l.Epoch(), "err", lerr)
		}
		if d.cfg.OnLose != nil {
			d.cfg.OnLose(lerr)
		}
	}
	return nil
}

// lead ticks while l is held. It returns when the lease is lost (its
// context ends), when a fenced write is refused, or when ctx ends.
func (d *Daemon) lead(ctx context.Context, l *lease.Lease) error {
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.Context(), func() { cancel(fmt.Errorf("tick lease lost: %w", context.Cause(l.Context()))) }) //nolint:contextcheck // the AfterFunc callback only cancels; it makes no call that takes a context
	defer stop()

	// Detect change streams and fix the poll cursor's start before the
	// first tick, so an edit that lands during that tick is not missed and
	// the watch mode is known once the daemon leads.
	edits := make(chan time.Time, 1)
	since := d.e.now().UTC()
	cs := d.openChangeStream(lctx)
	go d.watch(lctx, cs, since, edits)

	timer := time.NewTimer(0)
	defer timer.Stop()
	wakeAt := d.e.now() // on the engine's clock
	setWake := func(t time.Time) {
		wakeAt = t
		resetTimer(timer, t.Sub(d.e.now()))
	}
	var lastSweep time.Time
	for {
		select {
		case <-lctx.Done():
			return context.Cause(lctx)
		case <-timer.C:
		case t := <-edits:
			// An edit can only make the next tick earlier than planned
			// (one that moves a schedule later costs at most an idle tick).
			if t.IsZero() {
				setWake(d.wake(lctx))
			} else if t.Before(wakeAt) {
				setWake(d.roundUp(t))
			}
			continue
		}
		sweep := time.Since(lastSweep) >= d.cfg.MaxIdle
		sum, err := d.e.TickHeld(lctx, ctx, l, sweep)
		if err != nil {
			return err
		}
		if sweep {
			lastSweep = time.Now()
		}
		if d.cfg.OnTick != nil {
			d.cfg.OnTick(sum)
		}
		wake := d.wake(lctx)
		if !wake.After(sum.Now) {
			// Due at this tick and still due: its decision failed (logged
			// and counted). Retry at the next step, not at once in a loop.
			wake = d.roundUp(sum.Now.Add(d.cfg.Granularity))
		}
		setWake(wake)
	}
}

// wake is the time (on the engine's clock) at which to tick next: the
// next due nextRunAt, rounded up to the granularity, but no later than
// MaxIdle from now.
func (d *Daemon) wake(ctx context.Context) time.Time {
	now := d.e.now()
	limit := now.Add(d.cfg.MaxIdle)
	next, ok, err := d.e.NextDue(ctx)
	if err != nil {
		d.log.Warn("daemon: next due", "err", err)
		next, ok = now.Add(d.cfg.Granularity), true
	}
	if !ok || next.After(limit) {
		next = limit
	}
	return d.roundUp(next)
}

func (d *Daemon) roundUp(t time.Time) time.Time {
	if g := d.cfg.Granularity; t.Truncate(g) != t {
		return t.Truncate(g).Add(g)
	}
	return t
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(max(d, 0))
}

// openChangeStream opens a stream of schedule edits where the store can
// watch (store.ScheduleWatcher) and the server has change streams, and
// returns nil, for the watcher to poll on (updatedAt, _id) with a keyset
// cursor, where it cannot. The detection happens once, at start.
func (d *Daemon) openChangeStream(ctx context.Context) store.ScheduleStream {
	w, ok := d.e.schedules.(store.ScheduleWatcher)
	if !ok {
		d.mode.Store("poll")
		d.log.Info("daemon: this store cannot watch; polling schedule edits", "poll", d.cfg.Poll.String())
		return nil
	}
	cs, err := w.WatchSchedules(ctx)
	if err != nil {
		d.mode.Store("poll")
		switch {
		case errors.Is(err, store.ErrCannotWatch):
			d.log.Info("daemon: no change streams on this server; polling schedule edits", "poll", d.cfg.Poll.String(), "why", err.Error())
		case ctx.Err() == nil:
			d.log.Warn("daemon: opening a change stream failed; polling schedule edits", "poll", d.cfg.Poll.String(), "err", err)
		}
		return nil
	}
	d.mode.Store("change-stream")
	d.log.Info("daemon watches schedule edits with a change stream")
	return cs
}

// watch follows cs when there is one, and polls from since otherwise (or
// after the stream ends).
func (d *Daemon) watch(ctx context.Context, cs store.ScheduleStream, since time.Time, edits chan<- time.Time) {
	notify := func(t time.Time) {
		select {
		case edits <- t:
		default:
			// An edit is already pending; the daemon recomputes from the
			// database anyway, so one notification covers both.
		}
	}
	if cs != nil {
		defer func() { _ = cs.Close(context.WithoutCancel(ctx)) }()
		for {
			ev, ok := cs.Next(ctx)
			if !ok {
				break
			}
			if d.cfg.OnEdit != nil {
				d.cfg.OnEdit(ev.ID, time.Now())
			}
			notify(ev.NextRunAt)
		}
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("daemon: change stream ended; polling instead", "err", cs.Err())
		d.mode.Store("poll")
		since = d.e.now().UTC()
	}
	d.poll(ctx, notify, since)
}

// poll reads the schedules edited since the last poll, in (updatedAt, _id)
// order, resuming after the last one seen, so each poll reads only what
// changed. Edits that land with an updatedAt behind the cursor (a writer
// whose clock lags) are still picked up within MaxIdle, when the daemon
// recomputes its wake-up from the database.
func (d *Daemon) poll(ctx context.Context, notify func(time.Time), since time.Time) {
	lastT := since
	lastID := ""
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			page, err := d.e.schedules.EditedAfter(ctx, lastT, lastID, d.e.cfg.PageSize)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Warn("daemon: poll schedule edits", "err", err)
				}
				break
			}
			seen := time.Now()
			earliest := time.Time{}
			for _, s := range page {
				lastT, lastID = s.UpdatedAt, s.ID
				if d.cfg.OnEdit != nil {
					d.cfg.OnEdit(s.ID, seen)
				}
				if s.Enabled && (earliest.IsZero() || s.NextRunAt.Before(earliest)) {
					earliest = s.NextRunAt
				}
			}
			if len(page) > 0 {
				notify(earliest)
			}
			if len(page) < d.e.cfg.PageSize {
				break
			}
		}
	}
}

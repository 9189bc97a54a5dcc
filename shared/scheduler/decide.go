package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// runDoc is a run as the scheduler writes it: the model's Run plus sweepAt
// and tickFence (store.RunRecord).
type runDoc = store.RunRecord

// scheduleWork is the runs of one schedule to execute, oldest first. They
// run one after another under the schedule's job lease (or concurrently,
// for allow).
type scheduleWork struct {
	s    schedule.Schedule
	runs []*runDoc
	// salt keeps the task names of a sweep's recovery apart from the
	// deciding tick's (TaskName).
	salt string
}

// DefaultDecideConcurrency bounds the schedules of one page decided at
// once (Config.DecideConcurrency). Each decision is about two writes in a
// row (insert the run, advance nextRunAt), 20 to 100 ms at Firestore's 10
// to 50 ms a write; 32 at once decide about 320 to 1,600 schedules a
// second per decider, so one partition covers a minute's worth of 20,000
// or more within the minute even at the slow end.
const DefaultDecideConcurrency = 32

// reservation is how long an executor (a delivered task, a sweep's
// recovery, a retry's owner) keeps the sweep off a run it holds, so that
// the sweep only picks up runs whose executor died.
func (e *Engine) reservation() time.Duration { return max(e.cfg.TickLeaseTTL, time.Minute) }

// decidedReservation is how long the deciding tick keeps the sweep off the
// runs it just inserted: until it has handed them off, which it does right
// after its decision commits. It is shorter than reservation because a tick
// killed between the insert and the enqueue leaves runs that nothing else
// knows have no task, and they wait for this (issue 27: at a minute, they
// were first called about a minute late; at the tick lease's TTL, 30 s by
// default, plus one tick, they are within 45 s). A hand-off slower than
// this gets a second, salted task from the sweep, whose delivery finds the
// run claimed and does nothing: a cost, not a double run.
func (e *Engine) decidedReservation() time.Duration {
	return max(e.cfg.TickLeaseTTL, 30*time.Second)
}

// pendingRun is the first attempt of a run of scheduleID at fireTime, decided
// at now: its _id is deterministic (schedule.RunID), so inserting it twice is
// a no-op, and it is reserved for its executor until the sweep may take it.
// Retries build their own document: their id extends the failed run's and
// their sweepAt is the backoff.
func (e *Engine) pendingRun(scheduleID string, fireTime time.Time, source schedule.Source, now time.Time) *runDoc {
	return &runDoc{Run: schedule.Run{
		ID:          schedule.RunID(scheduleID, fireTime, source, 1),
		ScheduleID:  scheduleID,
		FireTime:    fireTime,
		Source:      source,
		Status:      schedule.RunPending,
		Attempt:     1,
		CreatedAt:   now,
		HeartbeatAt: now,
	}, SweepAt: now.Add(e.decidedReservation())}
}

// decide is flow 1, steps 2–4, under the tick lease l; ctx ends when l does.
// It returns the work of every schedule whose decision is committed (its
// advance landed, or an edit won it) even when it stops early: only the
// claim executes a run, so that work is safe to start, and left alone it
// would wait for the sweep until its reservation ends.
func (e *Engine) decide(ctx context.Context, l *lease.Lease, now time.Time, c *counters) ([]*scheduleWork, error) {
	due := func(ctx context.Context, token string) ([]schedule.Schedule, string, error) {
		return e.schedules.Due(ctx, now, e.cfg.PageSize, token)
	}
	return e.decidePages(ctx, l, now, c, due, nil)
}

// duePage reads one page of the due schedules a decider covers.
type duePage func(ctx context.Context, token string) ([]schedule.Schedule, string, error)

// decidePages is decide over the pages due reads. With emit set, each
// page's committed work is passed to emit as soon as the page is decided
// (so enqueuing overlaps the next page's deciding) instead of returned.
func (e *Engine) decidePages(ctx context.Context, l *lease.Lease, now time.Time, c *counters, due duePage, emit func([]*scheduleWork)) ([]*scheduleWork, error) {
	var all []*scheduleWork
	token := ""
	cals := e.newCalendarCache() // this tick's calendars, each read once
	for {
		page, next, err := due(ctx, token)
		if err != nil {
			return all, fmt.Errorf("decide: read due schedules: %w", err)
		}
		var work []*scheduleWork
		flush := func() {
			if emit != nil {
				if len(work) > 0 {
					emit(work)
				}
				return
			}
			all = append(all, work...)
		}
		c.due.Add(int64(len(page)))
		// Schedules are independent: decide a page's schedules
		// concurrently (each one's writes stay in order), so a tick with
		// many due schedules is not one long chain of round trips under the
		// tick lease.
		var (
			mu    sync.Mutex
			abort error
			wg    sync.WaitGroup
			sem   = make(chan struct{}, e.cfg.DecideConcurrency)
		)
		for i := range page {
			sem <- struct{}{}
			mu.Lock()
			stopped := abort != nil
			mu.Unlock()
			if stopped {
				// A newer holder decides now; start nothing more.
				<-sem
				break
			}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				w, err := e.decideOne(ctx, l, &page[i], now, c, cals)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					var ab *abortError
					if errors.Is(err, store.ErrStaleFence) || ctx.Err() != nil || errors.As(err, &ab) {
						// The tick lease was lost, or a newer tick
						// has decided (or the test hook crashed the
						// tick): a newer holder decides now.
						if abort == nil {
							abort = err
						}
						return
					}
					c.errors.Add(1)
					e.log.Error("decide schedule failed", "schedule", page[i].ID, "err", err)
					return
				}
				if w != nil {
					// One work per shard: each goes on apart.
					work = append(work, splitShards([]*scheduleWork{w})...)
				}
			}()
		}
		wg.Wait()
		flush()
		if abort != nil {
			return all, abort
		}
		if next == "" {
			return all, nil
		}
		token = next
	}
}

// missed is the window of fire times a tick found missed (older than the
// grace) that its catch-up policy does not run.
type missed struct {
	count       int // capped at schedule.MaxFireTimes
	first, last time.Time
}

// missedFires counts the fire times from s.NextRunAt to now−grace that p
// does not run: all of them under catchup none, all but the latest under
// latest, those beyond maxCatchup or older than the catch-up window under
// all. The count stops at schedule.MaxFireTimes, so a per-second schedule
// after a long outage costs bounded CPU.
func missedFires(s *schedule.Schedule, spec schedule.Spec, loc *time.Location, now time.Time, grace time.Duration, p plan) missed {
	onTimeFrom := now.Add(-grace)
	if !s.NextRunAt.Before(onTimeFrom) {
		return missed{}
	}
	fired := make(map[time.Time]bool, len(p.times))
	for _, t := range p.times {
		fired[t.UTC()] = true
	}
	var m missed
	for _, t := range schedule.FireTimes(spec, loc, s.NextRunAt.Add(-time.Nanosecond), onTimeFrom.Add(-time.Nanosecond), schedule.MaxFireTimes) {
		if fired[t.UTC()] {
			continue
		}
		if m.count == 0 {
			m.first = t.UTC()
		}
		m.last = t.UTC()
		m.count++
	}
	return m
}

// recordMissed records a missed window as one skipped run, id
// "<schedule>@<last fire>-missed", with the missed event queued on it when
// the schedule's channel wants it (the notification sweep delivers it like
// any other), and counts it in baton_runs_missed_total.
func (e *Engine) recordMissed(ctx context.Context, s *schedule.Schedule, m missed, now time.Time, f store.Fence) error {
	rd := e.pendingRun(s.ID, m.last, schedule.SourceCatchup, now)
	rd.ID += "-missed"
	rd.Status = schedule.RunSkipped
	rd.FinishedAt = now.Truncate(time.Millisecond)
	rd.ExpireAt = e.expireAt(s, rd.FinishedAt) // a finished run: retention deletes it too
	rd.SweepAt = time.Time{}
	rd.TickFence = f.Epoch
	more := ""
	if m.count >= schedule.MaxFireTimes {
		more = " or more"
	}
	rd.Reason = fmt.Sprintf("missed: %d fire time(s)%s from %s to %s were never decided (nothing ticked) and catch-up %s does not run them",
		m.count, more, m.first.Format(time.RFC3339), m.last.Format(time.RFC3339), s.Catchup)
	if n := e.notice(s, schedule.EventMissed, now); n != nil {
		rd.NotifyAt, rd.NotifyEvent = n.At, n.Event
	}
	inserted, err := e.runs.Insert(ctx, rd)
	if err != nil {
		return err
	}
	if inserted {
		e.metrics.RunsMissed(ctx, s.ID, m.count)
		e.log.Warn("fire times missed", "schedule", s.ID, "count", m.count, "first", m.first, "last", m.last, "catchup", s.Catchup)
		if !rd.NotifyAt.IsZero() {
			e.deliverSoon(ctx, s, *rd)
		}
	}
	return nil
}

// fireTimes lists the fire times of spec in (from, to], keeping at most the
// last keep of them, so that a per-second expression over a long window
// costs CPU but no unbounded memory.
func fireTimes(spec schedule.Spec, loc *time.Location, from, to time.Time, keep int) []time.Time {
	var out []time.Time
	for {
		batch := schedule.FireTimes(spec, loc, from, to, schedule.MaxFireTimes)
		out = append(out, batch...)
		if len(out) > keep {
			out = append([]time.Time(nil), out[len(out)-keep:]...)
		}
		if len(batch) < schedule.MaxFireTimes {
			return out
		}
		from = batch[len(batch)-1]
	}
}

// plan is the catch-up decision for one due schedule: fire times, oldest
// first, and their sources.
type plan struct {
	times   []time.Time
	sources []schedule.Source
}

// planFires applies the catch-up policy. Fire times in [nextRunAt, now] are
// on time if they are at most grace old, and missed otherwise; a missed time
// older than catchupWindow is never fired.
//
//	latest: the on-time times; if there are none, the most recent missed one
//	all:    the most recent maxCatchup missed times, then the on-time ones
//	none:   the on-time times only
func planFires(s *schedule.Schedule, spec schedule.Spec, loc *time.Location, now time.Time, grace time.Duration) plan {
	window := s.CatchupWindow.D()
	if window <= 0 {
		window = schedule.DefaultCatchupWindow
	}
	maxCatchup := s.MaxCatchup
	if maxCatchup <= 0 {
		maxCatchup = schedule.DefaultMaxCatchup
	}
	oldest := now.Add(-window)
	from := s.NextRunAt.Add(-time.Nanosecond) // FireTimes is (from, to]; nextRunAt itself is due
	if o := oldest.Add(-time.Nanosecond); o.After(from) {
		from = o
	}
	onTimeFrom := now.Add(-grace)
	// Keep enough for maxCatchup missed times plus a minute of per-second
	// on-time ones.
	times := fireTimes(spec, loc, from, now, maxCatchup+int(grace/time.Second)+1)
	var missed, onTime []time.Time
	for _, t := range times {
		if t.Before(onTimeFrom) {
			missed = append(missed, t)
		} else {
			onTime = append(onTime, t)
		}
	}
	var p plan
	add := func(ts []time.Time, src schedule.Source) {
		for _, t := range ts {
			p.times = append(p.times, t.UTC())
			p.sources = append(p.sources, src)
		}
	}
	switch s.Catchup {
	case schedule.CatchupAll:
		if len(missed) > maxCatchup {
			missed = missed[len(missed)-maxCatchup:]
		}
		add(missed, schedule.SourceCatchup)
	case schedule.CatchupNone:
	default: // latest
		if len(onTime) == 0 && len(missed) > 0 {
			add(missed[len(missed)-1:], schedule.SourceCatchup)
		}
	}
	add(onTime, schedule.SourceScheduled)
	return p
}

// decideOne records the runs of one due schedule and advances its
// nextRunAt, under the tick lease l. It returns the runs to execute. An
// *abortError means the tick must stop: l can no longer be relied on, or a
// newer tick has advanced the schedule (its decision stands, and this
// tick's own inserts for the schedule are undone).
func (e *Engine) decideOne(ctx context.Context, l *lease.Lease, s *schedule.Schedule, now time.Time, c *counters, cals *calendarCache) (*scheduleWork, error) {
	spec, err := s.Spec()
	if err != nil {
		return nil, fmt.Errorf("schedule %s: stored cron %q: %w", s.ID, s.Cron, err)
	}
	loc, err := schedule.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: stored time zone %q: %w", s.ID, s.TimeZone, err)
	}
	p := planFires(s, spec, loc, now, e.cfg.Grace)
	// Calendars (calendar.go) take out the fire times on excluded days
	// before remainingRuns counts: a holiday is not a run.
	excluded, err := e.applyCalendars(ctx, cals, s, &p)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: %w", s.ID, err)
	}
	// remainingRuns caps what this decision may fire, oldest first; the
	// advance below stores what is left, in its guarded write.
	var left *int64
	if s.RemainingRuns != nil {
		n := max(*s.RemainingRuns, 0)
		if int64(len(p.times)) > n {
			p.times, p.sources = p.times[:n], p.sources[:n]
		}
		l := n - int64(len(p.times))
		left = &l
	}
	w := &scheduleWork{s: *s}
	// The inserts are not fenced. A tick that woke from a pause past its
	// lease still has a live context until its heartbeat notices, and would
	// add fire times that the newer tick, deciding at a later now, dropped
	// by its catch-up policy; the lease's clock says so at once.
	if err := l.Check(); err != nil {
		return nil, &abortError{fmt.Errorf("schedule %s: tick lease no longer held before recording its runs: %w", s.ID, err)}
	}
	if e.beforeInsert != nil {
		if err := e.beforeInsert(s.ID); err != nil {
			return nil, &abortError{err}
		}
	}
	f := l.Fence()
	for _, x := range excluded {
		if err := e.recordExcluded(ctx, s, x, now, f, c); err != nil {
			return nil, fmt.Errorf("schedule %s: %w", s.ID, err)
		}
	}
	var inserted []string
	for i, t := range p.times {
		// One run per fire, or one per shard of a sharded schedule: their
		// ids are deterministic either way (<run>#<i>).
		for _, rd := range fanOut(s, e.pendingRun(s.ID, t, p.sources[i], now)) {
			if err := e.decideRun(ctx, s, rd, f, c, w, &inserted); err != nil {
				return nil, err
			}
		}
	}
	return e.decideRest(ctx, s, spec, loc, p, excluded, left, now, f, c, w, inserted)
}

// decideRun records one run rd of a due schedule's decision under the tick
// lease fence f, adopting it when an earlier tick recorded it, and adds it
// to w and (when this tick must undo it on a refused advance) to inserted.
func (e *Engine) decideRun(ctx context.Context, s *schedule.Schedule, rd *runDoc, f store.Fence, c *counters, w *scheduleWork, inserted *[]string) error {
	{
		rd.TickFence = f.Epoch
		// The reservation counts from the insert, not from now: a tick
		// that paused in between would otherwise write runs the sweep may
		// take at once, before this tick has advanced (or undone them).
		rd.SweepAt = e.now().UTC().Add(e.decidedReservation())
		ok, err := e.runs.Insert(ctx, rd)
		if err != nil {
			return fmt.Errorf("schedule %s: record run %s: %w", s.ID, rd.ID, err)
		}
		if ok {
			*inserted = append(*inserted, rd.ID)
			c.decided.Add(1)
			if rd.Source == schedule.SourceCatchup {
				c.caughtUp.Add(1)
			}
		} else if err := e.adopt(ctx, rd.ID, f.Epoch); err != nil {
			return fmt.Errorf("schedule %s: adopt run %s: %w", s.ID, rd.ID, err)
		} else {
			// Found there: an earlier tick's run, now adopted, or this
			// tick's own insert whose answer was lost (the store cannot
			// tell them apart). Either now carries this epoch, so a
			// refused advance must undo it like an insert; the undo
			// matches only runs still pending at this epoch.
			*inserted = append(*inserted, rd.ID)
		}
		// A duplicate was decided by an earlier tick that may have died
		// before executing it; executing it again is safe, because only
		// the claim (pending → running) executes.
		w.runs = append(w.runs, rd)
	}
	return nil
}

// decideRest finishes decideOne once its runs are recorded: the missed
// window's record (fire times a calendar excluded are recorded, not
// missed), the advance, and the work to execute.
func (e *Engine) decideRest(ctx context.Context, s *schedule.Schedule, spec schedule.Spec, loc *time.Location, p plan, excluded []excludedFire, left *int64, now time.Time, f store.Fence, c *counters, w *scheduleWork, inserted []string) (*scheduleWork, error) {
	// Fire times that came and went with nothing deciding them, and that
	// the catch-up policy does not run: one skipped record per window, so
	// the operator is told (metric, missed event) instead of the runs
	// silently never happening. Its id is the window's last fire time, so
	// a duplicated tick records it once.
	if m := missedFires(s, spec, loc, now, e.cfg.Grace, withExcluded(p, excluded)); m.count > 0 {
		if err := e.recordMissed(ctx, s, m, now, f); err != nil {
			return nil, fmt.Errorf("schedule %s: record missed fire times: %w", s.ID, err)
		}
	}
	if e.afterInsert != nil {
		if err := e.afterInsert(s.ID); err != nil {
			return nil, &abortError{err}
		}
	}
	// A zero next (the expression never fires again) disables the
	// schedule rather than re-read it on every tick. The advance is
	// guarded on the nextRunAt (and version) read, and fenced by the tick
	// lease.
	next := schedule.Next(spec, loc, now)
	if left != nil && *left == 0 {
		next = time.Time{} // no fires left: disabled, as an expression that ended
	}
	err := e.schedules.Advance(ctx, s, next, left, f)
	switch {
	case errors.Is(err, store.ErrStaleFence):
		// A newer tick advanced the schedule: it holds the tick lease, and
		// its decision stands. Nothing of this one's is handed off.
		e.undoStale(ctx, s, f.Epoch, inserted, c)
		return nil, &abortError{fmt.Errorf("schedule %s: advance nextRunAt: %w", s.ID, err)}
	case errors.Is(err, store.ErrContended):
		// Not applied, and no edit is known to have won: as any failed
		// advance, the next tick decides this schedule again (its runs
		// above are idempotent by id). Counting them as after an edit
		// would count them twice.
		return nil, fmt.Errorf("schedule %s: advance nextRunAt: %w", s.ID, err)
	case errors.Is(err, store.ErrConflict):
		// Edited (or deleted) since we read it: the edit recomputed
		// nextRunAt and wins. The runs recorded above were decided on the
		// old expression and still execute, so they still count against
		// remainingRuns.
		e.log.Info("schedule changed during tick; its edit wins", "schedule", s.ID)
		e.countAfterEdit(ctx, s, int64(len(p.times)), f)
	case err != nil:
		return nil, fmt.Errorf("schedule %s: advance nextRunAt: %w", s.ID, err)
	default:
		e.dropChange(ctx, s)
	}
	if len(w.runs) == 0 {
		return nil, nil
	}
	sort.SliceStable(w.runs, func(i, j int) bool { return w.runs[i].FireTime.Before(w.runs[j].FireTime) })
	return w, nil
}

// countAfterEdit counts fires this tick decided against remainingRuns when
// an edit won its advance: the edit wrote the count it had read, from
// before this decision, and the decided runs execute all the same. The
// count is lowered on the edited schedule through the same guarded, fenced
// advance (its nextRunAt and version as now stored, nextRunAt unchanged),
// so it happens at most once; an edit that set remainingRuns itself (a
// count other than the one this tick read) is the operator's new budget,
// and wins.
func (e *Engine) countAfterEdit(ctx context.Context, read *schedule.Schedule, decided int64, f store.Fence) {
	if read.RemainingRuns == nil || decided == 0 {
		return
	}
	cur, err := e.schedules.Get(ctx, read.ID)
	if err != nil || cur.RemainingRuns == nil || *cur.RemainingRuns != *read.RemainingRuns {
		return // deleted, unlimited now, or given a new count by the edit
	}
	left := max(*cur.RemainingRuns-decided, 0)
	next := cur.NextRunAt
	if left == 0 || !cur.Enabled {
		next = time.Time{} // nothing left: disabled (a paused one stays disabled)
	}
	if err := e.schedules.Advance(ctx, &cur, next, &left, f); err != nil {
		e.log.Warn("count decided runs after an edit failed; remainingRuns may allow one fire more", "schedule", read.ID, "err", err)
	}
}

// adopt stamps a run that this tick found already recorded with its epoch.
// The run may be a stale tick's insert, which that tick undoes when its
// advance is refused; adopted, it is this tick's decision, and the undo
// (which needs the stale epoch) leaves it alone. That holds because the
// adoption is acknowledged before this tick's advance, and the stale tick
// undoes only after it has seen that advance. Runs that already carry
// this epoch or a newer one, runs no tick decided, and runs no longer
// pending match nothing, and need nothing.
func (e *Engine) adopt(ctx context.Context, id string, epoch int64) error {
	err := e.runs.Adopt(ctx, id, epoch)
	if err != nil && (!errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContended)) {
		// Contended (112 past the retries) is a conflict that matched
		// nothing because nothing ran: the run may still carry the stale
		// epoch, and the stale tick's undo would skip it after this tick
		// hands it off as its own. Failing the decision leaves the
		// schedule to the next tick, which adopts it again.
		return err
	}
	return nil
}

// ReasonStaleTick starts the reason of a run recorded skipped because the
// tick that decided it had lost the tick lease to a newer tick, which
// decided the schedule again.
const ReasonStaleTick = "decided by a stale tick"

// undoStale records skipped the runs that a tick inserted (or found there
// and adopted: its own insert whose answer was lost looks the same) for a
// schedule whose advance was refused as stale. The newer tick decided the schedule
// at a later now, and its catch-up policy may have dropped fire times that
// this tick saw as on time; left pending, the sweep would run them once
// their reservation ended. A run the newer tick also decided carries its
// epoch (adopt) and is left alone, as is a run already claimed. A failed
// write leaves the run pending for the sweep.
func (e *Engine) undoStale(ctx context.Context, s *schedule.Schedule, epoch int64, ids []string, c *counters) {
	if len(ids) == 0 {
		return
	}
	// Not on the lease's context, which may be ending: this is the
	// write that keeps the stale decision from running.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// Milliseconds, as the database keeps finishedAt, so expireAt is
	// exactly finishedAt + keep.
	now := e.now().UTC().Truncate(time.Millisecond)
	reason := fmt.Sprintf("%s (epoch %d); the live tick's decision stands", ReasonStaleTick, epoch)
	scheduleID := s.ID
	for _, id := range ids {
		err := e.runs.UndoStale(wctx, id, epoch, reason, now, e.expireAt(s, now))
		switch {
		case errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrContended):
			// Adopted by the newer tick, or claimed: not this tick's to undo.
		case err != nil:
			// Contended (112 past the retries) matched nothing because
			// nothing ran: still pending at this epoch, like any failure.
			c.errors.Add(1)
			e.log.Error("undo a stale tick's run failed; the sweep will execute it", "schedule", scheduleID, "run", id, "epoch", epoch, "err", err)
		default:
			e.log.Warn("run decided by a stale tick recorded skipped", "schedule", scheduleID, "run", id, "epoch", epoch)
		}
	}
}

// abortError stops a tick's decisions at once: the tick lease can no longer
// be relied on, a newer tick has advanced a schedule, or the test hook
// simulates a crash.
type abortError struct{ err error }

func (a *abortError) Error() string { return a.err.Error() }
func (a *abortError) Unwrap() error { return a.err }

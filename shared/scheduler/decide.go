package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// runDoc is a run document as the scheduler writes it: the model's Run plus
// sweepAt, the time at which the sweep should look at the run. For a pending
// run it is when the run may be picked up by a sweep (its due time for a
// retry; for a fresh run, the end of the deciding tick's reservation); for a
// running run it is when its heartbeat counts as stopped. Finished runs
// have none.
type runDoc struct {
	schedule.Run `bson:",inline"`
	SweepAt      time.Time `bson:"sweepAt,omitempty"`
}

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

// decideConcurrency bounds the schedules of one page decided at once.
const decideConcurrency = 8

// reservation is how long the deciding tick keeps the sweep off the runs it
// just decided, so that the sweep only picks up runs whose decider died.
func (e *Engine) reservation() time.Duration { return max(e.cfg.TickLeaseTTL, time.Minute) }

// pendingRun is the first attempt of a run of scheduleID at fireTime, decided
// at now: its _id is deterministic (schedule.RunID), so inserting it twice is
// a no-op, and it is reserved for its executor until the sweep may take it.
// Retries build their own document: their id extends the failed run's and
// their sweepAt is the backoff.
func (e *Engine) pendingRun(scheduleID string, fireTime time.Time, source string, now time.Time) *runDoc {
	return &runDoc{Run: schedule.Run{
		ID:          schedule.RunID(scheduleID, fireTime, source, 1),
		ScheduleID:  scheduleID,
		FireTime:    fireTime,
		Source:      source,
		Status:      schedule.RunPending,
		Attempt:     1,
		CreatedAt:   now,
		HeartbeatAt: now,
	}, SweepAt: now.Add(e.reservation())}
}

// decide is flow 1, steps 2–4, under the tick lease whose fence is f.
func (e *Engine) decide(ctx context.Context, f store.Fence, now time.Time, c *counters) ([]*scheduleWork, error) {
	q := store.PageQuery{
		Filter: bson.D{
			{Key: "enabled", Value: true},
			{Key: "nextRunAt", Value: bson.D{{Key: "$lte", Value: now}}},
		},
		SortField: "nextRunAt",
		Limit:     e.cfg.PageSize,
	}
	var work []*scheduleWork
	for {
		var page []schedule.Schedule
		p, err := e.schedules.Page(ctx, q, &page)
		if err != nil {
			return work, fmt.Errorf("decide: read due schedules: %w", err)
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
			sem   = make(chan struct{}, decideConcurrency)
		)
		for i := range page {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				w, err := e.decideOne(ctx, f, &page[i], now, c)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					var ab *abortError
					if errors.Is(err, store.ErrStaleFence) || ctx.Err() != nil || errors.As(err, &ab) {
						// The tick lease was lost (or the test hook
						// crashed the tick): a newer holder decides now.
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
					work = append(work, w)
				}
			}()
		}
		wg.Wait()
		if abort != nil {
			return work, abort
		}
		if p.NextToken == "" {
			return work, nil
		}
		q.Token = p.NextToken
	}
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
	sources []string
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
	add := func(ts []time.Time, src string) {
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
// nextRunAt. It returns the runs to execute.
func (e *Engine) decideOne(ctx context.Context, f store.Fence, s *schedule.Schedule, now time.Time, c *counters) (*scheduleWork, error) {
	spec, err := schedule.Parse(s.Cron)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: stored cron %q: %w", s.ID, s.Cron, err)
	}
	loc, err := schedule.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: stored time zone %q: %w", s.ID, s.TimeZone, err)
	}
	p := planFires(s, spec, loc, now, e.cfg.Grace)
	w := &scheduleWork{s: *s}
	for i, t := range p.times {
		rd := e.pendingRun(s.ID, t, p.sources[i], now)
		inserted, err := e.runs.InsertIdempotent(ctx, rd)
		if err != nil {
			return nil, fmt.Errorf("schedule %s: record run %s: %w", s.ID, rd.ID, err)
		}
		if inserted {
			c.decided.Add(1)
			if rd.Source == schedule.SourceCatchup {
				c.caughtUp.Add(1)
			}
		}
		// A duplicate was decided by an earlier tick that may have died
		// before executing it; executing it again is safe, because only
		// the claim (pending → running) executes.
		w.runs = append(w.runs, rd)
	}
	if e.afterInsert != nil {
		if err := e.afterInsert(s.ID); err != nil {
			return nil, &abortError{err}
		}
	}
	next := schedule.Next(spec, loc, now)
	set := bson.D{{Key: "nextRunAt", Value: next.UTC()}}
	if next.IsZero() {
		// The expression never fires again: disable rather than re-read
		// the schedule on every tick.
		set = bson.D{{Key: "enabled", Value: false}}
	}
	// The filter holds the version read too: an edit may recompute the same
	// nextRunAt (its clock was just before the fire time) while changing the
	// expression, and then only the version tells that the edit must win.
	filter := bson.D{{Key: "_id", Value: s.ID}, {Key: "nextRunAt", Value: s.NextRunAt}}
	if s.Version != 0 {
		filter = append(filter, bson.E{Key: "version", Value: s.Version})
	}
	err = e.schedules.FencedUpdate(ctx, filter, f, bson.D{{Key: "$set", Value: set}})
	switch {
	case errors.Is(err, store.ErrStaleFence):
		return nil, fmt.Errorf("schedule %s: advance nextRunAt: %w", s.ID, err)
	case errors.Is(err, store.ErrConflict):
		// Edited (or deleted) since we read it: the edit recomputed
		// nextRunAt and wins. The runs recorded above were decided on the
		// old expression and still execute.
		e.log.Info("schedule changed during tick; its edit wins", "schedule", s.ID)
	case err != nil:
		return nil, fmt.Errorf("schedule %s: advance nextRunAt: %w", s.ID, err)
	}
	if len(w.runs) == 0 {
		return nil, nil
	}
	sort.SliceStable(w.runs, func(i, j int) bool { return w.runs[i].FireTime.Before(w.runs[j].FireTime) })
	return w, nil
}

// abortError stops a tick's decisions at once (the test hook's simulated
// crash).
type abortError struct{ err error }

func (a *abortError) Error() string { return a.err.Error() }
func (a *abortError) Unwrap() error { return a.err }

package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// calendarCache is one tick's view of the calendars its due schedules
// name. Each calendar is read at most once per tick, however many
// schedules and fire times name it, in one query per schedule that names
// one not read yet: a tick's calendar reads are bounded by the distinct
// calendars its due schedules with fire times name, never by fire times,
// nor by the calendars stored. A calendar is not kept across ticks, so an
// edit takes effect at the next tick.
type calendarCache struct {
	st  store.Calendars
	log *slog.Logger

	mu   sync.Mutex
	read map[string]bool               // ids asked for this tick
	cals map[string]*schedule.Calendar // the ones found
}

func (e *Engine) newCalendarCache() *calendarCache {
	return &calendarCache{st: e.cfg.Store.Calendars(), log: e.log, read: map[string]bool{}, cals: map[string]*schedule.Calendar{}}
}

// get returns the calendars of ids that exist, reading the ones this tick
// has not read yet in one query. The lock is held across the read, so two
// schedules naming the same calendar read it once.
func (cc *calendarCache) get(ctx context.Context, scheduleID string, ids []string) (map[string]*schedule.Calendar, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	var miss []string
	for _, id := range ids {
		if !cc.read[id] {
			miss = append(miss, id)
		}
	}
	if len(miss) > 0 {
		found, err := cc.st.GetCalendars(ctx, miss)
		if err != nil {
			return nil, fmt.Errorf("read calendars %v: %w", miss, err)
		}
		for _, id := range miss {
			cc.read[id] = true
			if c := found[id]; c != nil {
				cc.cals[id] = c
			} else {
				// Deleted since the schedule named it: it has no days
				// (CalendarVerdict). Said once per tick, not per fire.
				cc.log.Warn("calendar named by a schedule not found; it counts as having no days", "calendar", id, "schedule", scheduleID)
			}
		}
	}
	out := make(map[string]*schedule.Calendar, len(ids))
	for _, id := range ids {
		if c := cc.cals[id]; c != nil {
			out[id] = c
		}
	}
	return out, nil
}

// excludedFire is a planned fire time that s's calendars skip.
type excludedFire struct {
	t      time.Time
	source schedule.Source
	reason string
}

// applyCalendars removes from p the fire times s's calendars skip, and
// returns them. A schedule that names no calendar costs nothing; one that
// has no fire time this tick reads no calendar.
func (e *Engine) applyCalendars(ctx context.Context, cc *calendarCache, s *schedule.Schedule, p *plan) ([]excludedFire, error) {
	ids := s.CalendarIDs()
	if len(ids) == 0 || len(p.times) == 0 {
		return nil, nil
	}
	cals, err := cc.get(ctx, s.ID, ids)
	if err != nil {
		return nil, err
	}
	var out []excludedFire
	var kept plan
	for i, t := range p.times {
		if skip, reason := s.CalendarVerdict(t, cals); skip {
			out = append(out, excludedFire{t: t, source: p.sources[i], reason: reason})
			continue
		}
		kept.times = append(kept.times, t)
		kept.sources = append(kept.sources, p.sources[i])
	}
	*p = kept
	return out, nil
}

// recordExcluded records a fire time that a calendar skips as a skipped
// run. Its id is the one the run would have had (schedule.RunID), so a
// duplicated tick records it once, and a tick that finds the run already
// decided (a tick that died before its advance, the calendar edited since)
// leaves that decision as it is. The record is a report, never executed.
// An error leaves the schedule unadvanced, so the next tick records it.
func (e *Engine) recordExcluded(ctx context.Context, s *schedule.Schedule, x excludedFire, now time.Time, f store.Fence, c *counters) error {
	rd := e.pendingRun(s.ID, x.t, x.source, now)
	rd.Status = schedule.RunSkipped
	rd.Reason = x.reason
	rd.FinishedAt = now.Truncate(time.Millisecond)
	rd.ExpireAt = e.expireAt(s, rd.FinishedAt) // a finished run: retention deletes it too
	rd.SweepAt = time.Time{}
	rd.TickFence = f.Epoch
	if n := e.notice(s, schedule.EventSkipped, now); n != nil {
		rd.NotifyAt, rd.NotifyEvent = n.At, n.Event
	}
	inserted, err := e.runs.Insert(ctx, rd)
	if err != nil {
		return fmt.Errorf("record run %s skipped by its calendar: %w", rd.ID, err)
	}
	if inserted {
		c.skipped.Add(1)
		e.metrics.RunFinished(ctx, s.ID, string(x.source), string(schedule.RunSkipped), time.Time{}, now)
		e.log.Info("fire time skipped by calendar", "schedule", s.ID, "run", rd.ID, "reason", x.reason)
		if !rd.NotifyAt.IsZero() {
			e.deliverSoon(ctx, s, *rd)
		}
	}
	return nil
}

// withExcluded is p with the excluded fire times added back: they were
// decided (recorded skipped), so missedFires must not count them missed.
func withExcluded(p plan, xs []excludedFire) plan {
	if len(xs) == 0 {
		return p
	}
	out := plan{times: append([]time.Time(nil), p.times...), sources: append([]schedule.Source(nil), p.sources...)}
	for _, x := range xs {
		out.times = append(out.times, x.t)
		out.sources = append(out.sources, x.source)
	}
	return out
}

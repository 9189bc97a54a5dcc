package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// backfillConcurrency bounds the reads or inserts one backfill has in
// flight.
const backfillConcurrency = 16

// Backfill records the runs of a schedule's fire times in
// [req.Start, req.End), source backfill, and hands them off exactly as a
// tick hands off its decisions: in chained tasks of at most MaxTaskRuns,
// oldest first, under the schedule's job lease and overlap policy, so a
// backfill competes with other schedules only for the queue's dispatch
// rate, never for their leases.
//
// Run ids are the deterministic ids of scheduled runs, so a fire time that
// already ran (on time, caught up, or backfilled before) gets no second
// run, and repeating a backfill creates nothing. A dry run reads each fire
// time's run and writes nothing. At most schedule.MaxBackfillFires fire
// times are covered per call; NextPageToken continues. The window is the
// caller's to validate (the catalog does: end not in the future).
func (e *Engine) Backfill(ctx context.Context, scheduleID string, req schedule.BackfillRequest, from time.Time) (*schedule.BackfillResult, error) {
	var s schedule.Schedule
	if err := e.getSchedule(ctx, scheduleID, &s); err != nil {
		return nil, fmt.Errorf("scheduler: backfill %s: %w", scheduleID, err)
	}
	spec, err := s.Spec()
	if err != nil {
		return nil, fmt.Errorf("scheduler: backfill %s: stored cron %q: %w", s.ID, s.Cron, err)
	}
	loc, err := schedule.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("scheduler: backfill %s: stored time zone %q: %w", s.ID, s.TimeZone, err)
	}
	// FireTimes is (from, to]: the window [from, End) in whole seconds.
	times := schedule.FireTimes(spec, loc, from.Add(-time.Nanosecond), req.End.Add(-time.Nanosecond), schedule.MaxBackfillFires+1)
	res := &schedule.BackfillResult{Schedule: s.ID, DryRun: req.DryRun, Fires: make([]schedule.BackfillFire, 0, len(times))}
	if len(times) > schedule.MaxBackfillFires {
		res.NextPageToken = times[schedule.MaxBackfillFires].UTC().Format(time.RFC3339)
		times = times[:schedule.MaxBackfillFires]
	}
	now := e.now().UTC().Truncate(time.Millisecond) // as the store keeps it: a read-back compares createdAt
	docs := make([]*runDoc, len(times))
	res.Fires = res.Fires[:len(times)]
	errs := make([]error, len(times))
	inserted := make([]bool, len(times))
	found := make([]*runDoc, len(times))
	sem := make(chan struct{}, backfillConcurrency)
	var wg sync.WaitGroup
	if s.Shards > 0 {
		return e.backfillShards(ctx, &s, req, times, res, now)
	}
	for i, ft := range times {
		rd := e.pendingRun(s.ID, ft.UTC(), schedule.SourceBackfill, now)
		docs[i] = rd
		res.Fires[i] = schedule.BackfillFire{FireTime: ft.UTC(), Run: rd.ID}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if !req.DryRun {
				// Idempotent: a lost answer is settled by the insert's
				// read-back, and a repeat finds the run there.
				ok, err := e.runs.Insert(ctx, rd)
				if err != nil {
					errs[i] = err
					return
				}
				inserted[i] = ok
				if ok {
					return
				}
			}
			cur, err := e.runs.Get(ctx, rd.ID)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				errs[i] = err
			default:
				res.Fires[i].Existed, res.Fires[i].Status = true, cur.Status
				if !req.DryRun && cur.Status == schedule.RunPending && cur.Source == schedule.SourceBackfill && cur.TickFence == 0 {
					found[i] = cur
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// What was inserted stays pending: the sweep recovers it, and a
		// repeat of the call creates nothing twice.
		return nil, fmt.Errorf("scheduler: backfill %s: %w", s.ID, err)
	}
	var fresh []*runDoc
	for i := range times {
		switch {
		case inserted[i]:
			res.Created++
			res.Fires[i].Status = schedule.RunPending
			fresh = append(fresh, docs[i])
		case found[i] != nil && found[i].CreatedAt.Equal(docs[i].CreatedAt):
			// Created by this call (its createdAt is this call's clock):
			// the insert landed and its answer was lost.
			res.Created++
			res.Fires[i].Existed = false
			fresh = append(fresh, found[i])
		case res.Fires[i].Existed:
			res.Existing++
			if found[i] != nil {
				// A backfill's own run still pending: this call's insert
				// whose answer was lost (the store cannot tell it from an
				// earlier call's), or an earlier call's whose hand-off
				// failed. No tick decided it, so no tick undoes it, and
				// only the claim executes: hand it off too, rather than
				// leave it to the sweep.
				fresh = append(fresh, found[i])
			}
		}
	}
	if len(fresh) > 0 {
		// Chained tasks, oldest first; a failed hand-off leaves the runs
		// pending for the sweep, which enqueues them again.
		e.startOrHandOff(context.WithoutCancel(ctx), []*scheduleWork{{s: s, runs: fresh}}, &counters{})
	}
	e.log.Info("backfill", "schedule", s.ID, "dry_run", req.DryRun, "fires", len(times), "created", res.Created, "existing", res.Existing, "more", res.NextPageToken != "")
	return res, nil
}

// backfillShards is Backfill for a sharded schedule: each fire time is one
// run per shard (deterministic ids, so a repeat inserts nothing), and a
// fire counts as created when any of its shard runs was created by this
// call, as existing otherwise; its status is the fire's aggregate
// (schedule.AggregateFire). The fire's Run is the fire id, which GET
// /runs/{id} aggregates.
func (e *Engine) backfillShards(ctx context.Context, s *schedule.Schedule, req schedule.BackfillRequest, times []time.Time, res *schedule.BackfillResult, now time.Time) (*schedule.BackfillResult, error) {
	res.Fires = res.Fires[:len(times)]
	errs := make([]error, len(times))
	fresh := make([][]*runDoc, len(times))
	created := make([]bool, len(times))
	sem := make(chan struct{}, backfillConcurrency)
	var wg sync.WaitGroup
	for i, ft := range times {
		rd := e.pendingRun(s.ID, ft.UTC(), schedule.SourceBackfill, now)
		res.Fires[i] = schedule.BackfillFire{FireTime: ft.UTC(), Run: rd.ID}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			latest := make([]*schedule.Run, s.Shards)
			existed := false
			for j, x := range fanOut(s, rd) {
				if !req.DryRun {
					ok, err := e.runs.Insert(ctx, x)
					if err != nil {
						errs[i] = err
						return
					}
					if ok {
						created[i] = true
						latest[j] = &x.Run
						fresh[i] = append(fresh[i], x)
						continue
					}
				}
				cur, err := e.runs.Get(ctx, x.ID)
				switch {
				case errors.Is(err, store.ErrNotFound):
				case err != nil:
					errs[i] = err
					return
				default:
					latest[j] = &cur.Run
					if !req.DryRun && cur.Status == schedule.RunPending && cur.Source == schedule.SourceBackfill && cur.TickFence == 0 {
						// This call's insert whose answer was lost, or an
						// earlier call's whose hand-off failed: hand it off.
						fresh[i] = append(fresh[i], cur)
						if cur.CreatedAt.Equal(now) {
							created[i] = true
							continue
						}
					}
					existed = true
				}
			}
			res.Fires[i].Existed = existed && !created[i]
			if existed || created[i] {
				res.Fires[i].Status = schedule.AggregateFire(rd.ID, s.Shards, latest).Status
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("scheduler: backfill %s: %w", s.ID, err)
	}
	var all []*runDoc
	for i := range times {
		switch {
		case created[i]:
			res.Created++
		case res.Fires[i].Existed:
			res.Existing++
		}
		all = append(all, fresh[i]...)
	}
	if len(all) > 0 {
		// One chain per shard, oldest fire first.
		e.startOrHandOff(context.WithoutCancel(ctx), splitShards([]*scheduleWork{{s: *s, runs: all}}), &counters{})
	}
	e.log.Info("backfill", "schedule", s.ID, "shards", s.Shards, "dry_run", req.DryRun, "fires", len(times), "created", res.Created, "existing", res.Existing, "more", res.NextPageToken != "")
	return res, nil
}

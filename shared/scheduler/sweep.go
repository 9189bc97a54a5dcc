package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// sweep is flow 1, step 7. It needs no lease: every change it makes is
// conditional on the value it read, so concurrent sweeps agree.
//
//   - Failover: a running run whose sweepAt (last heartbeat + lease TTL +
//     skew) has passed, and whose job lease is no longer live at the run's
//     epoch, is marked failed, and retried per its schedule.
//   - Owed retries: a failed run that still carries a sweepAt was owed a
//     retry that was never recorded (its insert failed, the schedule could
//     not be read, the executor died first); it gets it now.
//   - Stranded misfires: a buffer_one schedule whose misfire flag is set
//     while its job lease is free (the holder died mid-run, so nobody
//     checked the flag before releasing) gets its misfire run.
//   - Recovery: a pending run whose sweepAt has passed (a retry that came
//     due, or a run whose deciding tick died before executing it) is
//     reserved and returned for execution.
//   - GPU: GPU.Sweep requeues expired slot leases and dispatches.
//
// Reads grow with the runs that need attention, not with the history.
//
// The runs' steps (failover, owed retries, recovery) read one decider
// shard at a time (Runs.Stale; the sweep index leads with vshard), the
// shards of sweepShards: a partition sweeps only the runs of the shards it
// decides, the unpartitioned tick all of them. The schedules' steps
// (stranded misfires, timed pauses), retention and the GPU sweep read
// across shards and run where whole is set: the unpartitioned tick and
// partition 0.
func (e *Engine) sweep(ctx context.Context, c *counters, sum *Summary, shards []int, whole bool) []*scheduleWork {
	now := e.now().UTC()
	work := e.sweepRuns(ctx, now, c, shards)
	if !whole {
		return work
	}
	work = append(work, e.strandedMisfires(ctx, c)...)
	e.endPauses(ctx, now, sum, c)
	e.expire(ctx, now, c) // retention.go
	if e.cfg.GPU != nil {
		requeued, dead, err := e.cfg.GPU.Sweep(ctx)
		if err != nil {
			c.errors.Add(1)
			e.log.Error("gpu sweep failed", "err", err)
		}
		sum.GPURequeued += requeued
		sum.GPUDead += dead
	}
	return work
}

// sweepShards is the decider shards whose runs partition p of n sweeps:
// the shards it decides (PartitionShards), and, in partition 0, the runs
// stored before runs carried a shard (store.LegacyRuns). n == 0 is the
// unpartitioned tick: every shard.
func sweepShards(p, n int) []int {
	var out []int
	if p == 0 {
		out = append(out, store.LegacyRuns)
	}
	if n == 0 {
		n = 1
	}
	return append(out, PartitionShards(p, n)...)
}

// sweepRuns runs the runs' steps of the sweep over shards: each step is
// one query for all of them (Runs.Stale takes the shards, $in on the sweep
// index's leading vshard), so a sweep is 3 small queries whatever V and P
// are; one query a shard would be 3 × 65 at V = 64, 195 read units a tick
// with nothing to sweep. Two partitions' shards are disjoint, so their
// sweeps never touch one run; the legacy runs (store.LegacyRuns), swept
// by partition 0, share their schedules with a shard, and, as two
// instances' sweeps always could, meet only through conditional writes.
func (e *Engine) sweepRuns(ctx context.Context, now time.Time, c *counters, shards []int) []*scheduleWork {
	e.failover(ctx, shards, now, c)
	e.owedRetries(ctx, shards, now, c)
	return e.recover(ctx, shards, now, c)
}

// endPauses resumes the schedules whose timed pause (pausedUntil) is over,
// with nextRunAt the first fire time at or after until: what they missed
// while paused is not owed, as after a manual resume. Each resume is guarded on
// the version read, so an operator's edit or resume meanwhile wins, and two
// sweeps resume a schedule once.
func (e *Engine) endPauses(ctx context.Context, now time.Time, sum *Summary, c *counters) {
	due, err := e.schedules.PausedUntil(ctx, now, e.cfg.PageSize)
	if err != nil {
		c.errors.Add(1)
		e.log.Error("timed-pause sweep failed", "err", err)
		return
	}
	for i := range due {
		s := &due[i]
		if err := e.copyForward(ctx, s); err != nil { // retention.go
			c.errors.Add(1)
			e.log.Error("recording the last change before ending a timed pause failed; the next sweep tries again", "schedule", s.ID, "err", err)
			continue
		}
		// From until, not now: the pause is [pausedAt, until), and this
		// sweep runs after until (after the tick's decide, too), so a fire
		// at until would otherwise be lost. A late sweep leaves the times
		// since until to the tick's catch-up policy, as any outage does.
		next, err := s.NextFireOf(s.PausedUntil.Add(-time.Nanosecond))
		if err != nil {
			// It never fires again (its endAt passed while paused): it
			// stays paused and says why. Its pausedUntil goes, or it
			// would head every later sweep's page and keep the other
			// timed pauses from ending.
			e.log.Warn("timed pause over, but the schedule has no fire time left; it stays paused", "schedule", s.ID, "err", err)
			if err := e.schedules.Unpause(ctx, s, time.Time{}, now.Truncate(time.Millisecond)); err != nil && !errors.Is(err, store.ErrConflict) {
				c.errors.Add(1)
				e.log.Error("ending the timer of a timed pause failed; the next sweep tries again", "schedule", s.ID, "err", err)
			}
			continue
		}
		switch err := e.schedules.Unpause(ctx, s, next, now.Truncate(time.Millisecond)); {
		case errors.Is(err, store.ErrConflict):
			// Resumed or edited meanwhile: that write wins.
		case err != nil:
			c.errors.Add(1)
			e.log.Error("resume after a timed pause failed; the next sweep tries again", "schedule", s.ID, "err", err)
		default:
			sum.Resumed++
			e.log.Info("timed pause over: schedule resumed", "schedule", s.ID, "paused_until", s.PausedUntil, "next_run_at", next)
		}
	}
}

func (e *Engine) stale(ctx context.Context, shards []int, status schedule.RunStatus, now time.Time) ([]runDoc, error) {
	out, err := e.runs.Stale(ctx, shards, status, now, e.cfg.PageSize)
	if err != nil {
		return nil, fmt.Errorf("sweep %s runs of decider shards %v: %w", status, shards, err)
	}
	return out, nil
}

func (e *Engine) failover(ctx context.Context, shards []int, now time.Time, c *counters) {
	runs, err := e.stale(ctx, shards, schedule.RunRunning, now)
	if err != nil {
		c.errors.Add(1)
		e.log.Error("failover sweep failed", "err", err)
		return
	}
	for i := range runs {
		r := &runs[i]
		if r.GPUJob != "" {
			// Its executor handed the work to the GPU pool and left: the
			// job, not the job lease, says whether it is still running.
			e.settleGPURun(ctx, r, now, c)
			continue
		}
		if r.RunJob != "" {
			// Likewise for a Cloud Run execution (runjob.go).
			e.settleRunJobRun(ctx, r, now, c)
			continue
		}
		if left, alive := e.jobAlive(ctx, r); alive {
			e.postpone(ctx, r, now, left, c)
			continue
		}
		msg := fmt.Sprintf("heartbeat stopped: last heartbeat at %s by %s (epoch %d); failed over at %s",
			r.HeartbeatAt.UTC().Format(time.RFC3339), r.Holder, r.Epoch, now.Format(time.RFC3339))
		// Read before the failover, whose write queues the schedule's
		// failed event (its notify block says whether): a failover
		// without it would lose the event. Unreadable, the run waits for
		// the next sweep; deleted, it fails over with the default
		// channel and no retry.
		var s *schedule.Schedule
		var got schedule.Schedule
		switch err := e.getSchedule(ctx, r.ScheduleID, &got); {
		case err == nil:
			s = &got
		case !errors.Is(err, store.ErrNotFound):
			c.errors.Add(1)
			e.log.Error("read schedule for failover failed; the next sweep tries again", "run", r.ID, "err", err)
			continue
		}
		at := now.Truncate(time.Millisecond)
		n := e.notice(s, schedule.EventFailed, at)
		// Conditional on the sweepAt we read: a heartbeat that lands
		// meanwhile moves it, and the run stays alive. The failed run
		// keeps a sweepAt (an owed-retry mark) until retry below has
		// recorded its retry, or found that none is owed.
		err := e.runs.FailOver(ctx, r.ID, r.SweepAt, msg, now, now.Add(e.reservation()), e.expireAt(s, now), n)
		if err != nil {
			if !errors.Is(err, store.ErrConflict) {
				c.errors.Add(1)
				e.log.Error("fail over run failed", "run", r.ID, "err", err)
			}
			continue
		}
		c.failed.Add(1)
		e.metrics.RunFinished(ctx, r.ScheduleID, string(r.Source), string(schedule.RunFailed), r.StartedAt, now)
		e.log.Warn("run failed over", "run", r.ID, "reason", msg)
		if r.Epoch != 0 {
			// Its job lease is dead: whatever waited behind it goes now, in
			// this sweep's recovery, not when its own reservation ends.
			e.wakeBehind(ctx, r, now)
		}
		e.deliverSoon(ctx, s, finished(r, store.RunOutcome{Status: schedule.RunFailed, FinishedAt: now, Error: msg, Notice: n}))
		if s == nil {
			continue // deleted: nothing to retry
		}
		e.retry(ctx, s, &r.Run, now, c)
	}
}

// wakeBehind makes the pending runs of the failed-over run r's schedule
// (its shard's, for a shard) due at now, so that the recovery step of the
// same sweep hands them off. They waited behind r's job lease: a catch-up
// sibling left pending behind it, a run whose deliveries met the lease
// until the queue gave up, a retry marked waiting. Without this, they
// would wait for their own sweepAt, the decider's reservation (a minute),
// which is what made a run wait about 63 s after its holder died. Each
// move is conditional on the sweepAt read, like every sweep write; a run
// whose task is still queued gets a second task from the recovery, and the
// claim executes it once.
func (e *Engine) wakeBehind(ctx context.Context, r *runDoc, now time.Time) {
	waiting, err := e.runs.PendingOf(ctx, r.ScheduleID, r.Shard, e.cfg.PageSize)
	if err != nil {
		e.log.Warn("read the runs behind a failed-over run failed; they wait for their reservation", "run", r.ID, "err", err)
		return
	}
	for i := range waiting {
		w := &waiting[i]
		if !w.SweepAt.After(now) {
			continue // already due
		}
		if w.Source == schedule.SourceRetry && !w.Waiting {
			// Pending for its backoff, not behind the lease: its sweepAt
			// is its due time, and moving it would run it early.
			continue
		}
		if err := e.moveSweep(ctx, w.ID, schedule.RunPending, w.SweepAt, now); err != nil && !errors.Is(err, store.ErrConflict) {
			e.log.Warn("wake a run behind a failed-over run failed; it waits for its reservation", "run", w.ID, "err", err)
		}
	}
}

// owedRetries gives each failed run that still carries its owed-retry mark
// the retry its executor, or the failover, did not record.
func (e *Engine) owedRetries(ctx context.Context, shards []int, now time.Time, c *counters) {
	runs, err := e.stale(ctx, shards, schedule.RunFailed, now)
	if err != nil {
		c.errors.Add(1)
		e.log.Error("owed-retry sweep failed", "err", err)
		return
	}
	byID := map[string]*schedule.Schedule{}
	for i := range runs {
		r := &runs[i]
		s, ok := byID[r.ScheduleID]
		if !ok {
			var got schedule.Schedule
			switch err := e.getSchedule(ctx, r.ScheduleID, &got); {
			case errors.Is(err, store.ErrNotFound):
				s = nil
			case err != nil:
				c.errors.Add(1)
				e.log.Error("read schedule for an owed retry failed; the next sweep tries again", "run", r.ID, "err", err)
				continue
			default:
				s = &got
			}
			byID[r.ScheduleID] = s
		}
		if s == nil {
			e.retryRecorded(ctx, r.ID) // deleted: nothing to retry
			continue
		}
		e.log.Warn("recording a retry its executor did not", "run", r.ID)
		e.retry(ctx, s, &r.Run, now, c)
	}
}

// jobAlive reports whether the executor of a running run still holds its
// job lease at the run's epoch, and for how much longer. The run document's
// heartbeat is judged on the writers' clocks; the lease's expiry is judged
// on the storage server's clock (plus skew), so a run is failed over only
// when both say it stopped. Runs of allow schedules have no lease (epoch
// 0): their heartbeat decides.
func (e *Engine) jobAlive(ctx context.Context, r *runDoc) (left time.Duration, alive bool) {
	if r.Epoch == 0 {
		return 0, false
	}
	info, err := e.cfg.Leases.Status(ctx, runJobLease(&r.Run))
	if errors.Is(err, lease.ErrNotFound) {
		return 0, false // free or gone: nobody holds it
	}
	if err != nil {
		// Unknown is not dead: failing the run over now would retry a
		// target whose executor may still be running it. Look again after
		// a reservation.
		e.log.Warn("job lease status unreadable; failover postponed", "run", r.ID, "err", err)
		return e.reservation(), true
	}
	now := time.Now()
	if info.Epoch != r.Epoch || !info.Live(now) {
		return 0, false
	}
	return info.ExpiresAt.Sub(now), true
}

// postpone moves a stale run whose job lease is still live out of the
// sweep's way until that lease would expire. Its executor's run-document
// heartbeats are failing while its lease renews; left in place, such runs
// would fill the first page of every sweep (it reads the oldest sweepAt
// first) and the runs behind them, whose executors did die, would never be
// failed over. Conditional on the sweepAt we read, like the failover.
func (e *Engine) postpone(ctx context.Context, r *runDoc, now time.Time, left time.Duration, c *counters) {
	err := e.moveSweep(ctx, r.ID, schedule.RunRunning, r.SweepAt, now.Add(max(left, time.Second)))
	if err != nil && !errors.Is(err, store.ErrConflict) {
		c.errors.Add(1)
		e.log.Error("postpone sweep of live run failed", "run", r.ID, "err", err)
	}
}

func (e *Engine) recover(ctx context.Context, shards []int, now time.Time, c *counters) []*scheduleWork {
	runs, err := e.stale(ctx, shards, schedule.RunPending, now)
	if err != nil {
		c.errors.Add(1)
		e.log.Error("pending sweep failed", "err", err)
		return nil
	}
	bySchedule := map[string]*scheduleWork{}
	type batch struct {
		scheduleID string
		shard      int // -1: unsharded
		decided    time.Time
	}
	busyUntil := map[batch]time.Time{} // a live running sibling's sweepAt, or zero
	var work []*scheduleWork
	for i := range runs {
		r := &runs[i]
		// Reserve it, conditional on the sweepAt we read, so that one
		// sweeper takes it; the reservation ends after e.reservation().
		reserved := now.Add(e.reservation())
		if err := e.moveSweep(ctx, r.ID, schedule.RunPending, r.SweepAt, reserved); err != nil {
			if !errors.Is(err, store.ErrConflict) {
				c.errors.Add(1)
				e.log.Error("reserve pending run failed", "run", r.ID, "err", err)
			}
			continue
		}
		r.SweepAt = reserved // as stored: a failed hand-off moves it from there
		w := bySchedule[r.ScheduleID]
		if w == nil {
			var s schedule.Schedule
			if err := e.getSchedule(ctx, r.ScheduleID, &s); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					e.abandon(ctx, r, "schedule deleted before the run executed", now, c)
				} else {
					c.errors.Add(1)
					e.log.Error("read schedule of pending run failed", "run", r.ID, "err", err)
				}
				continue
			}
			w = &scheduleWork{s: s, salt: "sweep@" + reserved.Format(time.RFC3339Nano)}
			bySchedule[r.ScheduleID] = w
		}
		if !r.Source.OperatorAsked() && pausedSince(&w.s, now) {
			// Paused since the decision: recovery does not run what the
			// schedule no longer wants (a manual trigger runs paused or
			// not).
			e.abandon(ctx, r, ReasonPaused, now, c)
			continue
		}
		if w.s.Overlap != schedule.OverlapAllow && r.Source != schedule.SourceRetry && r.Source != schedule.SourceMisfire {
			key := batch{r.ScheduleID, -1, r.CreatedAt}
			if r.Shard != nil {
				key.shard = *r.Shard // a shard's siblings are its own lane's
			}
			until, seen := busyUntil[key]
			if !seen {
				until = e.liveSiblingUntil(ctx, r, now)
				busyUntil[key] = until
			}
			if !until.IsZero() {
				// A run decided by the same tick is running: this one is
				// queued behind it (catch-up), and the decider's
				// reservation ran out meanwhile. Executing it now would
				// meet the job lease held by its own sibling and apply the
				// overlap policy to a run that is no overlap. Look again
				// when the sibling's heartbeat is due; by then the same
				// executor has claimed this one, or has died.
				e.deferRun(ctx, r, reserved, until)
				continue
			}
		}
		if len(w.runs) == 0 {
			work = append(work, w)
		}
		c.recovered.Add(1)
		w.runs = append(w.runs, r)
	}
	for _, w := range work {
		// Read in sweepAt order; the fire times are executed oldest
		// first, as a tick's batch is (runs woken together share one
		// sweepAt), and retries and misfire runs after them, as before.
		slices.SortStableFunc(w.runs, func(a, b *runDoc) int {
			if ra, rb := notAFire(a), notAFire(b); ra != rb {
				if ra {
					return 1
				}
				return -1
			}
			if c := a.FireTime.Compare(b.FireTime); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
	}
	return splitShards(work)
}

// notAFire reports a retry or a misfire run: not a fire time's first run.
func notAFire(r *runDoc) bool {
	return r.Source == schedule.SourceRetry || r.Source == schedule.SourceMisfire
}

// strandedMisfires gives each buffer_one schedule whose misfire flag is set
// while its job lease is free its misfire run: the sweep takes the lease,
// clears the flag and records the run (takeMisfire, fenced as a holder's
// would be), releases, and returns the run for hand-off. A flag set while a
// holder runs is the holder's to drain: Acquire finds it held (one read).
// Paused schedules keep the flag for the holder after they resume.
//
// Such flags, left alone, stay set; so each sweep reads the next page by
// _id after the last one's, and starts again from the first after a short
// page. With n flagged schedules, each is looked at within n/PageSize+1
// sweeps of one Engine (a fresh instance starts from the first).
func (e *Engine) strandedMisfires(ctx context.Context, c *counters) []*scheduleWork {
	e.misfireMu.Lock()
	after := e.misfireAfter
	e.misfireMu.Unlock()
	flagged, err := e.schedules.Misfired(ctx, after, e.cfg.PageSize)
	if err != nil {
		c.errors.Add(1)
		e.log.Error("stranded-misfire sweep failed", "err", err)
		return nil
	}
	next := ""
	if len(flagged) == e.cfg.PageSize && len(flagged) > 0 {
		next = flagged[len(flagged)-1].ID
	}
	e.misfireMu.Lock()
	e.misfireAfter = next
	e.misfireMu.Unlock()
	var work []*scheduleWork
	for i := range flagged {
		s := &flagged[i]
		if s.Overlap != schedule.OverlapBufferOne || !s.Enabled {
			continue
		}
		l, err := e.cfg.Leases.Acquire(ctx, JobLease(s.ID), leaseTTL(s))
		if err != nil {
			continue // held: its holder checks the flag before releasing
		}
		rd, ok := e.takeMisfire(ctx, s, l, c)
		e.release(ctx, s, l)
		if ok {
			e.log.Warn("misfire flag set with no holder (it died mid-run); its misfire run recorded", "schedule", s.ID, "run", rd.ID)
			c.recovered.Add(1)
			work = append(work, &scheduleWork{s: *s, runs: []*runDoc{rd}})
		}
	}
	return work
}

// liveSiblingUntil returns the sweepAt of a running run that the tick
// which decided r also decided (same schedule, same createdAt) and whose
// heartbeat is current, or the zero time when there is none. Only such a
// sibling defers r: the deferral ends with that tick's own batch, so a
// schedule that always has some run going cannot hold r back forever.
func (e *Engine) liveSiblingUntil(ctx context.Context, r *runDoc, now time.Time) time.Time {
	running, err := e.runs.LiveSibling(ctx, r.ScheduleID, r.Shard, r.CreatedAt, now)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("look for a running sibling failed; executing the pending run", "run", r.ID, "err", err)
		}
		return time.Time{}
	}
	return running.SweepAt
}

// moveSweep sets a run's sweepAt to to, only while the run is still in
// status with the sweepAt from that the caller read: concurrent sweepers
// agree on who reserved, postponed or deferred it, and a heartbeat or a
// claim that landed meanwhile wins. ErrConflict when it did.
func (e *Engine) moveSweep(ctx context.Context, id string, status schedule.RunStatus, from, to time.Time) error {
	return e.runs.MoveSweep(ctx, id, status, from, to)
}

// deferRun moves a reserved pending run's sweepAt to until.
func (e *Engine) deferRun(ctx context.Context, r *runDoc, reserved, until time.Time) {
	if err := e.moveSweep(ctx, r.ID, schedule.RunPending, reserved, until); err != nil && !errors.Is(err, store.ErrConflict) {
		// The reservation stands: the sweep looks again when it ends.
		e.log.Warn("defer pending run failed", "run", r.ID, "err", err)
	}
}

func (e *Engine) abandon(ctx context.Context, r *runDoc, reason string, now time.Time, c *counters) {
	// No notice: a run skipped because its schedule was paused or
	// deleted is the operator's doing, not news to them.
	err := e.runs.Skip(ctx, r.ID, reason, now, e.expireAt(nil, now), nil)
	if err == nil {
		e.metrics.RunFinished(ctx, r.ScheduleID, string(r.Source), string(schedule.RunSkipped), time.Time{}, now)
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		c.errors.Add(1)
	}
}

// Trigger records a manual run of a schedule now (source "manual"), whether
// or not the schedule is enabled, and starts executing it in the
// background under the schedule's overlap policy. It returns the run as
// recorded (pending). Two triggers in the same second are one run. If the
// process dies before executing it, the sweep does. A missing schedule
// gives an error wrapping store.ErrNotFound.
func (e *Engine) Trigger(ctx context.Context, scheduleID string) (*schedule.Run, error) {
	var s schedule.Schedule
	if err := e.getSchedule(ctx, scheduleID, &s); err != nil {
		return nil, fmt.Errorf("scheduler: trigger %s: %w", scheduleID, err)
	}
	now := e.now().UTC()
	at := now.Truncate(time.Second)
	rd := e.pendingRun(s.ID, at, schedule.SourceManual, now)
	if s.Shards > 0 {
		return e.triggerShards(ctx, &s, rd)
	}
	inserted, err := e.runs.Insert(ctx, rd)
	if err != nil {
		return nil, fmt.Errorf("scheduler: trigger %s: %w", scheduleID, err)
	}
	if !inserted {
		cur, err := e.runs.Get(ctx, rd.ID)
		if err != nil {
			return nil, fmt.Errorf("scheduler: trigger %s: %w", scheduleID, err)
		}
		return &cur.Run, nil
	}
	// The answer is the run as recorded, copied before the execution
	// (which writes to rd) starts.
	run := rd.Run
	// Started without waiting: handed off to Run, or executed in the
	// background. A failed hand-off leaves the run pending for the sweep.
	e.startOrHandOff(context.WithoutCancel(ctx), []*scheduleWork{{s: s, runs: []*runDoc{rd}}}, &counters{})
	return &run, nil
}

// triggerShards records the manual fire rd of sharded schedule s as one
// run per shard and starts them, each shard apart. It returns the fire's
// aggregate (schedule.AggregateFire) as recorded. Two triggers in the same
// second are one fire: the shard runs' ids are deterministic.
func (e *Engine) triggerShards(ctx context.Context, s *schedule.Schedule, rd *runDoc) (*schedule.Run, error) {
	var fresh []*runDoc
	latest := make([]*schedule.Run, s.Shards)
	for i, x := range fanOut(s, rd) {
		inserted, err := e.runs.Insert(ctx, x)
		if err != nil {
			// The shards inserted so far stay pending: the sweep runs
			// them, and a repeat within the second inserts the rest.
			return nil, fmt.Errorf("scheduler: trigger %s: shard %d: %w", s.ID, i, err)
		}
		if !inserted {
			cur, err := e.runs.Get(ctx, x.ID)
			if err != nil {
				return nil, fmt.Errorf("scheduler: trigger %s: %w", s.ID, err)
			}
			latest[i] = &cur.Run
			continue
		}
		run := x.Run
		latest[i] = &run
		fresh = append(fresh, x)
	}
	agg := schedule.AggregateFire(rd.ID, s.Shards, latest)
	if len(fresh) > 0 {
		e.startOrHandOff(context.WithoutCancel(ctx), splitShards([]*scheduleWork{{s: *s, runs: fresh}}), &counters{})
	}
	return &agg, nil
}

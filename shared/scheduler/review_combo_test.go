package scheduler_test

import (
	"testing"
	"time"

	"context"
	"errors"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/scheduler"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestReportRecordsExpire: the records a tick writes as reports, never
// executed (a fire a calendar excludes, of a sharded schedule here, and a
// missed window), are finished runs like any other: they carry expireAt =
// finishedAt + history.keep, and the sweep deletes them once it passes.
// Without it they would stay for ever, though retention promises they
// go.
func TestReportRecordsExpire(t *testing.T) {
	b := setup(t)
	key, _ := newGate(t, 0)
	b.putCalendar(t, schedule.Calendar{ID: "hol", TimeZone: "UTC", Dates: []string{"2026-03-02"}})
	b.addSchedule(t, schedule.Schedule{ID: "calsh", Cron: "0 10 * * *", Shards: 3, ExcludeCalendars: []string{"hol"},
		History: &schedule.History{Keep: "1h"}, Target: gateTarget(key)})
	b.addSchedule(t, schedule.Schedule{ID: "miss", Cron: "* * * * *", Catchup: schedule.CatchupNone,
		History: &schedule.History{Keep: "1h"}, Target: gateTarget(key)})
	b.clock.Set(day10(0))
	b.tick(t)
	b.eng.Wait()
	for _, id := range []string{"calsh", "miss"} {
		var reports int
		for _, r := range b.allRuns(t, id) {
			if r.Status != schedule.RunSkipped {
				continue
			}
			reports++
			if want := r.FinishedAt.Add(time.Hour); !r.ExpireAt.Equal(want) {
				t.Errorf("%s: skipped record %s (%s) has expireAt %s, want finishedAt + 1h = %s", id, r.ID, r.Reason, r.ExpireAt, want)
			}
		}
		if reports != 1 {
			t.Fatalf("%s: %d skipped records, want 1: %v", id, reports, runLines(b.allRuns(t, id)))
		}
	}
	// The excluded fire of the sharded schedule is one record for the
	// fire, not one per shard: no shard ran, and none is owed.
	if rs := b.allRuns(t, "calsh"); len(rs) != 1 || rs[0].Shard != nil {
		t.Errorf("calsh: %v, want the one unsharded skipped record", runLines(rs))
	}
	b.clock.Set(day10(0).Add(2 * time.Hour))
	b.tick(t)
	b.eng.Wait()
	for _, r := range append(b.allRuns(t, "calsh"), b.allRuns(t, "miss")...) {
		if r.Status == schedule.RunSkipped && r.FinishedAt.Before(day10(0).Add(time.Minute)) {
			t.Errorf("skipped record %s still there two hours on, past its keep of 1h", r.ID)
		}
	}
}

// TestShardedScheduleInGroup: a sharded schedule in a concurrency group
// of limit 1. Each shard run takes a slot of its own, so one shard runs
// at a time; a shard that waits is recorded waiting on its own run
// (<run>#<i>) and has released its shard's job lease (job-<id>-<i>), not
// held it while waiting; and every shard runs exactly once, from the
// sweep, in the line's order (fire time, then id).
func TestShardedScheduleInGroup(t *testing.T) {
	b := setup(t)
	key, p := newProbe(t)
	s := groupSchedule("sg", key, 1, "")
	s.Shards = 3
	b.addSchedule(t, s)
	b.clock.Set(t0.Add(time.Minute + time.Second))
	fire := runAt("sg")
	tick1 := tickAsync(t, b)
	p.waitStarted(t)
	var waiting []int
	for i := range 3 {
		id := schedule.ShardRunID(fire, i)
		r := b.waitRun(t, id, "running or waiting", func(r schedule.Run) bool { return r.Status == schedule.RunRunning || waitingForGroup(r) })
		if r.Status == schedule.RunPending {
			waiting = append(waiting, i)
		}
	}
	if len(waiting) != 2 {
		t.Fatalf("shards waiting %v; want two of three (limit 1)", waiting)
	}
	p.noStart(t)
	for _, i := range waiting {
		info, err := b.leases.Status(context.Background(), scheduler.ShardJobLease("sg", i))
		if !errors.Is(err, lease.ErrNotFound) && err == nil && info.Live(time.Now()) {
			t.Errorf("shard %d waits for its group but its job lease %s is held: %+v", i, scheduler.ShardJobLease("sg", i), info)
		}
	}
	p.release <- struct{}{}
	<-tick1
	for range 2 {
		b.clock.Add(scheduler.GroupRecheck + time.Second)
		done := tickAsync(t, b)
		p.waitStarted(t)
		p.release <- struct{}{}
		<-done
	}
	b.eng.Wait()
	for i := range 3 {
		b.waitRun(t, schedule.ShardRunID(fire, i), "succeeded", func(r schedule.Run) bool { return r.Status == schedule.RunSucceeded })
	}
	most, calls := p.stats()
	if most > 1 || calls["sg"] != 3 {
		t.Fatalf("most at once %d (want 1), calls %v (want 3)", most, calls)
	}
	if rs := b.allRuns(t, "sg"); len(rs) != 3 {
		t.Errorf("runs %v; want the three shards", runLines(rs))
	}
}

package scheduler_test

import (
	"testing"
	"time"

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

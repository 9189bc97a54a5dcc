package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestTimedPauseNotStarvedByEndedSchedules: a schedule whose endAt passed
// while it was paused for a time stays paused (it has no fire time left),
// but it must not keep every later timed pause from ending. With a page
// of one, the ended schedule (the oldest pausedUntil) comes first on every
// sweep.
func TestTimedPauseNotStarvedByEndedSchedules(t *testing.T) {
	b := setup(t, func(c *scheduler.Config) { c.PageSize = 1 })
	noop := schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}
	insertPaused := func(s schedule.Schedule, until time.Time) {
		t.Helper()
		if err := s.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
			t.Fatalf("normalize: %v", err)
		}
		now := b.clock.Now()
		next, err := s.NextFireOf(now)
		if err != nil {
			t.Fatal(err)
		}
		s.NextRunAt, s.Version, s.CreatedAt, s.UpdatedAt = next.UTC(), 1, now, now
		s.Enabled, s.PausedAt, s.PausedBy, s.PausedUntil = false, now, "op", until
		if ok, err := b.store.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil || !ok {
			t.Fatalf("insert schedule: %v %v", ok, err)
		}
	}
	// Ends at 09:01:30, paused until 09:02: nothing left when the pause ends.
	insertPaused(schedule.Schedule{ID: "ended", Cron: "* * * * *", EndAt: t0.Add(90 * time.Second), Target: noop}, t0.Add(2*time.Minute))
	insertPaused(schedule.Schedule{ID: "later", Cron: "* * * * *", Target: noop}, t0.Add(3*time.Minute))
	for m := 4; m <= 8; m++ {
		b.clock.Set(t0.Add(time.Duration(m) * time.Minute))
		b.tick(t)
		b.eng.Wait()
	}
	if got := b.getSchedule(t, "later"); !got.Enabled {
		t.Errorf("schedule %q is still paused at 09:08, five sweeps after its pause ended at 09:03 (until %s)", got.ID, got.PausedUntil)
	}
}

// TestTimedPauseFiresAtUntil: a pause until 09:02 of a minutely schedule
// covers [pause, 09:02): the 09:02 fire is after the pause and runs, though
// the sweep that ends the pause runs at or after 09:02.
func TestTimedPauseFiresAtUntil(t *testing.T) {
	b := setup(t)
	s := schedule.Schedule{ID: "p", Cron: "* * * * *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}}
	if err := s.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
		t.Fatal(err)
	}
	s.NextRunAt, s.Version, s.CreatedAt, s.UpdatedAt = t0.Add(time.Minute), 1, t0, t0
	s.Enabled, s.PausedAt, s.PausedBy, s.PausedUntil = false, t0, "op", t0.Add(2*time.Minute)
	if ok, err := b.store.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil || !ok {
		t.Fatalf("insert schedule: %v %v", ok, err)
	}
	for m := 1; m <= 4; m++ {
		b.clock.Set(t0.Add(time.Duration(m) * time.Minute))
		b.tick(t)
		b.eng.Wait()
	}
	var fires []time.Time
	for _, r := range b.runs(t, "p") {
		fires = append(fires, r.FireTime.UTC())
	}
	if len(fires) == 0 || !fires[0].Equal(t0.Add(2*time.Minute)) {
		t.Errorf("fires %v; want the first at until, %s", fires, t0.Add(2*time.Minute))
	}
}

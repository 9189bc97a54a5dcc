package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// addBounded inserts s with nextRunAt from its own spec (startAt, endAt,
// jitter applied), as the catalog does.
func addBounded(t *testing.T, b *bundle, s schedule.Schedule) {
	t.Helper()
	if err := s.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
		t.Fatalf("normalize: %v", err)
	}
	now := b.clock.Now()
	next, err := s.NextFireOf(now)
	if err != nil {
		t.Fatal(err)
	}
	s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next.UTC(), true, 1, now, now
	if ok, err := b.store.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil || !ok {
		t.Fatalf("insert schedule: %v %v", ok, err)
	}
}

// TestRemainingRunsStopsTheSchedule: remainingRuns 3 gives exactly three
// scheduled runs, the count going down with each decision, and then the
// schedule is disabled; a tick that decides two missed fires at once
// counts both.
func TestRemainingRunsStopsTheSchedule(t *testing.T) {
	b := setup(t)
	three := int64(3)
	addBounded(t, b, schedule.Schedule{ID: "thrice", Cron: "* * * * *", Catchup: schedule.CatchupAll, RemainingRuns: &three,
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(time.Minute))
	b.tick(t)
	if got := b.getSchedule(t, "thrice"); got.RemainingRuns == nil || *got.RemainingRuns != 2 || !got.Enabled {
		t.Fatalf("after one fire: remaining %v enabled %v; want 2, enabled", got.RemainingRuns, got.Enabled)
	}
	// Three minutes later: two missed fires and one on time, but only two
	// are left.
	b.clock.Set(t0.Add(4 * time.Minute))
	b.tick(t)
	b.eng.Wait()
	got := b.getSchedule(t, "thrice")
	if got.RemainingRuns == nil || *got.RemainingRuns != 0 || got.Enabled {
		t.Errorf("after the last fires: remaining %v enabled %v; want 0, disabled", got.RemainingRuns, got.Enabled)
	}
	b.clock.Set(t0.Add(10 * time.Minute))
	b.tick(t)
	b.eng.Wait()
	if runs := b.runs(t, "thrice"); len(runs) != 3 {
		t.Errorf("%d runs; want exactly 3", len(runs))
	}
}

// TestStartAndEndAt: nothing fires before startAt, and the schedule stops
// (disabled) at endAt.
func TestStartAndEndAt(t *testing.T) {
	b := setup(t)
	addBounded(t, b, schedule.Schedule{ID: "window", Cron: "* * * * *",
		StartAt: t0.Add(3 * time.Minute), EndAt: t0.Add(5*time.Minute + 30*time.Second),
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	if got := b.getSchedule(t, "window"); !got.NextRunAt.Equal(t0.Add(3 * time.Minute)) {
		t.Fatalf("nextRunAt %s; want startAt %s", got.NextRunAt, t0.Add(3*time.Minute))
	}
	for m := 1; m <= 8; m++ {
		b.clock.Set(t0.Add(time.Duration(m) * time.Minute))
		b.tick(t)
		b.eng.Wait()
	}
	var fires []time.Time
	for _, r := range b.runs(t, "window") {
		fires = append(fires, r.FireTime.UTC())
	}
	want := []time.Time{t0.Add(3 * time.Minute), t0.Add(4 * time.Minute), t0.Add(5 * time.Minute)}
	if len(fires) != len(want) {
		t.Fatalf("fires %v; want %v", fires, want)
	}
	for i := range want {
		if !fires[i].Equal(want[i]) {
			t.Errorf("fire %d: %s; want %s", i, fires[i], want[i])
		}
	}
	if got := b.getSchedule(t, "window"); got.Enabled {
		t.Error("the schedule is still enabled after its endAt")
	}
}

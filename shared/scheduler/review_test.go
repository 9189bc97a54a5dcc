package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestEditRacingAdvanceWins: an API edit lands between the tick's read of a
// due schedule and its advance of nextRunAt, and the edit's recomputed
// nextRunAt happens to equal the one the tick read (the API computed it a
// moment before the fire time). The tick's advance must still lose to the
// edit: otherwise it moves nextRunAt by the old expression and the new
// expression's fire times until then never run.
func TestEditRacingAdvanceWins(t *testing.T) {
	b := setup(t)
	key, g := newGate(t, 0)
	// Hourly; added at 09:00:00, so nextRunAt is 10:00.
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "0 * * * *", Target: gateTarget(key)})
	// The API's clock reads one second before the fire time.
	apiNow := func() time.Time { return t0.Add(time.Hour - time.Second) }
	svc := catalog.New(b.store, catalog.Options{
		Now:      apiNow,
		Validate: schedule.ValidateOptions{Builtins: scheduler.Builtins()},
	})
	scheduler.SetAfterInsert(b.eng, func(id string) error {
		scheduler.SetAfterInsert(b.eng, nil)
		_, err := svc.Update(context.Background(), id, map[string]any{"cron": "*/5 * * * *"}, 0)
		return err
	})
	b.clock.Set(t0.Add(time.Hour + time.Second)) // 10:00:01
	b.tick(t)
	if got, want := b.getSchedule(t, "job").NextRunAt.UTC(), t0.Add(time.Hour); !got.Equal(want) {
		t.Errorf("nextRunAt after the edit raced the tick: got %s, want the edit's %s", got.Format("15:04"), want.Format("15:04"))
	}
	b.clock.Set(t0.Add(time.Hour + 5*time.Minute + time.Second)) // 10:05:01
	b.tick(t)
	want := []string{"10:00 scheduled succeeded", "10:05 scheduled succeeded"}
	if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
		t.Errorf("runs (-want,+got):\n%s", diff)
	}
	if got := g.calls.Load(); got != 2 {
		t.Errorf("executed %d times, want 2", got)
	}
}

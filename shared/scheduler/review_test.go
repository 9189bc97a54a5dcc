package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	bclock "github.com/baton-cron/baton/shared/clock"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/lease"
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
		Clock:    bclock.Func(apiNow),
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

// TestDaemonDoesNotSpinOnAFailingSchedule: a due schedule whose decision
// fails (here a stored cron that no longer parses; in production also a
// time zone gone from tzdata, or a persistent write error) stays due. The
// daemon must retry it at its granularity, not tick again at once in a
// loop, reading (and, on Firestore, paying for) the due page each time.
func TestDaemonDoesNotSpinOnAFailingSchedule(t *testing.T) {
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "spin"})
	sc := schedule.Schedule{ID: "broken", Cron: "* * * * *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}}
	if err := sc.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	sc.Cron = "not a cron" // as stored; no API write would accept it
	sc.NextRunAt, sc.Enabled, sc.Version, sc.CreatedAt, sc.UpdatedAt = now.Add(-time.Minute), true, 1, now, now
	if _, err := s.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	var ticks atomic.Int64
	first := make(chan struct{})
	u := startDaemon(t, s, m, func(c *scheduler.DaemonConfig) {
		c.OnTick = func(sum *scheduler.Summary) {
			if ticks.Add(1) == 1 {
				close(first)
			}
		}
	})
	waitFor(t, u.lead, "the daemon to lead")
	waitFor(t, (<-chan struct{})(first), "the first tick")
	// With a one-second granularity a retry comes about a second later; a
	// spinning daemon ticks dozens of times in this half second.
	time.Sleep(500 * time.Millisecond)
	if got := ticks.Load(); got > 3 {
		t.Errorf("ticks in the half second after the first: %d, want at most a retry or two", got-1)
	}
}

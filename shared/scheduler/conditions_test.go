package scheduler_test

// Conditions on the run path that no other test depended on: each test
// here fails when its condition is dropped from the write.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestARunFinishedMeanwhileIsNotClaimedAgain: a tick decides a run that
// another executor runs to the end before the tick gets to it (a run an
// earlier tick decided and the sweep recovered, re-decided by this tick as
// a duplicate). The tick's claim must find it no longer pending: the claim
// is conditional on pending, and that condition is what makes execution
// exactly-once. The leased claim is fenced too, but a newer job lease's
// epoch passes the fence of a run finished under an older one.
func TestARunFinishedMeanwhileIsNotClaimedAgain(t *testing.T) {
	for _, overlap := range []schedule.Overlap{schedule.OverlapSkip, schedule.OverlapAllow} {
		t.Run(string(overlap), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			key, g := newGate(t, 0)
			b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: overlap, Target: gateTarget(key)})
			id := schedule.RunID("job", t0.Add(time.Minute), schedule.SourceScheduled, 1)
			var once sync.Once
			var out *scheduler.Outcome
			var err error
			scheduler.SetAfterInsert(b.eng, func(string) error {
				once.Do(func() {
					out, err = b.eng.Execute(context.Background(), scheduler.Task{ScheduleID: "job", Runs: []string{id}}, nil)
				})
				return nil
			})
			b.clock.Set(t0.Add(time.Minute + time.Second))
			sum := b.tick(t)
			if err != nil || out.Executed != 1 {
				t.Fatalf("the other executor: %+v, err %v; want it to have executed the run", out, err)
			}
			if n := g.calls.Load(); n != 1 || sum.Fired != 0 {
				t.Errorf("target ran %d times (the tick fired %d), want once: the tick claimed a run that had already finished", n, sum.Fired)
			}
			if r := b.run(t, id); r.Status != schedule.RunSucceeded {
				t.Errorf("run %s: %s, want succeeded", id, r.Status)
			}
		})
	}
}

// TestRecreatedScheduleRacingAdvanceWins: while a tick decides a schedule,
// it is deleted and created again under the same id with another
// expression. Create starts the version at 1 again, so the version the
// tick read still matches; only nextRunAt (the new expression's, from the
// API's clock) tells the new schedule from the one the tick read. The
// tick's advance must lose, or it moves the new schedule's nextRunAt by the
// old expression and the new one's fire times until then never run.
func TestRecreatedScheduleRacingAdvanceWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, g := newGate(t, 0)
	target := gateTarget(key)
	// Hourly; added at 09:00:00, so nextRunAt is 10:00 and version 1.
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "0 * * * *", Target: target})
	svc := catalog.New(b.store, catalog.Options{
		Clock:    newClock(t0.Add(time.Hour + 30*time.Second)), // 10:00:30
		Validate: schedule.ValidateOptions{Builtins: scheduler.Builtins()},
	})
	var once sync.Once
	var created *schedule.Schedule
	var err error
	scheduler.SetAfterInsert(b.eng, func(id string) error {
		once.Do(func() {
			if err = svc.Delete(context.Background(), id, 0); err == nil {
				created, err = svc.Create(context.Background(), &schedule.Schedule{ID: id, Cron: "*/5 * * * *", Enabled: true, Target: target})
			}
		})
		return nil
	})
	b.clock.Set(t0.Add(time.Hour + time.Second)) // 10:00:01
	b.tick(t)
	if err != nil {
		t.Fatalf("re-create: %v", err)
	}
	if created.Version != 1 {
		t.Fatalf("re-created at version %d; the test needs the version the tick read (1)", created.Version)
	}
	if got, want := b.getSchedule(t, "job").NextRunAt.UTC(), t0.Add(time.Hour+5*time.Minute); !got.Equal(want) {
		t.Errorf("nextRunAt after the re-create raced the tick: got %s, want the new schedule's %s", got.Format("15:04"), want.Format("15:04"))
	}
	b.clock.Set(t0.Add(time.Hour + 5*time.Minute + time.Second)) // 10:05:01
	b.tick(t)
	want := []string{"10:00 scheduled succeeded", "10:05 scheduled succeeded"}
	if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
		t.Errorf("runs (-want,+got):\n%s", diff)
	}
	if n := g.calls.Load(); n != 2 {
		t.Errorf("target ran %d times, want 2", n)
	}
}

package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestAdoptUnderContentionDoesNotLoseTheFire: the live tick finds a fire
// time already recorded by a stale tick and adopts it (stamps its epoch),
// so that the stale tick's undo leaves it alone. When every attempt of that
// adoption meets Firestore's Aborted (112), the store answers ErrContended,
// which is an ErrConflict; the adoption must not be taken for "nothing to
// adopt". Taken so, the live tick advanced and handed the run off as its
// own while the run still carried the stale epoch; the stale tick's undo
// then recorded it skipped, and the fire time never ran.
func TestAdoptUnderContentionDoesNotLoseTheFire(t *testing.T) {
	d := &recDispatcher{}
	tasks := func(c *scheduler.Config) { c.Tasks = d }
	slow := func(c *scheduler.Config) { c.TickLeaseTTL = time.Minute; tasks(c) }
	tt := newTwoTicks(t, slow, tasks)
	key, g := newGate(t, 0)
	tt.stale.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Catchup: schedule.CatchupNone, Target: gateTarget(key)})
	tt.stale.clock.Set(t0.Add(2*time.Minute + time.Second))
	tt.live.clock.Set(t0.Add(2*time.Minute + 45*time.Second))
	var once sync.Once
	scheduler.SetAfterInsert(tt.stale.eng, func(string) error {
		once.Do(func() {
			// Exactly one write's attempts on the runs: the live tick's
			// adoption of 09:02 (its sweep finds nothing due yet).
			emutest.FailCommandCode(t, tt.live.store, schedule.RunsCollection, bson.D{{Key: "times", Value: mongostore.WriteAttempts}}, 112, "update")
			_, err := tt.takeOver()
			emutest.FailCommandOff(t, tt.live.store)
			t.Logf("live tick: %v", err)
		})
		return nil
	})
	_, err := tt.stale.eng.Tick(context.Background(), time.Time{})
	t.Logf("stale tick: %v", err)
	for _, task := range d.all() {
		if _, err := tt.live.eng.Execute(context.Background(), task, nil); err != nil {
			t.Errorf("execute %v: %v", task.Runs, err)
		}
	}
	r := tt.live.run(t, "job@20260302T090200Z")
	if r.Status != schedule.RunSucceeded {
		t.Errorf("09:02 is %s (%q), want succeeded: both ticks decided it, and neither ran it (target ran %d times)", r.Status, r.Reason, g.calls.Load())
	}
}

package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
)

// TestStaleTickLostInsertIsUndone: as TestStaleTickDecisionIsUndone's
// first case, and the stale tick's own run insert lands with its answer
// lost (Firestore's DeadlineExceeded after the commit). The store then
// answers "already there", as for an earlier tick's run. The stale tick
// must still undo it when its advance is refused: left pending, the sweep
// would run a fire time the live tick dropped. Not parallel: it arms the
// emulator's one fail point.
func TestStaleTickLostInsertIsUndone(t *testing.T) {
	slow := func(c *scheduler.Config) { c.TickLeaseTTL = time.Minute }
	tt := newTwoTicks(t, slow, nil)
	key, g := newGate(t, 0)
	tt.stale.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Catchup: schedule.CatchupNone, Target: gateTarget(key)})
	tt.stale.clock.Set(t0.Add(time.Minute + time.Second))
	tt.live.clock.Set(t0.Add(3 * time.Minute))
	var once sync.Once
	var liveErr error
	scheduler.SetBeforeInsert(tt.stale.eng, func(string) error {
		once.Do(func() {
			_, liveErr = tt.takeOver()
			// The next runs insert is the stale tick's 09:01.
			emutest.FailCommandCodeAfterRun(t, tt.stale.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, 262, "insert")
		})
		return nil
	})
	_, err := tt.stale.eng.Tick(context.Background(), time.Time{})
	if liveErr != nil {
		t.Fatalf("live tick: %v", liveErr)
	}
	if !errors.Is(err, store.ErrStaleFence) {
		t.Errorf("stale tick: err %v, want ErrStaleFence", err)
	}
	emutest.FailCommandOff(t, tt.stale.store)
	r := tt.stale.run(t, schedule.RunID("job", t0.Add(time.Minute), schedule.SourceScheduled, 1))
	if r.Status != schedule.RunSkipped || !strings.Contains(r.Reason, "stale tick") {
		t.Errorf("the stale tick's 09:01, whose insert answer was lost: %s %q, want skipped as decided by a stale tick", r.Status, r.Reason)
	}
	tt.live.clock.Set(t0.Add(5*time.Minute + time.Second))
	tt.live.tick(t)
	if n := g.calls.Load(); n != 4 {
		t.Errorf("target ran %d times, want 4 (09:02 to 09:05)", n)
	}
}

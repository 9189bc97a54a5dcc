package scheduler_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// TestOutcomeWriteFaultRunsTheTargetOnce: the target answered, and then the
// database failed the write of its outcome once: a WriteConflict, a dropped
// connection, or a write that landed but answered an error. Before, the
// write was not retried, the job lease was released, the sweep failed the
// run over, and its retry called the target a second time. Now the write is
// retried while the lease is held (or recognised as landed), the run is
// recorded succeeded, and the sweep leaves it alone.
func TestOutcomeWriteFaultRunsTheTargetOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(t *testing.T, st *store.Store)
	}{
		{"WriteConflict", func(t *testing.T, st *store.Store) {
			emutest.FailCommand(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
		{"dropped connection", func(t *testing.T, st *store.Store) {
			emutest.FailCommandDrop(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
		{"landed, answered an error", func(t *testing.T, st *store.Store) {
			emutest.FailCommandAfterWrite(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			key, g := newGate(t, 1)
			b.addSchedule(t, schedule.Schedule{ID: "o", Cron: "* * * * *", Retry: schedule.Retry{MaxAttempts: 3, Backoff: schedule.Duration(time.Second)},
				Target: gateTarget(key)})
			done := startBlockedTick(t, b, g, 1)
			tc.arm(t, b.store) // the next runs update is the outcome
			g.open()
			<-done
			emutest.FailCommandOff(t, b.store)
			// Long after: the sweep sees nothing to fail over.
			b.clock.Set(t0.Add(10 * time.Minute))
			if sum := b.tick(t); sum.Failed != 0 || sum.Retried != 0 {
				t.Errorf("sweep after the outcome: %+v, want nothing failed over or retried", sum)
			}
			var first []string
			others := int64(0) // the later fires the 09:10 tick decided
			for _, r := range b.runs(t, "o") {
				if r.FireTime.Equal(t0.Add(time.Minute)) {
					first = append(first, r.ID+" "+r.Status)
				} else {
					others++
				}
			}
			if len(first) != 1 || first[0] != "o@20260302T090100Z succeeded" {
				t.Errorf("runs of the 09:01 fire %v, want it recorded succeeded once, with no retry", first)
			}
			if n := g.calls.Load(); n != 1+others {
				t.Errorf("target called %d times for the 09:01 fire and %d later ones, want the 09:01 fire once", n, others)
			}
		})
	}
}

package scheduler_test

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestAdvanceUnderContentionCountsOnce: a schedule's advance whose every
// attempt meets Firestore's Aborted (112) was not applied, and no edit is
// known to have won. It used to be taken for an edit's conflict, whose
// handling lowers remainingRuns by the runs decided without moving
// nextRunAt; the next tick then decided the same fire again and counted
// it a second time. Now it is a failed advance: the next tick decides the
// fire once more (its run is idempotent by id) and counts it once.
func TestAdvanceUnderContentionCountsOnce(t *testing.T) {
	b := setup(t)
	five := int64(5)
	b.addSchedule(t, schedule.Schedule{ID: "n", Cron: "* * * * *", RemainingRuns: &five,
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	// Exactly one advance's attempts: the writes after it land.
	emutest.FailCommandCode(t, b.store, schedule.SchedulesCollection, bson.D{{Key: "times", Value: mongostore.WriteAttempts}}, 112, "update")
	_, _ = b.eng.Tick(t.Context(), b.clock.Now())
	emutest.FailCommandOff(t, b.store)
	b.clock.Set(t0.Add(time.Minute + 2*time.Second))
	b.tick(t)
	s := b.getSchedule(t, "n")
	if s.RemainingRuns == nil || *s.RemainingRuns != 4 {
		got := "unset"
		if s.RemainingRuns != nil {
			got = fmt.Sprint(*s.RemainingRuns)
		}
		t.Errorf("remainingRuns = %s after one fire; want 4 (counted once)", got)
	}
	if !s.NextRunAt.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("nextRunAt = %v; want %v", s.NextRunAt, t0.Add(2*time.Minute))
	}
}

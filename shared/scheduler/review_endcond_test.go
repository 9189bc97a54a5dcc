package scheduler_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestRemainingRunsCountsAFireWhoseAdvanceAnEditWon: an operator edits
// the description of a schedule with one run left while a tick decides its
// fire. The edit wins the advance (ErrConflict) and the decided run still
// executes, so that fire must still be counted: the schedule fires once in
// all, not once more after the edit.
func TestRemainingRunsCountsAFireWhoseAdvanceAnEditWon(t *testing.T) {
	b := setup(t)
	one := int64(1)
	addBounded(t, b, schedule.Schedule{ID: "once", Cron: "* * * * *", RemainingRuns: &one,
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	edited := false
	scheduler.SetAfterInsert(b.eng, func(id string) error {
		if id != "once" || edited {
			return nil
		}
		edited = true
		// The catalog's Update: the whole document from its own read (so
		// remainingRuns 1), a new description, version+1, nextRunAt from
		// its clock.
		return b.store.Collection(schedule.SchedulesCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "once"}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "description", Value: "edited"}, {Key: "nextRunAt", Value: t0.Add(2 * time.Minute)}, {Key: "version", Value: int64(2)}}}})
	})
	for m := 1; m <= 4; m++ {
		b.clock.Set(t0.Add(time.Duration(m) * time.Minute))
		b.tick(t)
		b.eng.Wait()
	}
	if runs := b.runs(t, "once"); len(runs) != 1 {
		var fires []time.Time
		for _, r := range runs {
			fires = append(fires, r.FireTime)
		}
		t.Errorf("%d runs (fires %v); want exactly 1 for remainingRuns 1", len(runs), fires)
	}
}

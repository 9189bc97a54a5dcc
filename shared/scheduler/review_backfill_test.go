package scheduler_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
)

// backfillLostInsertAnswer backfills four fire times of a new schedule
// while the first run insert lands but answers an error (262), so its
// retry meets the run: that run is the backfill's own.
func backfillLostInsertAnswer(t *testing.T, check func(*testing.T, *bundle, *schedule.BackfillResult)) {
	b := setup(t)
	b.addSchedule(t, schedule.Schedule{ID: "bf", Cron: "* * * * *",
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(30 * time.Second))
	req := schedule.BackfillRequest{Start: t0.Add(-4 * time.Minute), End: t0}
	emutest.FailCommandCodeAfterRun(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, 262, "insert")
	res, err := b.eng.Backfill(context.Background(), "bf", req, req.Start)
	emutest.FailCommandOff(t, b.store)
	if err != nil {
		t.Fatalf("backfill: %v", err)
	}
	b.eng.Wait()
	check(t, b, res)
}

// TestBackfillLostInsertAnswerIsStarted: the run whose insert answer was
// lost is handed off with the others at once, not left pending until the
// sweep's reservation runs out.
func TestBackfillLostInsertAnswerIsStarted(t *testing.T) {
	backfillLostInsertAnswer(t, func(t *testing.T, b *bundle, _ *schedule.BackfillResult) {
		for _, r := range b.runs(t, "bf") {
			if r.Status != schedule.RunSucceeded {
				t.Errorf("run %s is %s after the backfill's hand-off; want succeeded (no sweep has run)", r.ID, r.Status)
			}
		}
	})
}

// TestBackfillLostInsertAnswerIsCountedCreated: the run whose insert
// answer was lost is reported created, not existing: nothing was there
// before the call.
func TestBackfillLostInsertAnswerIsCountedCreated(t *testing.T) {
	backfillLostInsertAnswer(t, func(t *testing.T, _ *bundle, res *schedule.BackfillResult) {
		if res.Created != 4 || res.Existing != 0 {
			t.Errorf("created %d existing %d; want 4 created, 0 existing (nothing was there before)", res.Created, res.Existing)
		}
	})
}

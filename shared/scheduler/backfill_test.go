package scheduler_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestBackfillUnderInsertFaults: the backfill's run inserts meet a
// WriteConflict, a lost answer (the insert landed, the reply is an error)
// or a dropped connection. Whatever the database did, after the caller
// repeats a failed call every fire time has exactly one run, each target
// call happens once, and a fire time the tick had already run is not run
// again.
func TestBackfillUnderInsertFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(t *testing.T, st *mongostore.Store)
	}{
		{"write conflict", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandCode(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 2}}, 112, "insert")
		}},
		{"lost answer", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandCodeAfterRun(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 2}}, 262, "insert")
		}},
		{"dropped connection", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandDrop(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 2}}, "insert")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			key, g := newGate(t, 0)
			b.addSchedule(t, schedule.Schedule{ID: "bf", Cron: "* * * * *", Target: gateTarget(key)})
			// The tick runs the 09:01 fire on time; the backfill then
			// covers 08:57 to 09:01 included.
			b.clock.Set(t0.Add(time.Minute))
			b.tick(t)
			b.eng.Wait()
			b.clock.Set(t0.Add(2 * time.Minute))
			req := schedule.BackfillRequest{Start: t0.Add(-3 * time.Minute), End: t0.Add(2 * time.Minute)}
			tc.arm(t, b.store)
			res, err := b.eng.Backfill(context.Background(), "bf", req, req.Start)
			emutest.FailCommandOff(t, b.store)
			if err != nil {
				// The caller repeats a failed call (the CLI says so).
				if res, err = b.eng.Backfill(context.Background(), "bf", req, req.Start); err != nil {
					t.Fatalf("repeated backfill: %v", err)
				}
			}
			if len(res.Fires) != 5 {
				t.Fatalf("backfill covered %d fire times; want 5 (08:57 to 09:01)", len(res.Fires))
			}
			b.eng.Wait()
			// Anything recorded but not started (its hand-off lost with
			// the call) is the sweep's once the reservation is over.
			b.clock.Set(t0.Add(20 * time.Minute))
			b.tick(t)
			b.eng.Wait()
			byFire := map[time.Time][]schedule.Run{}
			for _, r := range b.runs(t, "bf") {
				if r.FireTime.After(t0.Add(time.Minute)) {
					continue // the later ticks' own fires
				}
				byFire[r.FireTime] = append(byFire[r.FireTime], r)
			}
			if len(byFire) != 5 {
				t.Errorf("%d fire times have runs; want 5", len(byFire))
			}
			for ft, rs := range byFire {
				if len(rs) != 1 || rs[0].Status != schedule.RunSucceeded {
					t.Errorf("fire %s: runs %+v; want exactly one, succeeded", ft, rs)
					continue
				}
				want := schedule.SourceBackfill
				if ft.Equal(t0.Add(time.Minute)) {
					want = schedule.SourceScheduled // it ran on time, before the backfill
				}
				if rs[0].Source != want {
					t.Errorf("fire %s: source %s; want %s", ft, rs[0].Source, want)
				}
			}
			later := int64(len(b.runs(t, "bf")) - len(byFire))
			if n := g.calls.Load(); n != 5+later {
				t.Errorf("target called %d times; want 5 (one per fire time) + %d later fires", n, later)
			}
		})
	}
}

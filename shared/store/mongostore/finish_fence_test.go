package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestFinishAtTheClaimsEpochLeavesTheFence: a leased run finished under the
// epoch it was claimed under rewrites no entry of the runs' fence index
// (one Firestore write unit a run of three, docs/cost.md), and one finished
// under a later epoch still raises its fence, so that a job lease's epoch
// floor (the highest fence its runs carry) covers that epoch. Priced by the
// Mongo emulator's billing, with the runs' own indexes.
func TestFinishAtTheClaimsEpochLeavesTheFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := emutest.Store(t)
	if err := st.EnsureIndexes(ctx, mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	r := st.Runs()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	entries := func() int64 {
		return emutest.MongoBilling(t, st.DatabaseName()).Collections[schedule.RunsCollection].IndexEntries
	}
	finish := func(id string, claimEpoch, finishEpoch int64) (rewritten int64, fence int64) {
		t.Helper()
		rd := &store.RunRecord{Run: schedule.Run{ID: id, ScheduleID: "s-" + id, FireTime: t0, Source: schedule.SourceScheduled,
			Status: schedule.RunPending, Attempt: 1, CreatedAt: t0}, SweepAt: t0}
		if ok, err := r.Insert(ctx, rd); err != nil || !ok {
			t.Fatalf("insert %s: %v, %v", id, ok, err)
		}
		if err := r.Claim(ctx, id, store.RunClaim{Token: "t-" + id, Holder: "h", Epoch: claimEpoch, At: t0, SweepAt: t0.Add(time.Minute)}); err != nil {
			t.Fatalf("claim %s at %d: %v", id, claimEpoch, err)
		}
		before := entries()
		done := t0.Add(time.Second)
		if err := r.Finish(ctx, id, finishEpoch, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: done, Output: "200", ExpireAt: done.Add(time.Hour)}); err != nil {
			t.Fatalf("finish %s at %d: %v", id, finishEpoch, err)
		}
		got, err := r.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != schedule.RunSucceeded || !got.FinishedAt.Equal(done) {
			t.Fatalf("%s after finish: %s at %s; want succeeded at %s", id, got.Status, got.FinishedAt, done)
		}
		return entries() - before, got.Fence
	}
	same, fenceSame := finish("same", 3, 3)
	later, fenceLater := finish("later", 3, 4)
	if fenceSame != 3 {
		t.Errorf("finished at the claim's epoch 3: fence %d; want 3", fenceSame)
	}
	if fenceLater != 4 {
		t.Errorf("claimed at 3, finished at 4: fence %d; want 4 (a finish under a later epoch raises it)", fenceLater)
	}
	// The later finish sets the fence: the fence index's entry is removed
	// and written again (2 entries); the same-epoch finish leaves it.
	if same != later-2 {
		t.Errorf("index entries rewritten: %d by a finish at the claim's epoch, %d by one at a later epoch; want 2 fewer (the fence index's)", same, later)
	}
}

// TestFinishFaults: the finish of a leased run under the faults Firestore
// answers, on its first write (the one that names the fence in its
// filter). Contention (112) is retried; a write that landed and answered
// 262, or one whose answer was an error after it landed, is recognised by
// reading the run back; a dropped connection applied nothing, fails, and
// the run is still running for the next attempt (recordOutcome retries),
// which lands. Each run ends succeeded once, at the claim's fence. Not
// parallel: one fail point per emulator.
func TestFinishFaults(t *testing.T) {
	ctx := context.Background()
	st := emutest.Store(t)
	r := st.Runs()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	done := t0.Add(time.Second)
	outcome := store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: done, Output: "200"}
	for _, tc := range []struct {
		name   string
		inject func()
		fails  bool // the first Finish returns an error
	}{
		{"WriteConflict", func() { emutest.FailCommandCode(t, st, schedule.RunsCollection, once, 112, "update") }, false},
		{"landed, answered 262", func() { emutest.FailCommandCodeAfterRun(t, st, schedule.RunsCollection, once, 262, "update") }, false},
		{"landed, write concern error", func() { emutest.FailCommandAfterWrite(t, st, schedule.RunsCollection, once, "update") }, false},
		{"dropped connection", func() { emutest.FailCommandDrop(t, st, schedule.RunsCollection, once, "update") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "f-" + tc.name
			rd := &store.RunRecord{Run: schedule.Run{ID: id, ScheduleID: "s", FireTime: t0, Source: schedule.SourceScheduled,
				Status: schedule.RunPending, Attempt: 1, CreatedAt: t0}, SweepAt: t0}
			if ok, err := r.Insert(ctx, rd); err != nil || !ok {
				t.Fatalf("insert: %v, %v", ok, err)
			}
			if err := r.Claim(ctx, id, store.RunClaim{Token: "t", Holder: "h", Epoch: 7, At: t0, SweepAt: t0.Add(time.Minute)}); err != nil {
				t.Fatalf("claim: %v", err)
			}
			tc.inject()
			err := r.Finish(ctx, id, 7, outcome)
			emutest.FailCommandOff(t, st)
			if (err != nil) != tc.fails {
				t.Fatalf("finish under %s = %v; want an error: %v", tc.name, err, tc.fails)
			}
			if err != nil {
				if got, gerr := r.Get(ctx, id); gerr != nil || got.Status != schedule.RunRunning {
					t.Fatalf("after a failed finish: %+v, %v; want the run still running", got, gerr)
				}
				if err := r.Finish(ctx, id, 7, outcome); err != nil {
					t.Fatalf("the next attempt: %v", err)
				}
			}
			got, err := r.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != schedule.RunSucceeded || !got.FinishedAt.Equal(done) || got.Fence != 7 {
				t.Errorf("after finish under %s: status %s, finishedAt %s, fence %d; want succeeded at %s, fence 7", tc.name, got.Status, got.FinishedAt, got.Fence, done)
			}
			// A second finish (a redelivery) changes nothing and is not refused
			// as stale: the outcome is there.
			if err := r.Finish(ctx, id, 7, outcome); err != nil {
				t.Errorf("finish again: %v; want nil (the outcome is there)", err)
			}
		})
	}
}

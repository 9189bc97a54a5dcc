package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestBufferOneSurvivesFailedWrites: buffer_one records a buffered fire in
// two writes, and a misfire's run in two more. The database fails the
// second write of each pair (mongod's failCommand fail point in the
// emulator). The fire still runs, once.
func TestBufferOneSurvivesFailedWrites(t *testing.T) {
	t.Run("setting the flag fails after the run was marked buffered", func(t *testing.T) {
		b := setup(t)
		key, g := newGate(t, 1)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: schedule.OverlapBufferOne, Target: gateTarget(key)})
		scheduler.SetBeforeMisfireWrite(b.eng, func(_, step string) {
			if step == "flag" { // every try fails, retries included
				emutest.FailCommand(t, b.store, schedule.SchedulesCollection, "alwaysOn", "update")
			}
		})
		done := startBlockedTick(t, b, g, 1)
		b.clock.Set(t0.Add(2*time.Minute + time.Second))
		b.tick(t) // 09:02 finds 09:01 still running
		emutest.FailCommandOff(t, b.store)
		if s := b.getSchedule(t, "job"); s.Misfire {
			t.Fatal("misfire flag set, although the fail point refused every try")
		}
		g.open()
		<-done
		// The run went back to the sweep, which waits for the running run
		// it would have overlapped (until that run's heartbeat is due,
		// leaseTTL + skew after the last one) and then runs it.
		b.clock.Set(t0.Add(2*time.Minute + 50*time.Second))
		b.tick(t)
		want := []string{"09:01 scheduled succeeded", "09:02 scheduled succeeded"}
		if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		if got := g.calls.Load(); got != 2 {
			t.Errorf("executions %d, want 2", got)
		}
	})
	t.Run("recording the misfire run fails after the flag was cleared", func(t *testing.T) {
		b := setup(t)
		key, g := newGate(t, 1)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: schedule.OverlapBufferOne, Target: gateTarget(key)})
		failed := false
		scheduler.SetBeforeMisfireWrite(b.eng, func(_, step string) {
			if step == "run" && !failed { // the first misfire insert fails once
				failed = true
				emutest.FailCommand(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "insert")
			}
		})
		done := startBlockedTick(t, b, g, 1)
		b.clock.Set(t0.Add(2*time.Minute + time.Second))
		if sum := b.tick(t); sum.Misfired != 1 {
			t.Fatalf("misfired %d, want 1", sum.Misfired)
		}
		g.open()
		<-done
		if !failed {
			t.Fatal("the misfire run was never recorded: the hook did not run")
		}
		want := []string{"09:01 scheduled succeeded", "09:02 scheduled skipped", "09:02 misfire succeeded"}
		if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		if got := g.calls.Load(); got != 2 {
			t.Errorf("executions %d, want 2 (the long run and one misfire run)", got)
		}
		if s := b.getSchedule(t, "job"); s.Misfire {
			t.Error("misfire flag still set after the misfire ran")
		}
	})
}

// TestBufferOneLostAnswers: the other half of a failed write. With
// retryWrites=false, a write can land while its caller sees an error (the
// emulator's fail point reports a write concern error after the write).
// Undoing or repeating such a write must not run the fire twice.
func TestBufferOneLostAnswers(t *testing.T) {
	for _, tc := range []struct{ name, step, coll, command string }{
		{"the flag write lands but reports an error", "flag", schedule.SchedulesCollection, "update"},
		{"the misfire run insert lands but reports an error", "run", schedule.RunsCollection, "insert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			key, g := newGate(t, 1)
			b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: schedule.OverlapBufferOne, Target: gateTarget(key)})
			armed := false
			scheduler.SetBeforeMisfireWrite(b.eng, func(_, step string) {
				if step == tc.step && !armed {
					armed = true
					emutest.FailCommandAfterWrite(t, b.store, tc.coll, "alwaysOn", tc.command)
				}
			})
			done := startBlockedTick(t, b, g, 1)
			b.clock.Set(t0.Add(2*time.Minute + time.Second))
			b.tick(t)
			if tc.step == "flag" {
				emutest.FailCommandOff(t, b.store)
			}
			g.open()
			<-done
			emutest.FailCommandOff(t, b.store)
			// Whatever went back to the sweep has its chance to run.
			b.clock.Set(t0.Add(2*time.Minute + 50*time.Second))
			b.tick(t)
			if !armed {
				t.Fatal("the fail point was never armed")
			}
			want := []string{"09:01 scheduled succeeded", "09:02 scheduled skipped", "09:02 misfire succeeded"}
			if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
				t.Errorf("runs (-want,+got):\n%s", diff)
			}
			if got := g.calls.Load(); got != 2 {
				t.Errorf("executions %d, want 2 (the long run and one misfire run)", got)
			}
		})
	}
}

// TestMisfireRunIDsDoNotCollide: misfireAt only moves forward ($max), so a
// fire buffered later but older than an earlier misfire's left misfireAt
// where it was. The new misfire run got the earlier one's id, the insert
// found that finished run, and the misfire was silently dropped.
func TestMisfireRunIDsDoNotCollide(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: schedule.OverlapBufferOne, Target: gateTarget(key)})
	// An earlier cycle: a misfire for 09:03 already ran (say, for a
	// manual trigger at 09:03 buffered behind a long run).
	at := t0.Add(3 * time.Minute)
	earlier := bson.D{{Key: "_id", Value: schedule.RunID("job", at, schedule.SourceMisfire, 1)}, {Key: "scheduleId", Value: "job"},
		{Key: "fireTime", Value: at}, {Key: "source", Value: schedule.SourceMisfire}, {Key: "status", Value: schedule.RunSucceeded},
		{Key: "attempt", Value: 1}, {Key: "createdAt", Value: at}}
	if _, err := b.store.Collection(schedule.RunsCollection).InsertIdempotent(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Collection(schedule.SchedulesCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: "job"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "misfireAt", Value: at}}}}); err != nil {
		t.Fatal(err)
	}
	// Another holder has the job lease when 09:01 fires: 09:01 is
	// buffered, and misfireAt stays at 09:03.
	l, err := b.leases.Acquire(ctx, scheduler.JobLease("job"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// ...running an earlier run under it, which is what makes 09:01 an
	// overlap (a holder that runs nothing is waited for instead).
	running := bson.D{{Key: "_id", Value: "job@earlier"}, {Key: "scheduleId", Value: "job"}, {Key: "fireTime", Value: t0},
		{Key: "source", Value: schedule.SourceScheduled}, {Key: "status", Value: schedule.RunRunning}, {Key: "attempt", Value: 1},
		{Key: "createdAt", Value: t0}, {Key: "epoch", Value: l.Epoch()}}
	if _, err := b.store.Collection(schedule.RunsCollection).InsertIdempotent(ctx, running); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(time.Minute + time.Second))
	if sum := b.tick(t); sum.Misfired != 1 {
		t.Fatalf("09:01 misfired %d, want 1", sum.Misfired)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// 09:02 runs, and its holder takes the misfire before releasing: a
	// new run, under its own id. 09:02 has started, so the misfire run (an
	// older fire time) is folded into it and recorded skipped, not run
	// after it (the order rule).
	b.clock.Set(t0.Add(2*time.Minute + time.Second))
	b.tick(t)
	if got := g.calls.Load(); got != 1 {
		t.Errorf("executions %d, want 1 (09:02; the misfire run is folded into it)", got)
	}
	var misfires []string
	for _, r := range b.runs(t, "job") {
		if r.Source == schedule.SourceMisfire {
			misfires = append(misfires, r.ID+" "+string(r.Status))
			if r.ID != schedule.RunID("job", at, schedule.SourceMisfire, 1) && !strings.Contains(r.Reason, scheduler.ReasonSuperseded) {
				t.Errorf("new misfire run %s: reason %q, want it folded into 09:02", r.ID, r.Reason)
			}
		}
	}
	if len(misfires) != 2 {
		t.Errorf("misfire runs %v, want the earlier one and a new one", misfires)
	}
}

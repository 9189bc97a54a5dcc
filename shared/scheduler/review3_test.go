package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/store/mongostore"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// taskRecorder is a Dispatcher that refuses while down and otherwise keeps
// the tasks it is given, for the test to deliver through Engine.Execute as
// Run would.
type taskRecorder struct {
	down atomic.Bool
	mu   sync.Mutex
	got  []scheduler.Task
}

func (r *taskRecorder) Dispatch(_ context.Context, t scheduler.Task) error {
	if r.down.Load() {
		return errors.New("queue down")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, t)
	return nil
}

func (r *taskRecorder) tasks() []scheduler.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]scheduler.Task(nil), r.got...)
}

// deliver executes every recorded task as Run would, and fails the test on
// an error.
func (r *taskRecorder) deliver(t *testing.T, b *bundle) {
	t.Helper()
	for _, task := range r.tasks() {
		if _, err := b.eng.Execute(context.Background(), task, nil); err != nil {
			t.Fatalf("execute %+v: %v", task, err)
		}
	}
}

// TestLastCountedRunExecutesThroughRun: the decision that spends the last
// of remainingRuns disables the schedule in the same write; Run, finding
// the schedule disabled, must still execute that last decided run (it is
// the schedule's end, not an operator's pause).
func TestLastCountedRunExecutesThroughRun(t *testing.T) {
	t.Parallel()
	rec := &taskRecorder{}
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec })
	one := int64(1)
	addBounded(t, b, schedule.Schedule{ID: "once", Cron: "* * * * *", RemainingRuns: &one,
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	if sum := b.tick(t); sum.Decided != 1 || sum.Enqueued != 1 {
		t.Fatalf("tick: %+v", sum)
	}
	if got := b.getSchedule(t, "once"); got.Enabled {
		t.Fatalf("the schedule is still enabled after its last run was decided")
	}
	rec.deliver(t, b)
	runs := b.runs(t, "once")
	if len(runs) != 1 || runs[0].Status != schedule.RunSucceeded {
		t.Errorf("runs %+v; want the one decided run succeeded", runs)
	}
}

// TestRunsBeforeEndAtExecuteThroughRun: a catch-up decision whose last fire
// is the last before endAt disables the schedule; every run it decided
// executes, the earlier ones too.
func TestRunsBeforeEndAtExecuteThroughRun(t *testing.T) {
	t.Parallel()
	rec := &taskRecorder{}
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec })
	addBounded(t, b, schedule.Schedule{ID: "window", Cron: "* * * * *", Catchup: schedule.CatchupAll,
		EndAt:  t0.Add(3*time.Minute + 30*time.Second),
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(3*time.Minute + time.Second))
	if sum := b.tick(t); sum.Decided != 3 {
		t.Fatalf("tick: %+v", sum)
	}
	if got := b.getSchedule(t, "window"); got.Enabled {
		t.Fatalf("the schedule is still enabled after its endAt")
	}
	rec.deliver(t, b)
	runs := b.runs(t, "window")
	if len(runs) != 3 {
		t.Fatalf("%d runs; want 3", len(runs))
	}
	for _, r := range runs {
		if r.Status != schedule.RunSucceeded {
			t.Errorf("run %s: %s (%s); want succeeded", r.ID, r.Status, r.Reason)
		}
	}
}

// TestRecoveryRunsTheLastCountedRun: the sweep's recovery of a last
// counted run whose task was lost hands it off again, and it executes; it
// is not recorded skipped as paused.
func TestRecoveryRunsTheLastCountedRun(t *testing.T) {
	t.Parallel()
	rec := &taskRecorder{}
	rec.down.Store(true)
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec })
	one := int64(1)
	addBounded(t, b, schedule.Schedule{ID: "once", Cron: "0 * * * *", RemainingRuns: &one,
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(time.Hour + time.Second))
	if sum := b.tick(t); sum.Decided != 1 || sum.Enqueued != 0 {
		t.Fatalf("tick: %+v", sum)
	}
	rec.down.Store(false)
	b.clock.Set(t0.Add(time.Hour + 3*time.Minute))
	b.tick(t)
	if runs := b.runs(t, "once"); len(runs) != 1 || runs[0].Status != schedule.RunPending {
		t.Fatalf("runs %+v; want the run still pending, handed off again", runs)
	}
	rec.deliver(t, b)
	if runs := b.runs(t, "once"); len(runs) != 1 || runs[0].Status != schedule.RunSucceeded {
		t.Errorf("runs %+v; want the run succeeded", runs)
	}
}

// TestPauseStillSkipsTheLastCountedRun: an operator's pause (pausedAt set)
// after the decision that spent the last of remainingRuns still skips the
// pending run: only the schedule's own end keeps a disabled schedule's
// decided runs.
func TestPauseStillSkipsTheLastCountedRun(t *testing.T) {
	t.Parallel()
	rec := &taskRecorder{}
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec })
	one := int64(1)
	addBounded(t, b, schedule.Schedule{ID: "once", Cron: "* * * * *", RemainingRuns: &one,
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	b.tick(t)
	if err := b.store.Collection(schedule.SchedulesCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "once"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "enabled", Value: false}, {Key: "pausedBy", Value: "local"}, {Key: "pausedAt", Value: b.clock.Now()}}}}); err != nil {
		t.Fatal(err)
	}
	rec.deliver(t, b)
	if runs := b.runs(t, "once"); len(runs) != 1 || runs[0].Status != schedule.RunSkipped {
		t.Errorf("runs %+v; want the run skipped: the schedule was paused", runs)
	}
}

// setupFloored is setup with the deployment's lease options: the epoch
// floor from the store, as functions and the daemon configure it.
func setupFloored(t *testing.T) *bundle {
	t.Helper()
	s := emutest.Store(t)
	client, bucket := emutest.SimulatedTimeGCS(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "test-" + t.Name(), ObjectWriteGap: -1,
		EpochFloor: scheduler.EpochFloor(s), FloorEachAcquire: scheduler.SharedFenceLease})
	c := newClock(t0)
	e, err := scheduler.New(scheduler.Config{Store: s, Leases: m, Clock: c, TickLeaseTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	return &bundle{store: s, leases: m, clock: c, eng: e}
}

// TestPartitionsOffAgainKeepsDeciding: BATON_PARTITIONS set and then unset
// again. The single tick lease (leases/tick.json) still exists from before
// partitions, at the epoch it had then; the decider shards' leases wrote
// higher fences on the schedules meanwhile. The single tick must not be
// refused by those fences as if a newer tick had advanced the schedule:
// its runs would be undone every minute, until its epoch caught up. And
// back again: the shards' leases must not be fenced out by the single
// tick's.
func TestPartitionsOffAgainKeepsDeciding(t *testing.T) {
	t.Parallel()
	b := setupFloored(t)
	b.addSchedule(t, schedule.Schedule{ID: "m", Cron: "* * * * *", Overlap: schedule.OverlapAllow,
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	minute := 0
	step := func(partitioned bool) {
		t.Helper()
		minute++
		b.clock.Set(t0.Add(time.Duration(minute)*time.Minute + time.Second))
		var err error
		if partitioned {
			_, err = b.eng.TickPartition(context.Background(), time.Time{}, 0, 1)
		} else {
			_, err = b.eng.Tick(context.Background(), time.Time{})
		}
		b.eng.Wait()
		if err != nil {
			t.Fatalf("minute %d (partitioned %v): %v", minute, partitioned, err)
		}
		got := b.getSchedule(t, "m")
		if want := t0.Add(time.Duration(minute+1) * time.Minute); !got.NextRunAt.Equal(want) {
			t.Fatalf("minute %d (partitioned %v): nextRunAt %s; want %s", minute, partitioned, got.NextRunAt, want)
		}
	}
	step(false)
	for range 3 {
		step(true)
	}
	for range 2 {
		step(false)
	}
	step(true)
	runs := b.runs(t, "m")
	if len(runs) != minute {
		t.Fatalf("%d runs; want %d", len(runs), minute)
	}
	for _, r := range runs {
		if r.Status != schedule.RunSucceeded {
			t.Errorf("run %s: %s (%s); want succeeded", r.ID, r.Status, r.Reason)
		}
	}
}

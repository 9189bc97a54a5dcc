package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestLeaseResetDoesNotStallFencedWrites: the lease objects are deleted
// mid-life (a break by hand, a lifecycle rule, a new bucket, a restarted
// emulator) while the database keeps the fences their epochs wrote. The
// next tick and the next run must still get epochs above those fences.
// Before EpochFloor, the tick lease started again at epoch 1, every advance
// was refused with "stored fence N > epoch 1: stale fencing token", and
// nothing fired until the epoch caught up, one tick at a time.
func TestLeaseResetDoesNotStallFencedWrites(t *testing.T) {
	t.Parallel()
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	ctx := context.Background()
	if err := s.EnsureIndexes(ctx, mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "h", EpochFloor: scheduler.EpochFloor(s)})
	c := newClock(t0)
	e, err := scheduler.New(scheduler.Config{Store: s, Leases: m, Clock: c, TickLeaseTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	b := &bundle{store: s, leases: m, clock: c, eng: e}
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "m", Cron: "* * * * *", Target: gateTarget(key)})
	// Several ticks and runs: the tick lease's epoch, and the job
	// lease's, climb above 1.
	var epoch int64
	for i := 1; i <= 4; i++ {
		c.Set(t0.Add(time.Duration(i)*time.Minute + time.Second))
		epoch = b.tick(t).Epoch
	}
	if epoch < 4 {
		t.Fatalf("tick epoch %d after 4 ticks, want it to have climbed", epoch)
	}
	runs := b.runs(t, "m")
	jobEpoch := runs[len(runs)-1].Epoch
	// The lease store forgets.
	for _, name := range []string{scheduler.TickLease, scheduler.JobLease("m")} {
		if err := client.Bucket(bucket).Object(m.ObjectName(name)).Delete(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Set(t0.Add(5*time.Minute + time.Second))
	sum := b.tick(t)
	if sum.Epoch <= epoch || sum.Errors != 0 || sum.Decided != 1 || sum.Fired != 1 || sum.Succeeded != 1 {
		t.Errorf("tick after the reset: %+v, want epoch above %d, the fire decided and run, no errors", sum, epoch)
	}
	if s := b.getSchedule(t, "m"); !s.NextRunAt.Equal(t0.Add(6 * time.Minute)) {
		t.Errorf("nextRunAt %s after the reset, want 09:06: the fenced advance was refused", s.NextRunAt)
	}
	runs = b.runs(t, "m")
	if last := runs[len(runs)-1]; last.Epoch <= jobEpoch || last.Status != schedule.RunSucceeded {
		t.Errorf("run after the reset: epoch %d, %s; want above %d and succeeded", last.Epoch, last.Status, jobEpoch)
	}
	if n := g.calls.Load(); n != 5 {
		t.Errorf("target ran %d times for 5 fire times", n)
	}
}

// TestDeciderShardLeaseStartsAboveTheTickFence: the migration to
// partitions. Schedules were advanced under leases/tick.json up to some
// epoch; the first partitioned tick finds no leases/tick-<v>.json, and its
// shard lease must start above that fence, or every advance would be
// refused as stale until the new epoch caught up.
func TestDeciderShardLeaseStartsAboveTheTickFence(t *testing.T) {
	t.Parallel()
	s := emutest.Store(t)
	client, bucket := emutest.SimulatedTimeGCS(t)
	ctx := context.Background()
	if err := s.EnsureIndexes(ctx, mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "h", ObjectWriteGap: -1, EpochFloor: scheduler.EpochFloor(s)})
	c := newClock(t0)
	e, err := scheduler.New(scheduler.Config{Store: s, Leases: m, Clock: c, TickLeaseTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	b := &bundle{store: s, leases: m, clock: c, eng: e}
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "m", Cron: "* * * * *", Target: gateTarget(key)})
	var epoch int64
	for i := 1; i <= 3; i++ {
		c.Set(t0.Add(time.Duration(i)*time.Minute + time.Second))
		epoch = b.tick(t).Epoch
	}
	if fence := b.getSchedule(t, "m").Fence; fence != epoch || epoch < 3 {
		t.Fatalf("fence %d after 3 unpartitioned ticks at epoch %d", fence, epoch)
	}
	c.Set(t0.Add(4*time.Minute + time.Second))
	sum, err := e.TickPartition(ctx, t0.Add(4*time.Minute), 0, 1)
	if err != nil || sum.Decided != 1 || sum.Errors != 0 {
		t.Fatalf("first partitioned tick: %+v, %v; want the fire decided", sum, err)
	}
	got := b.getSchedule(t, "m")
	if !got.NextRunAt.Equal(t0.Add(5*time.Minute)) || got.Fence <= epoch {
		t.Errorf("after the first partitioned tick: nextRunAt %s, fence %d; want 09:05 and a fence above %d", got.NextRunAt, got.Fence, epoch)
	}
	if n := g.calls.Load(); n != 4 {
		t.Errorf("target ran %d times for 4 fire times", n)
	}
}

package scheduler_test

// A coordinating tick that decides a quiet minute itself
// (Config.InlineShards): no partition task when few decider shards have
// something due, the partition tasks when more do, and the partition tasks
// after all when the inline decide fails.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// busyShardsOf is how many decider shards the rig's first n schedules
// (addSchedules' ids) fall into.
func busyShardsOf(n int) int {
	seen := map[int]bool{}
	for i := range n {
		seen[schedule.DeciderShardOf(fmt.Sprintf("every-minute-%05d", i), schedule.DeciderShards())] = true
	}
	return len(seen)
}

// inlineCoordinator is a coordinating engine of the rig that creates its
// partition tasks in rec and decides at most inline busy shards itself.
func inlineCoordinator(t *testing.T, r *partitionRig, rec *recorder, inline int) *scheduler.Engine {
	t.Helper()
	e, err := scheduler.New(scheduler.Config{Store: r.store, Leases: r.leases["coord"], Clock: r.clock,
		Partitions: rec, InlineShards: inline, AllowedTargets: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	return e
}

// checkOncePerSchedule fails unless each of the rig's n schedules had
// exactly one run at fire, called once, and moved on to the next minute.
func checkOncePerSchedule(t *testing.T, r *partitionRig, n int, fire time.Time) {
	t.Helper()
	var runs []struct {
		ID         string    `bson:"_id"`
		ScheduleID string    `bson:"scheduleId"`
		FireTime   time.Time `bson:"fireTime"`
	}
	if err := r.store.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{}, &runs); err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, run := range runs {
		if !run.FireTime.Equal(fire) {
			t.Errorf("run %s fires at %s, want %s", run.ID, run.FireTime, fire)
		}
		per[run.ScheduleID]++
	}
	if len(per) != n {
		t.Errorf("%d schedules have a run, want %d", len(per), n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, run := range runs {
		if per[run.ScheduleID] != 1 || r.calls[run.ID] != 1 {
			t.Errorf("schedule %s: %d runs; run %s called %d times; want 1 and 1", run.ScheduleID, per[run.ScheduleID], run.ID, r.calls[run.ID])
		}
	}
	if k, err := r.store.Collection(schedule.SchedulesCollection).Count(context.Background(), bson.D{{Key: "nextRunAt", Value: bson.D{{Key: "$ne", Value: fire.Add(time.Minute)}}}}); err != nil || k != 0 {
		t.Errorf("%d schedules (%v) not at nextRunAt %s", k, err, fire.Add(time.Minute))
	}
}

// TestCoordinateDecidesAQuietMinuteInline: with three schedules due, the
// coordinator decides them itself and creates no partition task; the tick
// duplicated (two coordinators at once, as Cloud Scheduler's at-least-once
// delivery may) still runs each fire time once. Without the inline branch
// P partition tasks are created and nothing is decided.
func TestCoordinateDecidesAQuietMinuteInline(t *testing.T) {
	const n, P = 3, 8
	r := newPartitionRig(t, "coord")
	r.addSchedules(t, n, schedule.OverlapAllow)
	rec := &recorder{}
	coord := inlineCoordinator(t, r, rec, 16)
	fire := t0.Add(time.Minute)
	r.clock.Set(fire.Add(time.Second))
	var (
		wg   sync.WaitGroup
		sums [2]*scheduler.CoordinateSummary
		errs [2]error
	)
	for i := range sums {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = coord.Coordinate(context.Background(), fire, P)
		}()
	}
	wg.Wait()
	coord.Wait()
	if tasks := rec.take(); len(tasks) != 0 {
		t.Errorf("%d partition tasks created for %d busy shards; want none", len(tasks), busyShardsOf(n))
	}
	decided := 0
	for i, sum := range sums {
		if errs[i] != nil {
			t.Fatalf("coordinator %d: %v", i, errs[i])
		}
		if sum.BusyShards == nil || *sum.BusyShards > busyShardsOf(n) || len(sum.Inline) != 1 || sum.InlineError != "" {
			t.Fatalf("coordinator %d: summary %+v; want %d busy shards (or fewer, after the other decided) and one inline summary", i, sum, busyShardsOf(n))
		}
		decided += sum.Inline[0].Decided
	}
	if decided != n {
		t.Errorf("the two coordinators decided %d schedules in all, want %d", decided, n)
	}
	checkOncePerSchedule(t, r, n, fire)
}

// TestCoordinateFansOutPastInlineShards: with more busy shards than
// InlineShards, the coordinator decides nothing and creates the P
// partition tasks, which decide every schedule once.
func TestCoordinateFansOutPastInlineShards(t *testing.T) {
	const n, P = 12, 4
	if busyShardsOf(n) < 3 {
		t.Fatalf("the %d schedules fall into %d decider shards; the test needs at least 3", n, busyShardsOf(n))
	}
	r := newPartitionRig(t, "coord", "a")
	r.addSchedules(t, n, schedule.OverlapAllow)
	rec := &recorder{}
	coord := inlineCoordinator(t, r, rec, 2)
	fire := t0.Add(time.Minute)
	r.clock.Set(fire.Add(time.Second))
	sum, err := coord.Coordinate(context.Background(), fire, P)
	if err != nil {
		t.Fatal(err)
	}
	if sum.BusyShards == nil || *sum.BusyShards <= 2 || len(sum.Inline) != 0 {
		t.Fatalf("summary %+v; want more than 2 busy shards and nothing decided inline", sum)
	}
	tasks := rec.take()
	if len(tasks) != P {
		t.Fatalf("%d partition tasks, want %d", len(tasks), P)
	}
	if k, err := r.store.Collection(schedule.RunsCollection).Count(context.Background(), bson.D{}); err != nil || k != 0 {
		t.Fatalf("the coordinator recorded %d runs (%v) before any partition ran", k, err)
	}
	for _, task := range tasks {
		if _, err := r.engines["a"].TickPartition(context.Background(), task.ScheduleTime, task.Partition, task.Partitions); err != nil {
			t.Fatal(err)
		}
	}
	r.engines["a"].Wait()
	checkOncePerSchedule(t, r, n, fire)
}

// TestInlineFailureCreatesThePartitions: the inline decide stops at its
// second schedule (an insert that fails); the coordinator then creates
// the partition tasks, whose deliveries decide what is still due. No fire
// time is lost and none runs twice. Without the fallback the coordinator
// returns with the failed shard's schedule undecided until the next
// minute.
func TestInlineFailureCreatesThePartitions(t *testing.T) {
	const n, P = 4, 2
	r := newPartitionRig(t, "coord", "a")
	r.addSchedules(t, n, schedule.OverlapAllow)
	rec := &recorder{}
	coord := inlineCoordinator(t, r, rec, 16)
	var inserts atomic.Int64
	scheduler.SetBeforeInsert(coord, func(id string) error {
		if inserts.Add(1) == 2 {
			return errors.New("injected: the store is gone for a moment")
		}
		return nil
	})
	fire := t0.Add(time.Minute)
	r.clock.Set(fire.Add(time.Second))
	sum, err := coord.Coordinate(context.Background(), fire, P)
	if err != nil {
		t.Fatal(err)
	}
	coord.Wait()
	if sum.InlineError == "" || sum.Created != P {
		t.Fatalf("summary %+v; want the inline decide's error and %d partition tasks", sum, P)
	}
	for _, task := range rec.take() {
		if _, err := r.engines["a"].TickPartition(context.Background(), task.ScheduleTime, task.Partition, task.Partitions); err != nil {
			t.Fatal(err)
		}
	}
	r.engines["a"].Wait()
	checkOncePerSchedule(t, r, n, fire)
}

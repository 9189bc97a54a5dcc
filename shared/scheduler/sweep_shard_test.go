package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// runReads is the run documents the store has returned so far (the meter
// counts each document a query or a lookup of runs returned).
func runReads(r *partitionRig) int64 {
	var n int64
	for op, c := range r.store.Meter().Snapshot() {
		if strings.HasPrefix(op, schedule.RunsCollection+".") {
			n += c
		}
	}
	return n
}

// TestPartitionSweepsItsOwnShards: each partition sweeps the runs of its
// own decider shards. A run left pending by a tick that died (its sweepAt
// passed) in shard v is not read by the partitions that do not own v, and
// the partition that owns v (v mod P) recovers and executes it, once. A
// run stored before runs carried a shard (no vshard) is swept by
// partition 0. On the strict emulators.
func TestPartitionSweepsItsOwnShards(t *testing.T) {
	t.Parallel()
	const P = 4
	r := newPartitionRig(t, "a")
	ctx := context.Background()
	// A schedule whose shard is not partition 0's, so that the legacy run
	// (partition 0's) and the stuck run have different owners.
	var id string
	var v int
	for i := 0; ; i++ {
		id = fmt.Sprintf("stuck-%d", i)
		if v = schedule.DeciderShardOf(id, schedule.DeciderShards()); v%P != 0 {
			break
		}
	}
	r.oneSchedule(t, id, schedule.CatchupLatest) // due at t0+1m: nothing to decide before
	r.oneSchedule(t, "legacy", schedule.CatchupLatest)
	stuck := schedule.RunID(id, t0, schedule.SourceScheduled, 1)
	rd := &store.RunRecord{Run: schedule.Run{ID: stuck, ScheduleID: id, FireTime: t0, Source: schedule.SourceScheduled,
		Status: schedule.RunPending, Attempt: 1, CreatedAt: t0}, SweepAt: t0.Add(time.Second)}
	if ok, err := r.store.Runs().Insert(ctx, rd); err != nil || !ok {
		t.Fatalf("insert the stuck run: %v %v", ok, err)
	}
	legacy := schedule.RunID("legacy", t0, schedule.SourceScheduled, 1)
	if ok, err := r.store.Collection(schedule.RunsCollection).InsertIdempotent(ctx, bson.D{{Key: "_id", Value: legacy},
		{Key: "scheduleId", Value: "legacy"}, {Key: "fireTime", Value: t0}, {Key: "source", Value: "scheduled"},
		{Key: "status", Value: "pending"}, {Key: "attempt", Value: 1}, {Key: "createdAt", Value: t0}, {Key: "fence", Value: 0},
		{Key: "sweepAt", Value: t0.Add(time.Second)}}); err != nil || !ok {
		t.Fatalf("insert the run without vshard: %v %v", ok, err)
	}
	r.clock.Set(t0.Add(30 * time.Second))
	status := func(id string) schedule.RunStatus {
		t.Helper()
		got, err := r.store.Runs().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	owner := v % P
	for p := range P {
		if p == owner || p == 0 {
			continue
		}
		before := runReads(r)
		if _, err := r.engines["a"].TickPartition(ctx, t0, p, P); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		if got := runReads(r) - before; got != 0 {
			t.Errorf("partition %d (not the owner of shard %d, nor partition 0) read %d run documents; want 0", p, v, got)
		}
		if st := status(stuck); st != schedule.RunPending {
			t.Errorf("after partition %d: the stuck run of shard %d is %s; want pending (not its shard)", p, v, st)
		}
	}
	if _, err := r.engines["a"].TickPartition(ctx, t0, 0, P); err != nil {
		t.Fatalf("partition 0: %v", err)
	}
	r.engines["a"].Wait()
	if st := status(stuck); st != schedule.RunPending {
		t.Errorf("after partition 0: the stuck run of shard %d is %s; want pending (partition %d's)", v, st, owner)
	}
	if st := status(legacy); st != schedule.RunSucceeded {
		t.Errorf("after partition 0: the run without a shard is %s; want succeeded (partition 0 sweeps them)", st)
	}
	if _, err := r.engines["a"].TickPartition(ctx, t0, owner, P); err != nil {
		t.Fatalf("partition %d: %v", owner, err)
	}
	r.engines["a"].Wait()
	if st := status(stuck); st != schedule.RunSucceeded {
		t.Errorf("after partition %d, the owner of shard %d: the stuck run is %s; want succeeded", owner, v, st)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls[stuck] != 1 || r.calls[legacy] != 1 {
		t.Errorf("target calls: stuck %d, legacy %d; want 1 each", r.calls[stuck], r.calls[legacy])
	}
}

// TestUnpartitionedTickSweepsEveryShard: the unpartitioned tick (one tick
// lease) sweeps the runs of every decider shard and those without one.
func TestUnpartitionedTickSweepsEveryShard(t *testing.T) {
	t.Parallel()
	r := newPartitionRig(t, "a")
	ctx := context.Background()
	var ids []string
	seen := map[int]bool{}
	for i := 0; len(ids) < 3; i++ {
		id := fmt.Sprintf("s-%d", i)
		if v := schedule.DeciderShardOf(id, schedule.DeciderShards()); !seen[v] {
			seen[v] = true
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		r.oneSchedule(t, id, schedule.CatchupLatest)
		rd := &store.RunRecord{Run: schedule.Run{ID: schedule.RunID(id, t0, schedule.SourceScheduled, 1), ScheduleID: id, FireTime: t0,
			Source: schedule.SourceScheduled, Status: schedule.RunPending, Attempt: 1, CreatedAt: t0}, SweepAt: t0.Add(time.Second)}
		if ok, err := r.store.Runs().Insert(ctx, rd); err != nil || !ok {
			t.Fatalf("insert: %v %v", ok, err)
		}
	}
	r.clock.Set(t0.Add(30 * time.Second))
	if _, err := r.engines["a"].Tick(ctx, t0); err != nil {
		t.Fatal(err)
	}
	r.engines["a"].Wait()
	for _, id := range ids {
		rid := schedule.RunID(id, t0, schedule.SourceScheduled, 1)
		got, err := r.store.Runs().Get(ctx, rid)
		if err != nil || got.Status != schedule.RunSucceeded {
			t.Errorf("run %s (shard %d): %v, %v; want succeeded", rid, got.DeciderShard, got.Status, err)
		}
	}
}

package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// TestBackfillDeciderShards: schedules stored before decider shards (no
// vshard) or under another V get DeciderShardOf(id, v); a second pass
// writes nothing, so the backfill is safe to run on every deploy.
func TestBackfillDeciderShards(t *testing.T) {
	t.Parallel()
	st := emutest.Store(t)
	ctx := context.Background()
	c := st.Collection(schedule.SchedulesCollection)
	for i := range 25 {
		doc := bson.D{{Key: "_id", Value: fmt.Sprintf("old-%02d", i)}, {Key: "enabled", Value: true}}
		if i%5 == 0 {
			doc = append(doc, bson.E{Key: "vshard", Value: 1000}) // stored under another V
		}
		if i == 7 {
			doc = append(doc, bson.E{Key: "vshard", Value: schedule.DeciderShardOf("old-07", 64)}) // already right
		}
		if ok, err := c.InsertIdempotent(ctx, doc); err != nil || !ok {
			t.Fatalf("insert: %v %v", ok, err)
		}
	}
	n, err := st.BackfillDeciderShards(ctx, 64, 4)
	if err != nil || n != 24 {
		t.Fatalf("first backfill = %d, %v; want 24 written (all but old-07)", n, err)
	}
	for i := range 25 {
		id := fmt.Sprintf("old-%02d", i)
		var got struct {
			VShard *int `bson:"vshard"`
		}
		if err := c.Get(ctx, id, &got); err != nil {
			t.Fatal(err)
		}
		if got.VShard == nil || *got.VShard != schedule.DeciderShardOf(id, 64) {
			t.Errorf("%s: vshard %v; want %d", id, got.VShard, schedule.DeciderShardOf(id, 64))
		}
	}
	if n, err := st.BackfillDeciderShards(ctx, 64, 4); err != nil || n != 0 {
		t.Errorf("second backfill = %d, %v; want 0 written", n, err)
	}
}

// TestRunsWithoutDeciderShard: a run stored before runs carried vshard
// (the field missing) is still found where it must be: the sweep reads it
// as store.LegacyRuns (and not as any shard), and the runs list, which
// merges the decider shards, lists it in its place, newest first.
func TestRunsWithoutDeciderShard(t *testing.T) {
	t.Parallel()
	st := emutest.Store(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	old := bson.D{{Key: "_id", Value: "old@1"}, {Key: "scheduleId", Value: "old"}, {Key: "fireTime", Value: t0.Add(time.Minute)},
		{Key: "source", Value: "scheduled"}, {Key: "status", Value: "pending"}, {Key: "attempt", Value: 1},
		{Key: "createdAt", Value: t0}, {Key: "fence", Value: 0}, {Key: "sweepAt", Value: t0}}
	if ok, err := st.Collection(schedule.RunsCollection).InsertIdempotent(ctx, old); err != nil || !ok {
		t.Fatalf("insert a run without vshard: %v %v", ok, err)
	}
	for i, ft := range []time.Time{t0, t0.Add(2 * time.Minute)} {
		rd := &store.RunRecord{Run: schedule.Run{ID: fmt.Sprintf("new@%d", i), ScheduleID: fmt.Sprintf("new-%d", i), FireTime: ft,
			Source: schedule.SourceScheduled, Status: schedule.RunPending, Attempt: 1, CreatedAt: t0}, SweepAt: t0}
		if ok, err := st.Runs().Insert(ctx, rd); err != nil || !ok {
			t.Fatalf("insert: %v %v", ok, err)
		}
	}
	got, err := st.Runs().Stale(ctx, []int{store.LegacyRuns}, schedule.RunPending, t0, 10)
	if err != nil || len(got) != 1 || got[0].ID != "old@1" {
		t.Fatalf("stale runs without a shard = %v, %v; want old@1 alone", got, err)
	}
	for v := range schedule.DeciderShards() {
		got, err := st.Runs().Stale(ctx, []int{v}, schedule.RunPending, t0, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if r.ID == "old@1" {
				t.Errorf("shard %d swept the run without a shard", v)
			}
		}
	}
	var ids []string
	token := ""
	for {
		page, next, err := st.Catalog().ListAllRuns(ctx, store.RunFilter{}, 2, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			ids = append(ids, r.ID)
		}
		if next == "" {
			break
		}
		token = next
	}
	if want := "[new@1 old@1 new@0]"; fmt.Sprint(ids) != want {
		t.Errorf("runs list = %v; want %s (newest first, the run without a shard in its place)", ids, want)
	}
}

// TestDueWalksEveryShardAndTheUnsharded: with no unsharded due index, the
// unpartitioned Due walks the decider shards one by one and then the
// schedules without vshard (stored before decider shards, not yet
// backfilled), each due schedule once across pages; NextDue is the
// earliest of them all, the unsharded one included.
func TestDueWalksEveryShardAndTheUnsharded(t *testing.T) {
	t.Parallel()
	st := emutest.Store(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	c := st.Collection(schedule.SchedulesCollection)
	want := map[string]bool{}
	for i := range 9 {
		id := fmt.Sprintf("due-%d", i)
		doc := bson.D{{Key: "_id", Value: id}, {Key: "enabled", Value: true}, {Key: "nextRunAt", Value: t0.Add(time.Duration(i) * time.Second)}}
		if i != 0 { // due-0, the earliest, has no vshard
			doc = append(doc, bson.E{Key: "vshard", Value: schedule.DeciderShardOf(id, schedule.DeciderShards())})
		}
		if ok, err := c.InsertIdempotent(ctx, doc); err != nil || !ok {
			t.Fatalf("insert: %v %v", ok, err)
		}
		want[id] = true
	}
	seen := map[string]int{}
	token := ""
	for pages := 0; ; pages++ {
		if pages > 200 {
			t.Fatal("Due never ended")
		}
		page, next, err := st.Schedules().Due(ctx, t0.Add(time.Minute), 2, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page {
			seen[s.ID]++
		}
		if next == "" {
			break
		}
		token = next
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s returned %d times; want once", id, seen[id])
		}
	}
	at, ok, err := st.Schedules().NextDue(ctx)
	if err != nil || !ok || !at.Equal(t0) {
		t.Errorf("NextDue = %s, %v, %v; want %s (due-0, without vshard)", at, ok, err, t0)
	}
}

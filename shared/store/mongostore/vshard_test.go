package mongostore_test

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
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

package mongostore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/store"
)

// TestMeterCountsWrites: every write that lands counts one document per
// document it wrote, under its own operation; a write refused by its
// condition, or a duplicate insert, writes nothing and counts nothing; and
// writes never show up among the reads, which the scheduler sums per
// collection.
func TestMeterCountsWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := emutest.Store(t)
	m := s.Meter()
	m.Reset()
	c := s.Collection("w")
	set := func(n int) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: n}}}} }
	for _, id := range []string{"a", "b"} {
		if _, err := c.InsertIdempotent(ctx, job{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := c.InsertIdempotent(ctx, job{ID: "a"}); err != nil || ok {
		t.Fatalf("duplicate insert = %v, %v", ok, err)
	}
	if err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, set(1)); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 9}}, set(2)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update = %v, want ErrConflict", err)
	}
	if err := c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "a"}}, store.Fence{Epoch: 2}, set(3)); err != nil {
		t.Fatal(err)
	}
	if err := c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "a"}}, store.Fence{Epoch: 1}, set(4)); !errors.Is(err, store.ErrStaleFence) {
		t.Fatalf("stale fence = %v, want ErrStaleFence", err)
	}
	var after job
	if err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "b"}}, set(5), &after); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "b"}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second delete = %v, want ErrConflict", err)
	}
	// Writes through the raw driver handle are not metered.
	if _, err := emutest.Raw(t, s).Collection(c.Name()).InsertOne(ctx, job{ID: "raw"}); err != nil {
		t.Fatal(err)
	}

	want := map[string]int64{"w.insert": 2, "w.update": 1, "w.fencedUpdate": 1, "w.findAndModify": 1, "w.delete": 1}
	if diff := cmp.Diff(want, m.WriteSnapshot()); diff != "" {
		t.Errorf("writes per operation (-want,+got):\n%s", diff)
	}
	if got := m.Writes(); got != 6 {
		t.Errorf("Writes() = %d, want 6", got)
	}
	if got := m.WriteOp("w.insert"); got != 2 {
		t.Errorf(`WriteOp("w.insert") = %d, want 2`, got)
	}
	// Reads: the find-and-update's returned document, and the stale
	// fence's diagnostic read. No write counted as a read.
	wantReads := map[string]int64{"w.findAndModify": 1, "w.fenceCheck": 1}
	if diff := cmp.Diff(wantReads, m.Snapshot()); diff != "" {
		t.Errorf("reads per operation (-want,+got):\n%s", diff)
	}
	if got := m.Total(); got != 2 {
		t.Errorf("Total() = %d reads, want 2", got)
	}
	m.Reset()
	if m.Writes() != 0 || len(m.WriteSnapshot()) != 0 || m.Total() != 0 {
		t.Errorf("after Reset: %d writes %v, %d reads", m.Writes(), m.WriteSnapshot(), m.Total())
	}
}

package storetest

import (
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// fence: FencedUpdate refuses a holder whose lease epoch is older than the
// one stored, allows the same holder again, and lets a newer holder in and
// records its epoch. A miss for any other reason is a plain conflict: the
// caller of a stale write stops, the caller of a conflict re-reads.
func (s *suite) fence(t *testing.T) {
	// fenced is a collection with document x written under epoch 5.
	fenced := func(t *testing.T) *mongostore.Collection {
		t.Helper()
		_, c := s.coll(t)
		insert(t, c, doc{ID: "x"})
		if err := c.FencedUpdate(t.Context(), byID("x"), store.Fence{Epoch: 5}, set(bson.E{Key: "owner", Value: 5})); err != nil {
			t.Fatalf("epoch 5 on an unfenced document: %v", err)
		}
		if got := get(t, c, "x"); got.Fence != 5 || got.Owner != 5 {
			t.Fatalf("after epoch 5: %+v; want fence 5 recorded and owner 5", got)
		}
		return c
	}
	t.Run("Stale", func(t *testing.T) {
		c := fenced(t)
		err := c.FencedUpdate(t.Context(), byID("x"), store.Fence{Epoch: 4}, set(bson.E{Key: "owner", Value: 4}))
		if !errors.Is(err, store.ErrStaleFence) || !errors.Is(err, store.ErrConflict) {
			t.Fatalf("epoch 4 under stored 5 = %v; want ErrStaleFence, which wraps ErrConflict", err)
		}
		wantCode(t, "epoch 4 under stored 5", err, errcode.StaleFence)
		if errors.Is(err, store.ErrUnknownOutcome) {
			t.Errorf("a refusal is a settled outcome, but %v wraps ErrUnknownOutcome", err)
		}
		if got := get(t, c, "x"); got.Owner != 5 || got.Fence != 5 {
			t.Errorf("a refused write changed the document: %+v", got)
		}
	})
	t.Run("Equal", func(t *testing.T) {
		c := fenced(t)
		if err := c.FencedUpdate(t.Context(), byID("x"), store.Fence{Epoch: 5}, set(bson.E{Key: "n", Value: 1})); err != nil {
			t.Fatalf("the same holder (epoch 5) again = %v; want nil", err)
		}
		if got := get(t, c, "x"); got.N != 1 || got.Fence != 5 {
			t.Errorf("after epoch 5 again: %+v; want n 1, fence 5", got)
		}
	})
	t.Run("Newer", func(t *testing.T) {
		c := fenced(t)
		if err := c.FencedUpdate(t.Context(), byID("x"), store.Fence{Epoch: 6}, set(bson.E{Key: "owner", Value: 6})); err != nil {
			t.Fatalf("a newer holder (epoch 6) = %v; want nil", err)
		}
		if got := get(t, c, "x"); got.Owner != 6 || got.Fence != 6 {
			t.Fatalf("after epoch 6: %+v; want owner 6 and fence 6 recorded", got)
		}
		// Recorded, so the holder it replaced is now stale.
		err := c.FencedUpdate(t.Context(), byID("x"), store.Fence{Epoch: 5}, set(bson.E{Key: "owner", Value: 5}))
		if !errors.Is(err, store.ErrStaleFence) {
			t.Errorf("epoch 5 after epoch 6 = %v; want ErrStaleFence", err)
		}
	})
	t.Run("OwnField", func(t *testing.T) {
		// Fence.Field names where the epoch is kept; a document can carry
		// fences of two leases.
		_, c := s.coll(t)
		insert(t, c, doc{ID: "x"})
		f := func(e int64) store.Fence { return store.Fence{Field: "slotEpoch", Epoch: e} }
		if err := c.FencedUpdate(t.Context(), byID("x"), f(3), inc("n")); err != nil {
			t.Fatalf("epoch 3 in slotEpoch: %v", err)
		}
		var got bson.M
		if err := c.Get(t.Context(), "x", &got); err != nil {
			t.Fatal(err)
		}
		if got["slotEpoch"] != int64(3) || got["fence"] != nil {
			t.Fatalf("stored %v; want slotEpoch 3 and no default fence field", got)
		}
		if err := c.FencedUpdate(t.Context(), byID("x"), f(2), inc("n")); !errors.Is(err, store.ErrStaleFence) {
			t.Errorf("epoch 2 under slotEpoch 3 = %v; want ErrStaleFence", err)
		}
		if err := c.FencedUpdate(t.Context(), byID("x"), store.Fence{Epoch: 1}, inc("n")); err != nil {
			t.Errorf("epoch 1 in the default field, which slotEpoch does not fence = %v; want nil", err)
		}
	})
	t.Run("FilterMissIsConflict", func(t *testing.T) {
		// The rest of the filter misses while no newer holder has
		// written: an edit moved the condition. That is ErrConflict, so
		// the caller re-reads rather than gives up its lease.
		c := fenced(t)
		wrong := bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: 99}}
		for _, epoch := range []int64{5, 6} {
			err := c.FencedUpdate(t.Context(), wrong, store.Fence{Epoch: epoch}, inc("n"))
			onlyConflict(t, fmt.Sprintf("a filter miss under stored fence 5 with epoch %d", epoch), err)
		}
		err := c.FencedUpdate(t.Context(), byID("gone"), store.Fence{Epoch: 5}, inc("n"))
		onlyConflict(t, "a fenced update of a missing document", err)
		if got := get(t, c, "x"); got.N != 0 || got.Fence != 5 {
			t.Errorf("a missed write changed the document: %+v", got)
		}
	})
	t.Run("StaleWhenTheNewerHolderMovedTheCondition", func(t *testing.T) {
		// A stale holder's filter holds the value it read, which the
		// newer holder's write changed too: the miss is still stale, not
		// a conflict, or the paused holder would re-read and carry on.
		c := fenced(t)
		if err := c.FencedUpdate(t.Context(), bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: 0}},
			store.Fence{Epoch: 6}, set(bson.E{Key: "version", Value: 1})); err != nil {
			t.Fatalf("epoch 6 moving version 0 to 1: %v", err)
		}
		err := c.FencedUpdate(t.Context(), bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: 0}},
			store.Fence{Epoch: 5}, set(bson.E{Key: "version", Value: 1}))
		if !errors.Is(err, store.ErrStaleFence) {
			t.Errorf("epoch 5 with the version it read, after epoch 6 moved it = %v; want ErrStaleFence", err)
		}
	})
}

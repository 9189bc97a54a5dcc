package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// rounds is how many times each race is run: a lost compare-and-set
// shows on most rounds of a broken store, and three keep the suite quick.
const rounds = 3

// compareAndSet: conditional writes are atomic. Leases, claims and
// nextRunAt advances are all "write if the value is still what I read",
// and two winners would mean two runs of one fire time.
func (s *suite) compareAndSet(t *testing.T) {
	t.Run("UpdateOne", func(t *testing.T) {
		s.casRace(t, func(c *mongostore.Collection, v int64, racer int) error {
			return c.UpdateOne(t.Context(),
				bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: v}},
				set(bson.E{Key: "version", Value: v + 1}, bson.E{Key: "owner", Value: racer}))
		})
	})
	t.Run("FindOneAndUpdate", func(t *testing.T) {
		s.casRace(t, func(c *mongostore.Collection, v int64, racer int) error {
			var out doc
			err := c.FindOneAndUpdate(t.Context(),
				bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: v}},
				set(bson.E{Key: "version", Value: v + 1}, bson.E{Key: "owner", Value: racer}), &out)
			if err == nil && (out.Version != v+1 || out.Owner != int64(racer)) {
				return fmt.Errorf("won, but the document returned is %+v, not the one after our update", out)
			}
			return err
		})
	})
	t.Run("FencedUpdateNewestEpochWins", s.fencedRace)
}

// casRace runs rounds of Racers goroutines that each try to move document
// x from version v to v+1 with write; exactly one may win each round, and
// the stored document must be the winner's.
func (s *suite) casRace(t *testing.T, write func(c *mongostore.Collection, v int64, racer int) error) {
	_, c := s.coll(t)
	insert(t, c, doc{ID: "x"})
	for v := range int64(rounds) {
		winners := raceWinners(t, Racers, func(i int) string { return fmt.Sprintf("round %d racer %d", v, i) },
			func(i int) error { return write(c, v, i) })
		if len(winners) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one of %d racers", v, winners, Racers)
		}
		got := get(t, c, "x")
		if got.Version != v+1 || got.Owner != int64(winners[0]) {
			t.Fatalf("round %d: stored %+v, want version %d owned by the winner %d", v, got, v+1, winners[0])
		}
	}
}

// fencedRace: Racers holders with epochs 1..Racers write at once. The
// newest epoch's write always succeeds (no stored fence can be above it),
// every refusal is ErrStaleFence, and the document ends with the newest
// epoch's write and fence. Then the older holders, all paused past their
// lease, write again: every one of them is refused.
func (s *suite) fencedRace(t *testing.T) {
	_, c := s.coll(t)
	insert(t, c, doc{ID: "x"})
	errs := make([]error, Racers+1)
	race(Racers, func(i int) {
		epoch := int64(i + 1)
		errs[epoch] = c.FencedUpdate(t.Context(), byID("x"), store.Fence{Epoch: epoch},
			set(bson.E{Key: "owner", Value: epoch}))
	})
	if errs[Racers] != nil {
		t.Errorf("the newest epoch %d was refused: %v", Racers, errs[Racers])
	}
	for epoch := 1; epoch < Racers; epoch++ {
		if err := errs[epoch]; err != nil && !errors.Is(err, store.ErrStaleFence) {
			t.Errorf("epoch %d = %v; want nil (it wrote before a newer holder) or ErrStaleFence", epoch, err)
		}
	}
	want := doc{ID: "x", Owner: Racers, Fence: Racers}
	if got := get(t, c, "x"); got != want {
		t.Fatalf("after the race: stored %+v, want %+v (the newest epoch's write)", got, want)
	}
	race(Racers-1, func(i int) {
		epoch := int64(i + 1)
		err := c.FencedUpdate(t.Context(), byID("x"), store.Fence{Epoch: epoch}, set(bson.E{Key: "owner", Value: epoch}))
		if !errors.Is(err, store.ErrStaleFence) {
			t.Errorf("epoch %d after epoch %d wrote = %v; want ErrStaleFence", epoch, Racers, err)
		}
	})
	if got := get(t, c, "x"); got != want {
		t.Errorf("stale holders changed the document: %+v, want %+v", got, want)
	}
}

// idempotency: an insert with a deterministic _id happens once. baton
// makes every insert so (a run's _id is its schedule and fire time), since
// Firestore has no retryable writes and every write may be retried.
func (s *suite) idempotency(t *testing.T) {
	t.Run("Twice", func(t *testing.T) {
		_, c := s.coll(t)
		ok, err := c.InsertIdempotent(t.Context(), doc{ID: "r", N: 1})
		if err != nil || !ok {
			t.Fatalf("first insert = %v, %v; want true, nil", ok, err)
		}
		ok, err = c.InsertIdempotent(t.Context(), doc{ID: "r", N: 2})
		if err != nil || ok {
			t.Fatalf("second insert = %v, %v; want false, nil", ok, err)
		}
		if got := get(t, c, "r"); got.N != 1 {
			t.Errorf("the second insert overwrote the first: %+v", got)
		}
	})
	t.Run("ConcurrentTwins", func(t *testing.T) {
		_, c := s.coll(t)
		var mu sync.Mutex
		var inserted []int
		race(Racers, func(i int) {
			ok, err := c.InsertIdempotent(t.Context(), doc{ID: "r", N: int64(i)})
			if err != nil {
				t.Errorf("twin %d: %v; want nil", i, err)
			}
			if ok {
				mu.Lock()
				inserted = append(inserted, i)
				mu.Unlock()
			}
		})
		if len(inserted) != 1 {
			t.Fatalf("twins %v answered inserted=true; want exactly one of %d", inserted, Racers)
		}
		if got := get(t, c, "r"); got.N != int64(inserted[0]) {
			t.Errorf("stored %+v, want the document of twin %d, which answered inserted=true", got, inserted[0])
		}
		n, err := c.Count(t.Context(), bson.D{})
		if err != nil || n != 1 {
			t.Errorf("count = %d, %v; want 1", n, err)
		}
	})
}

package storetest

import (
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// meter: the Meter counts what Firestore bills, documents read, so that
// tests and benchmarks can state an operation's cost. Every read
// counts the documents it returned; a write reads nothing, except a
// refused FencedUpdate, which reads the document back to tell a stale
// fence from a conflict.
func (s *suite) meter(t *testing.T) {
	st, c := s.coll(t)
	m := st.Meter()
	for i := range 10 {
		insert(t, c, doc{ID: fmt.Sprintf("d%02d", i), N: int64(i % 2)})
	}
	if m.Writes() != 10 {
		t.Errorf("10 inserts metered as %d writes", m.Writes())
	}
	step := func(what string, wantReads int64, f func() error) {
		t.Helper()
		m.Reset()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := m.Total(); got != wantReads {
			t.Errorf("%s metered %d documents read, want %d", what, got, wantReads)
		}
	}
	step("Get", 1, func() error { var d doc; return c.Get(t.Context(), "d00", &d) })
	step("Find of the 5 with n=1", 5, func() error {
		var ds []doc
		return c.Find(t.Context(), bson.D{{Key: "n", Value: 1}}, &ds)
	})
	step("Find of all", 10, func() error { var ds []doc; return c.Find(t.Context(), bson.D{}, &ds) })
	step("a Page of 4", 4, func() error {
		var ds []doc
		_, err := c.Page(t.Context(), mongostore.PageQuery{Limit: 4}, &ds)
		return err
	})
	step("the last Page, of 2 after 8", 2, func() error {
		q := mongostore.PageQuery{Limit: 8}
		var ds []doc
		p, err := c.Page(t.Context(), q, &ds)
		if err != nil {
			return err
		}
		m.Reset() // the first 8 are another page's cost
		q.Token = p.NextToken
		_, err = c.Page(t.Context(), q, &ds)
		return err
	})
	step("a FencedUpdate that lands", 0, func() error {
		return c.FencedUpdate(t.Context(), byID("d00"), store.Fence{Epoch: 2}, inc("n"))
	})
	if m.Writes() != 1 {
		t.Errorf("a FencedUpdate that landed metered %d writes, want 1", m.Writes())
	}
	step("a stale FencedUpdate, which checks the fence", 1, func() error {
		err := c.FencedUpdate(t.Context(), byID("d00"), store.Fence{Epoch: 1}, inc("n"))
		if !errors.Is(err, store.ErrStaleFence) {
			return fmt.Errorf("epoch 1 under 2 = %w, want ErrStaleFence", err)
		}
		return nil
	})
	if m.Writes() != 0 {
		t.Errorf("a refused FencedUpdate metered %d writes, want 0", m.Writes())
	}
	step("an UpdateOne", 0, func() error { return c.UpdateOne(t.Context(), byID("d01"), inc("n")) })
	if m.Writes() != 1 {
		t.Errorf("an UpdateOne metered %d writes, want 1", m.Writes())
	}
}

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

// errorCodes: the sentinel errors callers branch on, and how they relate.
// Every caller's error path depends on them: not found is a 404, a
// conflict re-reads, a stale fence stops the holder, an unknown outcome
// reads back or leaves the work to a sweep.
func (s *suite) errorCodes(t *testing.T) {
	t.Run("Relations", func(t *testing.T) {
		for _, r := range []struct {
			name         string
			err, target  error
			want         bool
			whyItMatters string
		}{
			{"ErrStaleFence is ErrConflict", store.ErrStaleFence, store.ErrConflict, true, "callers that only know conflicts still stop"},
			{"ErrConflict is not ErrStaleFence", store.ErrConflict, store.ErrStaleFence, false, "a conflict must not end a lease"},
			{"ErrUnknownOutcome is not ErrConflict", store.ErrUnknownOutcome, store.ErrConflict, false, "a write that may have landed must not be taken for refused"},
			{"ErrUnknownOutcome is not ErrStaleFence", store.ErrUnknownOutcome, store.ErrStaleFence, false, "as above"},
			{"ErrNotFound is not ErrConflict", store.ErrNotFound, store.ErrConflict, false, "a 404 is not a 409"},
			{"ErrConflict is not ErrNotFound", store.ErrConflict, store.ErrNotFound, false, "a 409 is not a 404"},
		} {
			if got := errors.Is(r.err, r.target); got != r.want {
				t.Errorf("%s: errors.Is = %v (%s)", r.name, got, r.whyItMatters)
			}
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		_, c := s.coll(t)
		insert(t, c, doc{ID: "x"})
		var d doc
		for what, err := range map[string]error{
			"Get of a missing _id":     c.Get(t.Context(), "missing", &d),
			"FindOne matching nothing": c.FindOne(t.Context(), bson.D{{Key: "version", Value: 7}}, &d),
		} {
			if !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
				t.Errorf("%s = %v; want ErrNotFound alone", what, err)
			}
			wantCode(t, what, err, errcode.NotFound)
		}
	})
	t.Run("Conflict", func(t *testing.T) {
		_, c := s.coll(t)
		insert(t, c, doc{ID: "x"})
		stale := bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: 7}}
		var d doc
		onlyConflict(t, "UpdateOne whose condition does not hold", c.UpdateOne(t.Context(), stale, inc("n")))
		onlyConflict(t, "UpdateOne of a missing document", c.UpdateOne(t.Context(), byID("missing"), inc("n")))
		onlyConflict(t, "FindOneAndUpdate whose condition does not hold", c.FindOneAndUpdate(t.Context(), stale, inc("n"), &d))
		onlyConflict(t, "DeleteOne whose condition does not hold", c.DeleteOne(t.Context(), stale))
		if got := get(t, c, "x"); got != (doc{ID: "x"}) {
			t.Errorf("refused writes changed the document: %+v", got)
		}
	})
}

// faults: the answers Firestore gives under contention and deadlines,
// injected through the harness, and what the store makes of each
// (docs/emulators-mongo.md, "Error codes").
func (s *suite) faults(t *testing.T) {
	// rig is a collection with document x, and the fault injector.
	rig := func(t *testing.T) (*mongostore.Collection, Faults) {
		t.Helper()
		st, c := s.coll(t)
		f := s.faultsFor(t, st)
		insert(t, c, doc{ID: "x"})
		return c, f
	}
	// writes are the conditional writes, each adding 1 to n of x when it
	// applies, with the wire command it sends.
	type write struct {
		name, command string
		do            func(t *testing.T, c *mongostore.Collection) error
	}
	writes := []write{
		{"UpdateOne", "update", func(t *testing.T, c *mongostore.Collection) error {
			return c.UpdateOne(t.Context(), bson.D{{Key: "_id", Value: "x"}, {Key: "n", Value: 0}}, inc("n"))
		}},
		{"FindOneAndUpdate", "findAndModify", func(t *testing.T, c *mongostore.Collection) error {
			var d doc
			return c.FindOneAndUpdate(t.Context(), bson.D{{Key: "_id", Value: "x"}, {Key: "n", Value: 0}}, inc("n"), &d)
		}},
		{"FencedUpdate", "update", func(t *testing.T, c *mongostore.Collection) error {
			return c.FencedUpdate(t.Context(), bson.D{{Key: "_id", Value: "x"}, {Key: "n", Value: 0}}, store.Fence{Epoch: 1}, inc("n"))
		}},
	}

	t.Run("AbortedIsRetried", func(t *testing.T) {
		// 112 says "not applied": every write runs again, and applies
		// once.
		for _, w := range writes {
			t.Run(w.name, func(t *testing.T) {
				c, f := rig(t)
				f.Refuse(t, c.Name(), 2, CodeAborted, w.command)
				if err := w.do(t, c); err != nil {
					t.Fatalf("after two 112s: %v; want the third attempt to land", err)
				}
				if got := get(t, c, "x"); got.N != 1 {
					t.Errorf("n = %d; want the write applied once", got.N)
				}
			})
		}
		t.Run("InsertIdempotent", func(t *testing.T) {
			c, f := rig(t)
			f.Refuse(t, c.Name(), 2, CodeAborted, "insert")
			if ok, err := c.InsertIdempotent(t.Context(), doc{ID: "y"}); err != nil || !ok {
				t.Fatalf("after two 112s = %v, %v; want true, nil", ok, err)
			}
		})
		t.Run("DeleteOne", func(t *testing.T) {
			c, f := rig(t)
			f.Refuse(t, c.Name(), 2, CodeAborted, "delete")
			if err := c.DeleteOne(t.Context(), byID("x")); err != nil {
				t.Fatalf("after two 112s: %v", err)
			}
			var d doc
			if err := c.Get(t.Context(), "x", &d); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after the delete, Get = %v; want ErrNotFound", err)
			}
		})
	})

	t.Run("AbortedUntilGivingUp", func(t *testing.T) {
		// Retries are bounded, and when every attempt met a 112 nothing
		// was applied: the write reports a clean conflict
		// (ErrContended, which is ErrConflict and never unknown), so a
		// racer that meets contention loses as it would to a changed
		// condition. A fenced write whose fence holds reports the same.
		all := append(writes, write{"DeleteOne", "delete", func(t *testing.T, c *mongostore.Collection) error {
			return c.DeleteOne(t.Context(), bson.D{{Key: "_id", Value: "x"}, {Key: "n", Value: 0}})
		}})
		for _, w := range all {
			t.Run(w.name, func(t *testing.T) {
				c, f := rig(t)
				f.Refuse(t, c.Name(), 100, CodeAborted, w.command)
				err := w.do(t, c)
				onlyConflict(t, w.name+" under endless 112s", err)
				if !errors.Is(err, store.ErrContended) {
					t.Errorf("%s under endless 112s = %v; want ErrContended", w.name, err)
				}
				if got := get(t, c, "x"); got.N != 0 {
					t.Errorf("n = %d; want the write not applied", got.N)
				}
			})
		}
	})

	t.Run("RacersUnderAborted", func(t *testing.T) {
		// Racers compare-and-set one document while the server answers
		// 112 to all but one attempt of all of theirs: 19 racers meet a
		// 112 on every attempt, and one lands on its last. Exactly one
		// wins, and every loser hears a plain conflict, never an
		// unknown outcome or a bare server error.
		for _, w := range writes[:2] {
			t.Run(w.name, func(t *testing.T) {
				c, f := rig(t)
				f.Refuse(t, c.Name(), Racers*mongostore.WriteAttempts-1, CodeAborted, w.command)
				winners := raceWinners(t, Racers, func(i int) string { return fmt.Sprintf("racer %d under 112s", i) },
					func(int) error { return w.do(t, c) })
				if len(winners) != 1 {
					t.Fatalf("winners %v; want exactly one of %d racers", winners, Racers)
				}
				if got := get(t, c, "x"); got.N != 1 {
					t.Errorf("n = %d; want the one winner's write applied once", got.N)
				}
			})
		}
	})

	t.Run("LostAnswer", func(t *testing.T) {
		// The write landed and its answer was lost (262). A conditional
		// write is not retried, since a retry would miss its own
		// condition; it reports ErrUnknownOutcome and never ErrConflict,
		// and it applied exactly once.
		for _, w := range writes {
			t.Run(w.name, func(t *testing.T) {
				c, f := rig(t)
				f.LoseAnswer(t, c.Name(), 1, CodeDeadlineExceeded, w.command)
				err := w.do(t, c)
				if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
					t.Fatalf("a landed write answered 262 = %v; want ErrUnknownOutcome, not ErrConflict", err)
				}
				wantCode(t, "a landed write answered 262", err, errcode.UnknownOutcome)
				if got := get(t, c, "x"); got.N != 1 {
					t.Errorf("n = %d; want the write applied once", got.N)
				}
			})
		}
		t.Run("DeleteOne", func(t *testing.T) {
			c, f := rig(t)
			f.LoseAnswer(t, c.Name(), 1, CodeDeadlineExceeded, "delete")
			err := c.DeleteOne(t.Context(), byID("x"))
			if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
				t.Fatalf("a landed delete answered 262 = %v; want ErrUnknownOutcome, not ErrConflict", err)
			}
		})
		// An insert is settled instead: retried after 262 it answers a
		// duplicate, and after any other error it is read back. Either
		// way the landed insert is "it is there": false, nil.
		for _, code := range []int32{CodeDeadlineExceeded, CodeInternal} {
			t.Run(fmt.Sprintf("InsertIdempotent/code=%d", code), func(t *testing.T) {
				c, f := rig(t)
				f.LoseAnswer(t, c.Name(), 1, code, "insert")
				ok, err := c.InsertIdempotent(t.Context(), doc{ID: "y", N: 1})
				if err != nil || ok {
					t.Fatalf("a landed insert answered %d = %v, %v; want false, nil", code, ok, err)
				}
				if got := get(t, c, "y"); got.N != 1 {
					t.Errorf("stored %+v; want the landed insert", got)
				}
			})
		}
	})

	t.Run("DeadlineNotLandedIsUnknown", func(t *testing.T) {
		// A 262 says "maybe": the store cannot tell this write from a
		// landed one, so it must not call it a conflict either.
		c, f := rig(t)
		f.Refuse(t, c.Name(), 1, CodeDeadlineExceeded, "update")
		err := writes[0].do(t, c)
		if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
			t.Fatalf("UpdateOne answered 262 = %v; want ErrUnknownOutcome, not ErrConflict", err)
		}
		wantCode(t, "UpdateOne answered 262", err, errcode.UnknownOutcome)
	})
}

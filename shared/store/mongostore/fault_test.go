package mongostore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/baton-cron/baton/shared/store/mongostore"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/store"
)

// The tests in this file arm the emulator's one failCommand fail point, so
// none of them runs in parallel (the parallel tests of the package use
// other namespaces, and run after these).

var once = bson.D{{Key: "times", Value: 1}}

func inc(field string) bson.D {
	return bson.D{{Key: "$inc", Value: bson.D{{Key: field, Value: 1}}}}
}

// faultRig is a fresh database with job "j" at n=1.
func faultRig(t *testing.T) (*mongostore.Store, *mongostore.Collection) {
	t.Helper()
	st := emutest.Store(t)
	c := st.Collection("jobs")
	if ok, err := c.InsertIdempotent(context.Background(), job{ID: "j", N: 1}); err != nil || !ok {
		t.Fatalf("insert j: %v %v", ok, err)
	}
	return st, c
}

func nOf(t *testing.T, c *mongostore.Collection, id string) int {
	t.Helper()
	var j job
	if err := c.Get(context.Background(), id, &j); err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j.N
}

// TestWritesRetriedAfterAborted: Firestore answers Aborted (112) on a hot
// document, and the write did not commit. Each write is retried and lands
// exactly once ($inc shows a second landing).
func TestWritesRetriedAfterAborted(t *testing.T) {
	ctx := context.Background()
	t.Run("insert", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommandCode(t, st, "jobs", once, 112, "insert")
		ok, err := c.InsertIdempotent(ctx, job{ID: "k", N: 1})
		if err != nil || !ok {
			t.Fatalf("insert after one 112 = %v, %v; want true, nil (retried)", ok, err)
		}
		if n, _ := c.Count(ctx, bson.D{{Key: "_id", Value: "k"}}); n != 1 {
			t.Errorf("%d documents k, want 1", n)
		}
	})
	t.Run("update", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommandCode(t, st, "jobs", once, 112, "update")
		if err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 1}}, inc("n")); err != nil {
			t.Fatalf("update after one 112: %v, want it retried", err)
		}
		if n := nOf(t, c, "j"); n != 2 {
			t.Errorf("n = %d, want 2 (applied once)", n)
		}
	})
	t.Run("fenced update", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommandCode(t, st, "jobs", once, 112, "update")
		if err := c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "j"}}, store.Fence{Epoch: 3}, inc("n")); err != nil {
			t.Fatalf("fenced update after one 112: %v, want it retried", err)
		}
		if n := nOf(t, c, "j"); n != 2 {
			t.Errorf("n = %d, want 2 (applied once)", n)
		}
	})
	t.Run("findAndModify", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommandCode(t, st, "jobs", once, 112, "findAndModify")
		var after job
		if err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 1}}, inc("n"), &after); err != nil {
			t.Fatalf("find-and-update after one 112: %v, want it retried", err)
		}
		if after.N != 2 || nOf(t, c, "j") != 2 {
			t.Errorf("n = %d (returned %d), want 2 (applied once)", nOf(t, c, "j"), after.N)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		// A 112 that outlasts the retries: nothing was applied, and the
		// conditional write reports a clean conflict (ErrContended), as
		// a racer that lost must hear.
		st, c := faultRig(t)
		emutest.FailCommandCode(t, st, "jobs", "alwaysOn", 112, "update")
		err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 1}}, inc("n"))
		if !errors.Is(err, store.ErrContended) || !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnknownOutcome) {
			t.Fatalf("update under a 112 that never ends = %v, want ErrContended (a conflict: not applied)", err)
		}
		if code := errcode.Code(err); code != errcode.Aborted {
			t.Errorf("code %v, want Aborted", code)
		}
		emutest.FailCommandOff(t, st)
		if n := nOf(t, c, "j"); n != 1 {
			t.Errorf("n = %d, want 1", n)
		}
	})
	t.Run("bounded, fence newer", func(t *testing.T) {
		// The write a stale holder contended with may be the newer
		// holder's: when its 112s run out, the fence is checked as after
		// a miss, and a newer fence is a stale fence, not contention.
		st, c := faultRig(t)
		if err := c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "j"}}, store.Fence{Epoch: 5}, inc("n")); err != nil {
			t.Fatal(err)
		}
		emutest.FailCommandCode(t, st, "jobs", "alwaysOn", 112, "update")
		err := c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "j"}}, store.Fence{Epoch: 3}, inc("n"))
		if !errors.Is(err, store.ErrStaleFence) || errors.Is(err, store.ErrContended) {
			t.Fatalf("stale fenced update under a 112 that never ends = %v, want ErrStaleFence", err)
		}
		if code := errcode.Code(err); code != errcode.StaleFence {
			t.Errorf("code %v, want StaleFence", code)
		}
	})
}

// TestConditionalWriteAfterDeadlineIsNotConflict: a conditional write
// answered DeadlineExceeded (262) may have landed. It is not retried (a
// retry of a landed write would miss its own condition), and the caller
// hears "outcome unknown", never "conflict", both when it did not run and
// when it ran and only its answer was lost.
func TestConditionalWriteAfterDeadlineIsNotConflict(t *testing.T) {
	ctx := context.Background()
	versioned := bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 1}}
	writes := []struct {
		name, command string
		write         func(c *mongostore.Collection) error
	}{
		{"update", "update", func(c *mongostore.Collection) error { return c.UpdateOne(ctx, versioned, inc("n")) }},
		{"fenced update", "update", func(c *mongostore.Collection) error {
			return c.FencedUpdate(ctx, versioned, store.Fence{Epoch: 3}, inc("n"))
		}},
		{"findAndModify", "findAndModify", func(c *mongostore.Collection) error {
			var after job
			return c.FindOneAndUpdate(ctx, versioned, inc("n"), &after)
		}},
	}
	for _, w := range writes {
		for _, landed := range []bool{false, true} {
			name := w.name + ", did not run"
			if landed {
				name = w.name + ", landed"
			}
			t.Run(name, func(t *testing.T) {
				st, c := faultRig(t)
				if landed {
					emutest.FailCommandCodeAfterRun(t, st, "jobs", once, 262, w.command)
				} else {
					emutest.FailCommandCode(t, st, "jobs", once, 262, w.command)
				}
				err := w.write(c)
				if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
					t.Errorf("after a 262: err = %v, want ErrUnknownOutcome and not ErrConflict", err)
				}
				want := 1
				if landed {
					want = 2
				}
				if n := nOf(t, c, "j"); n != want {
					t.Errorf("n = %d, want %d (not retried)", n, want)
				}
			})
		}
	}
}

// TestInsertAfterDeadline: an insert answered 262 is retried, whether it
// ran or not; when it had landed, the retry's duplicate says so.
func TestInsertAfterDeadline(t *testing.T) {
	ctx := context.Background()
	for _, landed := range []bool{false, true} {
		name := "did not run"
		if landed {
			name = "landed"
		}
		t.Run(name, func(t *testing.T) {
			st, c := faultRig(t)
			if landed {
				emutest.FailCommandCodeAfterRun(t, st, "jobs", once, 262, "insert")
			} else {
				emutest.FailCommandCode(t, st, "jobs", once, 262, "insert")
			}
			ok, err := c.InsertIdempotent(ctx, job{ID: "k", N: 1})
			if err != nil || ok == landed {
				t.Errorf("insert after a 262 = %v, %v; want %v, nil", ok, err, !landed)
			}
			if n, _ := c.Count(ctx, bson.D{{Key: "_id", Value: "k"}}); n != 1 {
				t.Errorf("%d documents k, want 1", n)
			}
		})
	}
}

// TestInsertReadsBackAfterOtherErrors: the duplicate-key code is not the
// only evidence. On an error that is neither 11000 nor retried, the _id is
// read back: the document there (of the same kind) means the insert
// happened; none means it failed; a read-back that fails too leaves the
// outcome unknown; a different kind of document is an error.
func TestInsertReadsBackAfterOtherErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("document there", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommand(t, st, "jobs", once, "insert")
		ok, err := c.InsertIdempotent(ctx, job{ID: "j", N: 1})
		if err != nil || ok {
			t.Errorf("insert of an existing _id answered InternalError = %v, %v; want false, nil", ok, err)
		}
	})
	t.Run("landed, answered a write concern error", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommandAfterWrite(t, st, "jobs", once, "insert")
		ok, err := c.InsertIdempotent(ctx, job{ID: "k", N: 1})
		if err != nil || ok {
			t.Errorf("insert that landed = %v, %v; want false, nil", ok, err)
		}
	})
	t.Run("document absent", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommand(t, st, "jobs", once, "insert")
		ok, err := c.InsertIdempotent(ctx, job{ID: "k", N: 1})
		if err == nil || ok || errors.Is(err, store.ErrUnknownOutcome) {
			t.Errorf("refused insert = %v, %v; want false and an error that is not unknown-outcome", ok, err)
		}
	})
	t.Run("read-back fails too", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommand(t, st, "jobs", "alwaysOn", "insert", "find")
		ok, err := c.InsertIdempotent(ctx, job{ID: "j", N: 1})
		if ok || !errors.Is(err, store.ErrUnknownOutcome) {
			t.Errorf("insert and read-back both refused = %v, %v; want false, ErrUnknownOutcome", ok, err)
		}
	})
	t.Run("a different kind of document", func(t *testing.T) {
		st, c := faultRig(t)
		emutest.FailCommand(t, st, "jobs", once, "insert")
		ok, err := c.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: "a string"}})
		if err == nil || ok {
			t.Errorf("insert whose _id holds another kind of document = %v, %v; want an error", ok, err)
		}
	})
}

package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// future is a wall clock an hour ahead: a contender with it sees every
// lease expired, and takes it over at once, as one would after the TTL.
func future() *clock {
	c := &clock{}
	c.Set(time.Now().Add(time.Hour))
	return c
}

// TestLeaseConformance runs the lease's guarantees against each job-lease
// store (backends): exclusion, the epoch rising across release, takeover
// and break, a taken-over holder losing at its next renew (fencing), a
// heartbeat that cannot write losing the lease, and the lost answer of a
// create, a takeover and a renew recognised by the token. The failCommand
// fail point is one per emulator, so the subtests run one at a time.
func TestLeaseConformance(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Run("Exclusion", func(t *testing.T) {
				ctx := context.Background()
				w := be.open(t)
				const n = 8
				var (
					mu     sync.Mutex
					won    []*lease.Lease
					others int
					wg     sync.WaitGroup
				)
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						l, err := w.manager(string(rune('a'+i)), lease.Options{}).Acquire(ctx, "job-x", 30*time.Second)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							won = append(won, l)
						case errors.Is(err, lease.ErrHeld):
							others++
						default:
							t.Errorf("acquirer %d: %v", i, err)
						}
					}()
				}
				wg.Wait()
				if len(won) != 1 || others != n-1 {
					t.Fatalf("winners, held (-want,+got): -1, %d +%d, %d", n-1, len(won), others)
				}
				info, err := w.manager("z", lease.Options{}).Status(ctx, "job-x")
				if err != nil || info.Holder != won[0].Holder() || info.Epoch != won[0].Epoch() {
					t.Fatalf("status (-want,+got): -{%s %d} +%+v %v", won[0].Holder(), won[0].Epoch(), info, err)
				}
				release(t, won[0])
			})

			t.Run("EpochRisesAndTakeoverFences", func(t *testing.T) {
				ctx := context.Background()
				w := be.open(t)
				a := w.manager("a", lease.Options{})
				la, err := a.Acquire(ctx, "job-x", 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				release(t, la)
				b := w.manager("b", lease.Options{})
				lb, err := b.Acquire(ctx, "job-x", 30*time.Second)
				if err != nil {
					t.Fatalf("acquire after release: %v", err)
				}
				if lb.Epoch() <= la.Epoch() {
					t.Fatalf("epoch after release: %d, not above %d", lb.Epoch(), la.Epoch())
				}
				if err := w.manager("op", lease.Options{}).Break(ctx, "job-x"); err != nil {
					t.Fatalf("break: %v", err)
				}
				waitDone(t, lb, 30*time.Second) // its next renew meets the break
				if !errors.Is(lb.Err(), lease.ErrLost) {
					t.Fatalf("broken holder: want ErrLost, got %v", lb.Err())
				}
				lc, err := w.manager("c", lease.Options{}).Acquire(ctx, "job-x", 3*time.Second)
				if err != nil {
					t.Fatalf("acquire after break: %v", err)
				}
				if lc.Epoch() <= lb.Epoch() {
					t.Fatalf("epoch after break: %d, not above %d", lc.Epoch(), lb.Epoch())
				}
				// c stops renewing (a paused or crashed holder); d, whose
				// clock says its TTL is over, takes over.
				dm := w.manager("d", lease.Options{Clock: future()})
				ld, err := dm.Acquire(ctx, "job-x", 30*time.Second)
				if err != nil {
					t.Fatalf("takeover of an expired lease: %v", err)
				}
				if ld.Epoch() <= lc.Epoch() {
					t.Fatalf("epoch after takeover: %d, not above %d", ld.Epoch(), lc.Epoch())
				}
				// Fencing: c's next renew finds d's write and c loses.
				waitDone(t, lc, 30*time.Second)
				if !errors.Is(lc.Err(), lease.ErrLost) {
					t.Fatalf("taken-over holder: want ErrLost, got %v", lc.Err())
				}
				if err := lc.Release(ctx); !errors.Is(err, lease.ErrLost) {
					t.Fatalf("release by the taken-over holder: want ErrLost, got %v", err)
				}
				if info, err := dm.Status(ctx, "job-x"); err != nil || info.Holder != "d" {
					t.Fatalf("after the stale release (-want,+got): -d +%+v %v", info, err)
				}
				release(t, ld)
			})

			t.Run("HeartbeatThatCannotWriteLoses", func(t *testing.T) {
				ctx := context.Background()
				w := be.open(t)
				m := w.manager("a", lease.Options{})
				l, err := m.Acquire(ctx, "job-x", 3*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				undo := w.failWrites(t)
				waitDone(t, l, 30*time.Second)
				undo()
				if !errors.Is(l.Err(), lease.ErrLost) || l.Renews() != 0 {
					t.Fatalf("holder whose renews fail (-want,+got): -ErrLost, 0 renews +%v, %d", l.Err(), l.Renews())
				}
				lb, err := w.manager("b", lease.Options{Clock: future()}).Acquire(ctx, "job-x", 30*time.Second)
				if err != nil || lb.Epoch() <= l.Epoch() {
					t.Fatalf("takeover after the loss: %v", err)
				}
				release(t, lb)
			})

			t.Run("LostAnswers", func(t *testing.T) {
				ctx := context.Background()
				w := be.open(t)
				skip := 0
				if be.name == "gcs" {
					skip = 1 // the legacy tombstone goes first (spread.go)
				}
				w.loseNextAnswer(t, skip)
				a := w.manager("a", lease.Options{})
				la, err := a.Acquire(ctx, "job-x", 6*time.Second)
				if err != nil {
					t.Fatalf("create with a lost answer: %v", err)
				}
				if _, err := w.manager("c", lease.Options{}).Acquire(ctx, "job-x", 6*time.Second); !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("second acquirer after a lost create answer: want ErrHeld, got %v", err)
				}
				// A renew whose answer is lost: the next finds it applied.
				w.loseNextAnswer(t, 0)
				waitFor(t, "two renews", 30*time.Second, func() bool { return la.Renews() >= 2 || la.Err() != nil })
				if la.Err() != nil {
					t.Fatalf("renew with a lost answer lost the lease: %v", la.Err())
				}
				release(t, la)
				// A takeover whose answer is lost.
				w.loseNextAnswer(t, 0)
				lc, err := w.manager("c", lease.Options{}).Acquire(ctx, "job-x", 6*time.Second)
				if err != nil {
					t.Fatalf("takeover with a lost answer: %v", err)
				}
				if lc.Epoch() <= la.Epoch() {
					t.Fatalf("epoch after a lost takeover answer: %d, not above %d", lc.Epoch(), la.Epoch())
				}
				release(t, lc)
			})

			t.Run("ListPage", func(t *testing.T) {
				ctx := context.Background()
				w := be.open(t)
				m := w.manager("a", lease.Options{})
				lt, err := m.Acquire(ctx, "tick", 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				lj, err := m.Acquire(ctx, "job-x", 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]int64{}
				tok := ""
				for range 10 {
					infos, next, err := m.ListPage(ctx, 1, tok)
					if err != nil {
						t.Fatalf("list page: %v", err)
					}
					for _, i := range infos {
						got[i.Name] = i.Epoch
					}
					if tok = next; tok == "" {
						break
					}
				}
				if len(got) != 2 || got["tick"] != lt.Epoch() || got["job-x"] != lj.Epoch() {
					t.Fatalf("listed (-want,+got): -map[job-x:%d tick:%d] +%v", lj.Epoch(), lt.Epoch(), got)
				}
				all, err := m.List(ctx)
				if err != nil || len(all) != 2 {
					t.Fatalf("list (-want,+got): -2 leases +%d %v", len(all), err)
				}
				release(t, lj)
				release(t, lt)
			})
		})
	}
}

// TestFirestoreLeaseFaults: the Firestore job lease under the faults
// Firestore answers (through the strict emulator's failCommand): a
// WriteConflict (112) is retried and the acquire succeeds; a dropped
// connection on acquire applies nothing and fails it, and the next one
// succeeds; a release whose marker cannot be written and whose free-state
// write lands but answers an error still frees the lease.
func TestFirestoreLeaseFaults(t *testing.T) {
	ctx := context.Background()
	w := backends[1].open(t)
	coll := mongostore.LeaseObjectsCollection

	emutest.FailCommandCode(t, w.st, coll, bson.D{{Key: "times", Value: 2}}, 112, "findAndModify")
	a := w.manager("a", lease.Options{})
	la, err := a.Acquire(ctx, "job-x", 6*time.Second)
	if err != nil {
		t.Fatalf("acquire through two WriteConflicts: %v", err)
	}
	release(t, la)

	emutest.FailCommandDrop(t, w.st, coll, bson.D{{Key: "times", Value: 1}}, "findAndModify")
	b := w.manager("b", lease.Options{})
	if _, err := b.Acquire(ctx, "job-x", 6*time.Second); err == nil || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire on a dropped connection: want a failure that is not ErrHeld, got %v", err)
	}
	lb, err := b.Acquire(ctx, "job-x", 6*time.Second)
	if err != nil {
		t.Fatalf("acquire after the dropped connection: %v", err)
	}
	if lb.Epoch() != la.Epoch()+1 {
		t.Fatalf("epoch (-want,+got): -%d +%d", la.Epoch()+1, lb.Epoch())
	}

	// The renew meets a WriteConflict and a dropped connection in turn.
	emutest.FailCommandCode(t, w.st, coll, bson.D{{Key: "times", Value: 1}}, 112, "findAndModify")
	waitFor(t, "a renew", 30*time.Second, func() bool { return lb.Renews() >= 1 || lb.Err() != nil })
	emutest.FailCommandDrop(t, w.st, coll, bson.D{{Key: "times", Value: 1}}, "findAndModify")
	waitFor(t, "two renews", 30*time.Second, func() bool { return lb.Renews() >= 2 || lb.Err() != nil })
	if lb.Err() != nil {
		t.Fatalf("renews through a WriteConflict and a dropped connection lost the lease: %v", lb.Err())
	}

	// Release: the marker write is refused, so the free state is written
	// to the lease document.
	emutest.FailCommandOff(t, w.st)
	emutest.FailCommand(t, w.st, mongostore.LeaseMarkersCollection, "alwaysOn", "update")
	if err := lb.Release(ctx); err != nil {
		t.Fatalf("release with its marker refused: %v", err)
	}
	emutest.FailCommandOff(t, w.st)
	lc, err := w.manager("c", lease.Options{}).Acquire(ctx, "job-x", 6*time.Second)
	if err != nil || lc.Epoch() != lb.Epoch()+1 {
		t.Fatalf("acquire after the free-state release: %v", err)
	}

	// The free-state write lands and answers 262: the release reads it
	// back and recognises its token.
	emutest.FailCommandCodeAfterRun(t, w.st, coll, bson.D{{Key: "times", Value: 1}}, 262, "findAndModify")
	if err := lease.ReleaseFreeState(ctx, lc); err != nil {
		t.Fatalf("free-state release whose answer is lost: %v", err)
	}
	if _, err := w.manager("z", lease.Options{}).Status(ctx, "job-x"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("status after the release: want ErrNotFound (free), got %v", err)
	}
}

// TestSwitchingJobLeaseStores: while a deployment switches its job leases
// between the bucket and Firestore, both kinds of manager run, and never
// both hold one lease (switch.go); epochs keep rising across the switch
// and back; a manager that knows no other store (an older version) never
// takes a lease that moved.
func TestSwitchingJobLeaseStores(t *testing.T) {
	// A job lease, and a name AlsoInJobLeases adds (the scheduler's
	// decider shard leases): the same switch guards both.
	for _, name := range []string{"job-x", "tick-7"} {
		t.Run(name, func(t *testing.T) { switchingStores(t, name) })
	}
}

func switchingStores(t *testing.T, name string) {
	ctx := context.Background()
	b := setup(t)
	st := emutest.Store(t)
	also := func(n string) bool { return strings.HasPrefix(n, "tick-") }
	gcs := func(h string) *lease.Manager {
		return b.manager(h, lease.Options{Markers: st.LeaseMarkers(), OtherJobLeases: st.LeaseObjects(), AlsoInJobLeases: also})
	}
	fs := func(h string) *lease.Manager {
		return b.manager(h, lease.Options{Markers: st.LeaseMarkers(), JobLeases: st.LeaseObjects(), OtherJobLeases: lease.GCSObjects(b.bucket), AlsoInJobLeases: also})
	}
	lg, err := gcs("old").Acquire(ctx, name, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs("new").Acquire(ctx, name, 30*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("firestore acquirer while the bucket's holder runs: want ErrHeld, got %v", err)
	}
	if info, err := fs("new").Status(ctx, name); err != nil || info.Holder != "old" {
		t.Fatalf("firestore manager's status during the switch (-want,+got): -old +%+v %v", info, err)
	}
	release(t, lg)
	lf, err := fs("new").Acquire(ctx, name, 30*time.Second)
	if err != nil {
		t.Fatalf("firestore acquire after the bucket's release: %v", err)
	}
	if lf.Epoch() <= lg.Epoch() {
		t.Fatalf("epoch across the switch: %d, not above %d", lf.Epoch(), lg.Epoch())
	}
	if o, err := st.LeaseObjects().ReadObject(ctx, fs("look").ObjectName(name)); err != nil || o.Record.Holder != "new" {
		t.Fatalf("the Firestore document of %s: %+v, %v; want it held by new", name, o, err)
	}
	// The bucket's side now finds a tombstone, and Firestore's holder.
	if _, err := gcs("old2").Acquire(ctx, name, 30*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("bucket acquirer while firestore's holder runs: want ErrHeld, got %v", err)
	}
	older := b.manager("older", lease.Options{Markers: st.LeaseMarkers()})
	if _, err := older.Acquire(ctx, name, 30*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a manager that knows no other store: want ErrHeld (the tombstone), got %v", err)
	}
	release(t, lf)
	// And back: the bucket's side retires the document and goes above it.
	lg2, err := gcs("back").Acquire(ctx, name, 30*time.Second)
	if err != nil {
		t.Fatalf("bucket acquire after switching back: %v", err)
	}
	if lg2.Epoch() <= lf.Epoch() {
		t.Fatalf("epoch switching back: %d, not above %d", lg2.Epoch(), lf.Epoch())
	}
	if _, err := fs("new2").Acquire(ctx, name, 30*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("firestore acquirer after switching back: want ErrHeld, got %v", err)
	}
	release(t, lg2)
}

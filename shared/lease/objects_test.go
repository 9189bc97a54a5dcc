package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// world is one lease world of a backend: the managers a test makes share
// it, and its fault hooks reach the store under the job leases.
type world struct {
	b *bundle
	// st is the Firestore store (job leases, markers); always there, as
	// in a deployment.
	st *mongostore.Store
	// objects is the store that keeps the job leases.
	objects lease.ObjectStore
	// opts are the Options every manager of this world starts from.
	opts lease.Options
	// loseNextAnswer makes the next write of a job lease land and its
	// answer be lost (GCS: the response dropped; Firestore: a 262 after
	// the write ran). skip counts the job-lease writes let through first.
	loseNextAnswer func(t *testing.T, skip int)
	// failWrites makes every job-lease write fail without landing until
	// the returned func is called.
	failWrites func(t *testing.T) (undo func())
}

func (w *world) manager(holder string, o lease.Options) *lease.Manager {
	o.JobLeases, o.OtherJobLeases, o.Markers = w.opts.JobLeases, w.opts.OtherJobLeases, w.opts.Markers
	return w.b.manager(holder, o)
}

// backend is one ObjectStore under the job leases.
type backend struct {
	name string
	open func(t *testing.T) *world
}

// backends are the two job-lease stores, on their emulators: fake-gcs
// (through the fault transport) and the strict FerretDB front.
var backends = []backend{
	{name: "gcs", open: func(t *testing.T) *world {
		b := setup(t)
		st := emutest.Store(t)
		w := &world{b: b, st: st, objects: lease.GCSObjects(b.bucket),
			opts: lease.Options{Markers: st.LeaseMarkers(), OtherJobLeases: st.LeaseObjects()}}
		w.loseNextAnswer = func(t *testing.T, skip int) {
			b.ft.set(nth(1, skipping(skip, isUpload), dropResponse))
		}
		w.failWrites = func(t *testing.T) func() {
			b.ft.set(func(r *http.Request) action {
				if isUpload(r) {
					return unavailable
				}
				return pass
			})
			return func() { b.ft.set(nil) }
		}
		return w
	}},
	{name: "firestore", open: func(t *testing.T) *world {
		b := setup(t)
		st := emutest.Store(t)
		w := &world{b: b, st: st, objects: st.LeaseObjects(),
			opts: lease.Options{Markers: st.LeaseMarkers(), JobLeases: st.LeaseObjects(), OtherJobLeases: lease.GCSObjects(b.bucket)}}
		w.loseNextAnswer = func(t *testing.T, skip int) {
			mode := bson.D{{Key: "times", Value: 1}}
			if skip > 0 {
				mode = bson.D{{Key: "skip", Value: skip}}
			}
			emutest.FailCommandCodeAfterRun(t, st, mongostore.LeaseObjectsCollection, mode, 262, "findAndModify")
		}
		w.failWrites = func(t *testing.T) func() {
			emutest.FailCommand(t, st, mongostore.LeaseObjectsCollection, "alwaysOn", "findAndModify")
			return func() { emutest.FailCommandOff(t, st) }
		}
		return w
	}},
}

// skipping matches the requests match matches after the first n of them.
func skipping(n int, match func(*http.Request) bool) func(*http.Request) bool {
	seen := 0
	return func(r *http.Request) bool {
		if !match(r) {
			return false
		}
		seen++
		return seen > n
	}
}

// TestObjectStoreConformance: both ObjectStores keep the contract Manager
// rests on (ObjectStore's doc): create only if absent, write and delete
// only at the generation read, a conflict for everything else, the
// store's own Updated time, and pages in name order.
func TestObjectStoreConformance(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			s := be.open(t).objects
			const obj = "leases/ab/job-1.json"
			if _, err := s.ReadObject(ctx, obj); !errors.Is(err, lease.ErrNotFound) {
				t.Fatalf("read of a missing object: want ErrNotFound, got %v", err)
			}
			if _, err := s.WriteObject(ctx, obj, lease.Record{Holder: "a", Epoch: 1}, 7); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("write of a missing object at generation 7: want ErrConflict, got %v", err)
			}
			before := time.Now().Add(-time.Minute)
			rec := lease.Record{Holder: "a", Epoch: 1, TTLSeconds: 10, AcquiredAt: time.Now().UTC().Truncate(time.Millisecond), RenewedAt: time.Now().UTC().Truncate(time.Millisecond), Token: "t1"}
			o1, err := s.WriteObject(ctx, obj, rec, 0)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if d := time.Since(o1.Updated); d < -2*time.Second || d > 2*time.Second {
				// Expiry is Updated + ttl + skew: a store clock off by
				// seconds would move every takeover by as much.
				t.Errorf("Updated %s is %s from this machine's clock; want the store's time of the write", o1.Updated, d)
			}
			if o1.Generation == 0 || o1.Updated.Before(before) || o1.Record.Token != "t1" {
				t.Fatalf("created object (-want,+got): -{gen>0 updated>%s t1} +{%d %s %s}", before, o1.Generation, o1.Updated, o1.Record.Token)
			}
			if _, err := s.WriteObject(ctx, obj, lease.Record{Holder: "b", Epoch: 1, Token: "t2"}, 0); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("second create: want ErrConflict, got %v", err)
			}
			got, err := s.ReadObject(ctx, obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.Generation != o1.Generation || got.Record.Holder != "a" || got.Record.Epoch != 1 || !got.Updated.Equal(o1.Updated) || !got.Record.AcquiredAt.Equal(rec.AcquiredAt) {
				t.Fatalf("read after create (-want,+got): -%+v +%+v", o1, got)
			}
			rec2 := rec
			rec2.Epoch, rec2.Token = 2, "t2"
			o2, err := s.WriteObject(ctx, obj, rec2, o1.Generation)
			if err != nil {
				t.Fatalf("write at the generation read: %v", err)
			}
			if o2.Generation == o1.Generation || o2.Record.Epoch != 2 {
				t.Fatalf("rewritten object (-want,+got): -{gen!=%d 2} +{%d %d}", o1.Generation, o2.Generation, o2.Record.Epoch)
			}
			// A writer that read before o2 is refused: the compare-and-set.
			if _, err := s.WriteObject(ctx, obj, lease.Record{Holder: "z", Epoch: 9}, o1.Generation); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("write at a stale generation: want ErrConflict, got %v", err)
			}
			if err := s.DeleteObject(ctx, obj, o1.Generation); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("delete at a stale generation: want ErrConflict, got %v", err)
			}
			if got, err := s.ReadObject(ctx, obj); err != nil || got.Record.Holder != "a" || got.Record.Epoch != 2 {
				t.Fatalf("after refused writes (-want,+got): -{a 2} +{%s %d} %v", got.Record.Holder, got.Record.Epoch, err)
			}
			if err := s.DeleteObject(ctx, obj, o2.Generation); err != nil {
				t.Fatalf("delete at the generation read: %v", err)
			}
			if _, err := s.ReadObject(ctx, obj); !errors.Is(err, lease.ErrNotFound) {
				t.Fatalf("read after delete: want ErrNotFound, got %v", err)
			}

			// Pages: in name order, each at most pageSize, all of them once.
			var want []string
			for i := range 5 {
				name := fmt.Sprintf("leases/%02d/job-%d.json", i, i)
				want = append(want, name)
				if _, err := s.WriteObject(ctx, name, lease.Record{Holder: "a", Epoch: 1, Token: "x"}, 0); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.WriteObject(ctx, "other/job-9.json", lease.Record{Holder: "a", Epoch: 1, Token: "x"}, 0); err != nil {
				t.Fatal(err)
			}
			var seen []string
			tok := ""
			for range 10 {
				objs, next, err := s.ListObjects(ctx, "leases/", 2, tok)
				if err != nil {
					t.Fatalf("list page: %v", err)
				}
				if len(objs) > 2 {
					t.Fatalf("page of %d objects; want at most 2", len(objs))
				}
				for _, o := range objs {
					seen = append(seen, o.Name)
				}
				if tok = next; tok == "" {
					break
				}
			}
			if fmt.Sprint(seen) != fmt.Sprint(want) {
				t.Fatalf("listed (-want,+got): -%v +%v", want, seen)
			}
			if _, _, err := s.ListObjects(ctx, "leases/", 2, "bm90IGEgdG9rZW4"); !errors.Is(err, lease.ErrBadPageToken) {
				t.Fatalf("made-up page token: want ErrBadPageToken, got %v", err)
			}
		})
	}
}

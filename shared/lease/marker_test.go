package lease_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
)

// TestAcquireReleaseCyclesWriteTheLeaseObjectOnce: back-to-back acquire
// and release of one lease, as a schedule firing every second does, write
// the lease object once per cycle (the release writes its marker instead),
// never more than once a second, and meet no 429.
func TestAcquireReleaseCyclesWriteTheLeaseObjectOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	srv := emutest.GCSServer(t)
	a, c := b.manager("a", lease.Options{}), b.manager("c", lease.Options{})
	const cycles = 5
	start := time.Now()
	for i := range cycles {
		m := a
		if i%2 == 1 {
			m = c // a takeover of a released lease by another manager, too
		}
		l, err := m.Acquire(ctx, "job", 3*time.Second)
		if err != nil {
			t.Fatalf("cycle %d: acquire: %v", i, err)
		}
		if l.Epoch() != int64(i+1) {
			t.Fatalf("cycle %d: epoch (-want,+got): -%d +%d", i, i+1, l.Epoch())
		}
		release(t, l)
	}
	elapsed := time.Since(start)
	leaseWrites, leaseRefused := srv.ObjectWrites(b.name, "leases/job.json")
	markerWrites, markerRefused := srv.ObjectWrites(b.name, "leases/job.json.released")
	if leaseWrites != cycles || markerWrites != cycles {
		t.Fatalf("writes per object over %d cycles (-want,+got): -%d lease %d marker +%d lease %d marker", cycles, cycles, cycles, leaseWrites, markerWrites)
	}
	if leaseRefused != 0 || markerRefused != 0 {
		t.Fatalf("429s met: lease object %d, marker %d; want none", leaseRefused, markerRefused)
	}
	// Not a timing assertion of speed: a bound that the rate rule implies.
	if limit := int64(elapsed/time.Second) + 1; leaseWrites > limit {
		t.Fatalf("%d writes to the lease object in %s: more than one a second", leaseWrites, elapsed)
	}
}

// TestMarkerThatDoesNotMatchIsIgnored: a release marker frees the lease
// only when it names the holder's epoch and token; any other (an older
// release, a zombie's, a made-up one) leaves the lease held.
func TestMarkerThatDoesNotMatchIsIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	la, err := b.manager("a", lease.Options{}).Acquire(ctx, "job", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range []map[string]string{
		{"baton-epoch": fmt.Sprint(la.Epoch()), "baton-token": "not-the-token"},
		{"baton-epoch": fmt.Sprint(la.Epoch() - 1), "baton-token": "old"},
	} {
		w := b.bucket.Object("leases/job.json.released").NewWriter(ctx)
		w.Metadata = md
		_, _ = io.WriteString(w, "{}")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.manager("c", lease.Options{}).Acquire(ctx, "job", 30*time.Second); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("marker %v: want ErrHeld, got %v", md, err)
		}
		if info, err := b.manager("c", lease.Options{}).Status(ctx, "job"); err != nil || info.Free {
			t.Fatalf("marker %v: status shows the lease free (%v)", md, err)
		}
	}
	release(t, la)
	infos, err := b.manager("c", lease.Options{}).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || !infos[0].Free || infos[0].Name != "job" {
		t.Fatalf("list after a marker release: want one free lease job, got %+v", infos)
	}
}

// TestStoreMarkers: with Options.Markers (the scheduler's Firestore
// markers, on the Mongo emulator), a release writes its marker to the
// store and nothing to the bucket but the acquire: the lease object once
// per cycle, no marker object. A lease released by a manager without the
// store (a bucket marker, as before the switch) reads as released to a
// manager with it; the epoch goes up by one each cycle throughout. A
// manager without the store does not read store markers: to it a lease
// released there stays held until it expires (docs/lease.md), which is
// why every manager of the scheduler's leases gets the store.
func TestStoreMarkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	srv := emutest.GCSServer(t)
	markers := emutest.Store(t).LeaseMarkers()
	withStore := func(h string) *lease.Manager { return b.manager(h, lease.Options{Markers: markers}) }
	a, c, old := withStore("a"), withStore("c"), b.manager("old", lease.Options{})
	const cycles = 5
	for i := range cycles {
		m := a
		switch {
		case i == 0:
			m = old // released into the bucket, before the switch
		case i%2 == 0:
			m = c // another manager with the store takes a store-released lease
		}
		l, err := m.Acquire(ctx, "job", 3*time.Second)
		if err != nil {
			t.Fatalf("cycle %d: acquire: %v", i, err)
		}
		if l.Epoch() != int64(i+1) {
			t.Fatalf("cycle %d: epoch (-want,+got): -%d +%d", i, i+1, l.Epoch())
		}
		release(t, l)
		// Status answers a free lease with its info and ErrNotFound.
		if info, err := a.Status(ctx, "job"); (err != nil && !errors.Is(err, lease.ErrNotFound)) || info == nil || !info.Free {
			t.Fatalf("cycle %d: status after the release: %+v, %v; want free", i, info, err)
		}
	}
	leaseWrites, _ := srv.ObjectWrites(b.name, "leases/job.json")
	markerWrites, _ := srv.ObjectWrites(b.name, "leases/job.json.released")
	if leaseWrites != cycles || markerWrites != 1 {
		t.Fatalf("writes over %d cycles (-want,+got): -%d lease 1 bucket marker +%d lease %d bucket marker", cycles, cycles, leaseWrites, markerWrites)
	}
	infos, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || !infos[0].Free {
		t.Fatalf("list after a store release: want one free lease, got %+v", infos)
	}
	if _, err := old.Acquire(ctx, "job", 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a manager without the store, after a store release: %v; want ErrHeld until the lease expires", err)
	}
}

// TestStoreMarkerThatDoesNotMatchIsIgnored: a store marker frees the lease
// only when it names the holder's epoch and token.
func TestStoreMarkerThatDoesNotMatchIsIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	markers := emutest.Store(t).LeaseMarkers()
	la, err := b.manager("a", lease.Options{Markers: markers}).Acquire(ctx, "job", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		epoch int64
		token string
	}{{la.Epoch(), "not-the-token"}, {la.Epoch() - 1, "old"}} {
		if err := markers.WriteReleaseMarker(ctx, "leases/job.json.released", k.epoch, k.token); err != nil {
			t.Fatal(err)
		}
		c := b.manager("c", lease.Options{Markers: markers})
		if _, err := c.Acquire(ctx, "job", 30*time.Second); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("marker %+v: want ErrHeld, got %v", k, err)
		}
		if infos, err := c.List(ctx); err != nil || len(infos) != 1 || infos[0].Free {
			t.Fatalf("marker %+v: list shows %+v, %v; want the lease held", k, infos, err)
		}
	}
	release(t, la)
	if _, err := b.manager("c", lease.Options{Markers: markers}).Acquire(ctx, "job", 30*time.Second); err != nil {
		t.Fatalf("after the holder's release: %v", err)
	}
}

// TestLateStoreMarkerKeepsTheNewerOne: a releaser that stalled past its
// TTL writes its marker after the next holder released: the older
// acquisition's marker must not replace the newer one's, or the free
// lease would read as held until its TTL.
func TestLateStoreMarkerKeepsTheNewerOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	markers := emutest.Store(t).LeaseMarkers()
	la, err := b.manager("a", lease.Options{Markers: markers}).Acquire(ctx, "job", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	release(t, la) // the newer acquisition's marker
	if err := markers.WriteReleaseMarker(ctx, "leases/job.json.released", la.Epoch()-1, "stalled"); err != nil {
		t.Fatalf("late marker: %v", err)
	}
	if epoch, token, ok, err := markers.ReadReleaseMarker(ctx, "leases/job.json.released"); err != nil || !ok || epoch != la.Epoch() || token == "stalled" {
		t.Fatalf("marker after a late older one: epoch %d token %q ok %v err %v; want the newer acquisition's (epoch %d)", epoch, token, ok, err, la.Epoch())
	}
	if _, err := b.manager("c", lease.Options{Markers: markers}).Acquire(ctx, "job", 30*time.Second); err != nil {
		t.Fatalf("acquire after the late marker: %v; want the released lease free", err)
	}
}

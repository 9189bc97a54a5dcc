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

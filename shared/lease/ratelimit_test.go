package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
)

// Cloud Storage answers 429 rateLimitExceeded to writes faster than about
// one a second to one object (https://cloud.google.com/storage/quotas).
// These tests make the strict emulator answer 429 to the lease's writes
// (gcs.Server.FailNextWrites) at each step, and check that the lease stays
// correct: the library retries the 429 (every lease write carries a
// generation precondition, so it is idempotent), nobody holds twice, and a
// 429 is never taken for a lost lease.

// refused returns the 429s the emulator answered for the lease object.
func refused(t *testing.T, b *bundle, object string) int64 {
	t.Helper()
	_, n := emutest.GCSServer(t).ObjectWrites(b.name, object)
	return n
}

// TestAcquireMeets429: the create and the takeover each meet 429s; the
// acquirer still gets the lease, once, at the right epoch, and a contender
// finds it held.
func TestAcquireMeets429(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	srv := emutest.GCSServer(t)
	const obj = "leases/job.json"
	a, c := b.manager("a", lease.Options{}), b.manager("c", lease.Options{})

	srv.FailNextWrites(b.name, obj, 2)
	la, err := a.Acquire(ctx, "job", 3*time.Second)
	if err != nil {
		t.Fatalf("acquire through two 429s: %v", err)
	}
	if la.Epoch() != 1 {
		t.Fatalf("epoch (-want,+got): -1 +%d", la.Epoch())
	}
	if _, err := c.Acquire(ctx, "job", 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("contender after a 429-delayed acquire: want ErrHeld, got %v", err)
	}
	release(t, la)

	// The takeover of a released lease meets 429s too.
	srv.FailNextWrites(b.name, obj, 2)
	lc, err := c.Acquire(ctx, "job", 3*time.Second)
	if err != nil {
		t.Fatalf("takeover through two 429s: %v", err)
	}
	if lc.Epoch() != 2 {
		t.Fatalf("takeover epoch (-want,+got): -2 +%d", lc.Epoch())
	}
	if _, err := a.Acquire(ctx, "job", 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("former holder after the takeover: want ErrHeld, got %v", err)
	}
	if n := refused(t, b, obj); n != 4 {
		t.Fatalf("429s answered (-want,+got): -4 +%d", n)
	}
	release(t, lc)
}

// TestHeartbeatMeets429: renews that meet 429 for less than the trust
// window are retried and the lease is kept; nobody else can take it
// meanwhile.
func TestHeartbeatMeets429(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	srv := emutest.GCSServer(t)
	const obj = "leases/job.json"
	a := b.manager("a", lease.Options{})
	la, err := a.Acquire(ctx, "job", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv.FailNextWrites(b.name, obj, 3)
	waitFor(t, "two renews after the 429s", 10*time.Second, func() bool { return la.Renews() >= 2 })
	if err := la.Err(); err != nil {
		t.Fatalf("lease after renews that met 429: %v", err)
	}
	if n := refused(t, b, obj); n != 3 {
		t.Fatalf("429s answered (-want,+got): -3 +%d", n)
	}
	if _, err := b.manager("c", lease.Options{}).Acquire(ctx, "job", 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("contender while renews met 429: want ErrHeld, got %v", err)
	}
	release(t, la)
}

// TestHeartbeat429LongerThanTrustWindow: renews that meet 429 for good are
// not a 412: the lease is not lost at the first 429, but when the trust
// window closes, and a contender still finds it held until it expires.
func TestHeartbeat429LongerThanTrustWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	srv := emutest.GCSServer(t)
	const obj = "leases/job.json"
	a := b.manager("a", lease.Options{})
	la, err := a.Acquire(ctx, "job", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv.FailNextWrites(b.name, obj, 1_000_000)
	t.Cleanup(func() { srv.FailNextWrites(b.name, obj, 0) })
	waitFor(t, "a renew to meet 429", 10*time.Second, func() bool { return refused(t, b, obj) > 0 })
	if err := la.Err(); err != nil {
		t.Fatalf("lost at the first 429: %v", err)
	}
	waitDone(t, la, 10*time.Second)
	if !errors.Is(la.Err(), lease.ErrLost) {
		t.Fatalf("want ErrLost when the trust window closed, got %v", la.Err())
	}
	if end := lease.TrustEnd(la); time.Now().Before(end) {
		t.Fatalf("lost %s before its trust window closed: a 429 was taken for a lost lease", time.Until(end))
	}
	if _, err := b.manager("c", lease.Options{}).Acquire(ctx, "job", 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("contender right after the holder stopped: want ErrHeld, got %v", err)
	}
}

// TestReleaseMeets429: the release marker meets 429s; the release still
// lands, and the next acquirer takes the lease at epoch+1, once.
func TestReleaseMeets429(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	srv := emutest.GCSServer(t)
	a, c := b.manager("a", lease.Options{}), b.manager("c", lease.Options{})
	la, err := a.Acquire(ctx, "job", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "leases/job.json.released"
	srv.FailNextWrites(b.name, marker, 2)
	if err := la.Release(ctx); err != nil {
		t.Fatalf("release through two 429s: %v", err)
	}
	if n := refused(t, b, marker); n != 2 {
		t.Fatalf("429s answered to the release (-want,+got): -2 +%d", n)
	}
	if _, err := c.Status(ctx, "job"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("status after the release: want ErrNotFound (free), got %v", err)
	}
	lc, err := c.Acquire(ctx, "job", 3*time.Second)
	if err != nil {
		t.Fatalf("acquire after a 429-delayed release: %v", err)
	}
	if lc.Epoch() != 2 {
		t.Fatalf("epoch (-want,+got): -2 +%d", lc.Epoch())
	}
	if _, err := a.Acquire(ctx, "job", 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("former holder: want ErrHeld, got %v", err)
	}
	release(t, lc)
}

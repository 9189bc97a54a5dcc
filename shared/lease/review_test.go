package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/lease"
)

// TestReleaseAfterAppliedRenewWithFailedAnswer: a renew was applied by the
// server but its answer was an error, and Release comes before the
// heartbeat's next renew has resynchronised the generation. The lease is
// still ours: Release must free it, not report it lost and leave it held
// until it expires (which would make the schedule's next run meet its own
// dead holder and be skipped).
func TestReleaseAfterAppliedRenewWithFailedAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{})
	var (
		held     atomic.Pointer[lease.Lease]
		calls    atomic.Int64
		released = make(chan error, 1)
	)
	lease.SetBeforeRenew(a, func(string) {
		if calls.Add(1) != 2 {
			return
		}
		// The retry after the failed renew: release now, and let the
		// heartbeat go on only once Release has asked it to stop.
		l := held.Load()
		go func() { released <- l.Release(ctx) }()
		// (Not waitFor: this runs on the heartbeat goroutine, where the
		// test must not FailNow. Should Release never stop it, the test
		// fails below on the release's result.)
		for deadline := time.Now().Add(20 * time.Second); !lease.Stopping(l) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	})
	// ttl 6s: renew every 2s.
	la, err := a.Acquire(ctx, "job", 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held.Store(la)
	b.ft.set(nth(1, isUpload, appliedThen400)) // the first renew
	var rerr error
	select {
	case rerr = <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("no release within 30s")
	}
	if b.ft.dropped.Load() != 1 {
		t.Fatalf("applied renews answered 400 (-want,+got): -1 +%d", b.ft.dropped.Load())
	}
	if rerr != nil {
		t.Fatalf("release after an applied renew with a failed answer: %v", rerr)
	}
	info, err := a.Status(ctx, "job")
	if !errors.Is(err, lease.ErrNotFound) || info == nil || !info.Free {
		t.Fatalf("after release: want the lease free, got %+v, %v", info, err)
	}
	lc, err := b.manager("c", lease.Options{}).Acquire(ctx, "job", 6*time.Second)
	if err != nil {
		t.Fatalf("acquire right after the release: %v", err)
	}
	if lc.Epoch() != 2 {
		t.Errorf("epoch (-want,+got): -2 +%d", lc.Epoch())
	}
	release(t, lc)
}

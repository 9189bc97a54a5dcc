package lease_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
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

// TestTrustWindowAfterRenewResync: a renew is applied but answers an error
// (400: not retried), and the next renew, sent later, gets 412 and finds the
// object is still ours. The applied write was the earlier one, so the
// server's Updated (and a contender's takeover time) counts from it: the
// holder's trust window must too, not from the later send, or it outlives
// the moment a contender may take over, and two holders run at once.
func TestTrustWindowAfterRenewResync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	// Skew 1ms, so the takeover time is close to the holder's window and
	// the test stays short: ttl 6s, renew every 2s, margin 1.2s.
	const skew = time.Millisecond
	a := b.manager("a", lease.Options{Skew: skew})
	var (
		calls     atomic.Int64
		acquired  atomic.Int64 // unix nanos
		firstSent atomic.Int64
		third     = make(chan struct{})
		resume    = make(chan struct{})
	)
	lease.SetBeforeRenew(a, func(string) {
		switch calls.Add(1) {
		case 1: // this renew is applied and answered 400
			firstSent.Store(time.Now().UnixNano())
		case 2: // the retry: a pause, ending well inside the trust window
			until := time.Unix(0, firstSent.Load()).Add(2 * time.Second)
			if limit := time.Unix(0, acquired.Load()).Add(4500 * time.Millisecond); until.After(limit) {
				until = limit
			}
			time.Sleep(time.Until(until))
		case 3: // hold the heartbeat here while the test looks
			close(third)
			<-resume
		}
	})
	acquired.Store(time.Now().UnixNano())
	la, err := a.Acquire(ctx, "job", 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.ft.set(nth(1, isUpload, appliedThen400))
	select {
	case <-third:
	case <-la.Done():
		// Stopping early is safe (on a loaded machine the shortened window
		// may close before the next renew); trusting too long is the bug.
		if !errors.Is(la.Err(), lease.ErrLost) {
			t.Fatalf("lease ended before the third renew: %v", la.Err())
		}
		return
	case <-time.After(30 * time.Second):
		t.Fatal("no third renew within 30s")
	}
	defer func() { close(resume); _ = la.Release(ctx) }()
	if la.Err() != nil {
		t.Fatalf("lease lost: %v", la.Err())
	}
	info, err := a.Status(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if info.Generation != la.Generation() {
		t.Fatalf("holder's generation (-want,+got): -%d +%d", info.Generation, la.Generation())
	}
	// A contender may take over at info.ExpiresAt; the holder must have
	// stopped trusting its lease by then.
	if end := lease.TrustEnd(la); end.After(info.ExpiresAt) {
		t.Errorf("holder trusts its lease until %s, %s after a contender may take it over (%s)",
			end.Format("15:04:05.000"), end.Sub(info.ExpiresAt), info.ExpiresAt.Format("15:04:05.000"))
	}
}

// TestFailedReleaseEndsContext: a Release whose free write fails has still
// stopped the heartbeat, so nothing keeps the lease: its context must end
// (the docs: cancelled when lost or released), or work bound to it runs on
// past the lease's expiry.
func TestFailedReleaseEndsContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	la, err := b.manager("a", lease.Options{}).Acquire(context.Background(), "job", 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.ft.set(func(r *http.Request) action {
		if isUpload(r) {
			return unavailable
		}
		return pass
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := la.Release(ctx); err == nil {
		t.Fatal("release with every write refused: want an error, got nil")
	}
	select {
	case <-la.Done():
	default:
		t.Fatal("after a failed release the heartbeat is stopped but the lease's context is still live")
	}
	if !errors.Is(context.Cause(la.Context()), lease.ErrNotHeld) {
		t.Errorf("cause (-want,+got): -%v +%v", lease.ErrNotHeld, context.Cause(la.Context()))
	}
}

// TestCheckSeesAClosedWindowBeforeTheHeartbeat: a holder paused past its
// trust window wakes with a context that is still live until its heartbeat
// goroutine runs and notices. Check must tell at once, so that the holder
// does not make an unfenced write (a tick's run insert) in that moment.
func TestCheckSeesAClosedWindowBeforeTheHeartbeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{})
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	lease.SetBeforeRenew(a, func(string) { once.Do(func() { close(paused); <-resume }) })
	t.Cleanup(func() {
		select {
		case <-resume:
		default:
			close(resume)
		}
	})
	// Heartbeat every second, trust window 2.4 s.
	l, err := a.Acquire(ctx, "job", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); err != nil {
		t.Fatalf("check right after acquire: %v", err)
	}
	<-paused
	time.Sleep(time.Until(lease.TrustEnd(l)) + 50*time.Millisecond)
	if l.Context().Err() != nil {
		t.Fatal("the paused heartbeat cancelled the context; the test needs it live")
	}
	if err := l.Check(); !errors.Is(err, lease.ErrLost) {
		t.Errorf("check past the trust window, heartbeat paused: %v, want ErrLost", err)
	}
	close(resume)
	waitDone(t, l, 5*time.Second)
	if err := l.Check(); !errors.Is(err, lease.ErrLost) {
		t.Errorf("check after the heartbeat saw the loss: %v, want ErrLost", err)
	}
}

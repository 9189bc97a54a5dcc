package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	bclock "github.com/baton-cron/baton/shared/clock"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/store"
)

func TestAcquireHeldReleaseReacquire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{})
	c := b.manager("c", lease.Options{})

	la, err := a.Acquire(ctx, "job", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if la.Epoch() != 1 || la.Holder() != "a" || la.Name() != "job" {
		t.Fatalf("first lease (-want,+got): -{job a 1} +{%s %s %d}", la.Name(), la.Holder(), la.Epoch())
	}

	info, err := a.Status(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(ctx, "job", 30*time.Second)
	var held *lease.HeldError
	if !errors.As(err, &held) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquirer: want *HeldError, got %v", err)
	}
	wantExp := info.Updated.Add(30*time.Second + lease.DefaultSkew)
	if held.Holder != "a" || held.Epoch != 1 || !held.ExpiresAt.Equal(wantExp) {
		t.Fatalf("held error (-want,+got): -{a 1 %s} +{%s %d %s}", wantExp, held.Holder, held.Epoch, held.ExpiresAt)
	}

	release(t, la)
	if !errors.Is(la.Err(), lease.ErrNotHeld) {
		t.Fatalf("Err after release: want ErrNotHeld, got %v", la.Err())
	}
	select {
	case <-la.Done():
	default:
		t.Fatal("context not cancelled by release")
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	free, err := a.Status(ctx, "job")
	if !errors.Is(err, lease.ErrNotFound) || free == nil || !free.Free || free.Epoch != 1 {
		t.Fatalf("status after release: want free with epoch 1 and ErrNotFound, got %+v, %v", free, err)
	}

	lc, err := c.Acquire(ctx, "job", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Epoch() != 2 {
		t.Fatalf("epoch after release and reacquire (-want,+got): -2 +%d", lc.Epoch())
	}
	release(t, lc)

	// The releasing manager re-acquires with one write and no read.
	la2, err := c.Acquire(ctx, "job", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if la2.Epoch() != 3 {
		t.Fatalf("epoch (-want,+got): -3 +%d", la2.Epoch())
	}
	release(t, la2)
}

func TestBadTTL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.manager("a", lease.Options{})
	for _, ttl := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
		if _, err := m.Acquire(context.Background(), "x", ttl); !errors.Is(err, lease.ErrBadTTL) {
			t.Errorf("ttl %s: want ErrBadTTL, got %v", ttl, err)
		}
	}
}

// TestConcurrentAcquirers: 50 acquirers race on one name, 30 rounds:
// exactly one wins each round, the rest get ErrHeld, and the epoch goes up
// by one per round. (30 rounds, not more: the lease object takes one write
// a round, and GCS allows one a second, so each round costs a second; the
// last round's winner, racing again, spaces its own write by that second.)
func TestConcurrentAcquirers(t *testing.T) {
	t.Parallel()
	const n, rounds = 50, 30
	ctx := context.Background()
	b := setup(t)
	ms := make([]*lease.Manager, n)
	for i := range ms {
		ms[i] = b.manager(fmt.Sprintf("h%02d", i), lease.Options{})
	}
	for round := range rounds {
		var wg sync.WaitGroup
		leases := make([]*lease.Lease, n)
		errs := make([]error, n)
		for i := range ms {
			wg.Go(func() { leases[i], errs[i] = ms[i].Acquire(ctx, "contended", 30*time.Second) })
		}
		wg.Wait()
		var winner *lease.Lease
		for i := range ms {
			switch {
			case errs[i] == nil && winner == nil:
				winner = leases[i]
			case errs[i] == nil:
				t.Fatalf("round %d: two winners: %s and %s", round, winner.Holder(), leases[i].Holder())
			case !errors.Is(errs[i], lease.ErrHeld):
				t.Fatalf("round %d: acquirer %d: want ErrHeld, got %v", round, i, errs[i])
			}
		}
		if winner == nil {
			t.Fatalf("round %d: no winner", round)
		}
		if winner.Epoch() != int64(round+1) {
			t.Fatalf("round %d: epoch (-want,+got): -%d +%d", round, round+1, winner.Epoch())
		}
		release(t, winner)
	}
}

// TestTakeoverAfterCrash: the holder stops heartbeating; a contender
// acquires after Updated + ttl + skew, not before, and the epoch goes up by
// one. The holder's own clock runs an hour fast, and that changes nothing:
// expiry is judged on the server's Updated time.
func TestTakeoverAfterCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const ttl, skew = 10 * time.Second, 3 * time.Second
	crashed := make(chan struct{})
	t.Cleanup(func() { close(crashed) })
	a := b.manager("a", lease.Options{Skew: skew, Clock: bclock.Func(func() time.Time { return time.Now().Add(time.Hour) })})
	lease.SetBeforeRenew(a, func(string) { <-crashed })
	la, err := a.Acquire(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	info, err := a.Status(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if info.Updated.IsZero() || info.AcquiredAt.Sub(info.Updated) < 59*time.Minute {
		t.Fatalf("want server Updated (%s) an hour before the holder's acquiredAt (%s)", info.Updated, info.AcquiredAt)
	}

	clk := &clock{}
	c := b.manager("c", lease.Options{Skew: skew, Clock: clk})
	expiry := info.Updated.Add(ttl + skew)
	clk.Set(expiry.Add(-time.Millisecond))
	if _, err := c.Acquire(ctx, "job", ttl); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("1ms before Updated+ttl+skew: want ErrHeld, got %v", err)
	}
	clk.Set(expiry)
	lc, err := c.Acquire(ctx, "job", ttl)
	if err != nil {
		t.Fatalf("at Updated+ttl+skew: %v", err)
	}
	if lc.Epoch() != la.Epoch()+1 {
		t.Fatalf("epoch after takeover (-want,+got): -%d +%d", la.Epoch()+1, lc.Epoch())
	}
	release(t, lc)
}

// TestPausedHolderIsFenced: the holder pauses past its ttl while another
// acquires. When it resumes, its next renew fails with 412, its context is
// cancelled, and its fenced write to the store is refused.
func TestPausedHolderIsFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	st := emutest.Store(t)
	runs := st.Collection("runs")
	if _, err := runs.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: "r1"}, {Key: "status", Value: "new"}}); err != nil {
		t.Fatal(err)
	}
	// Heartbeat every 2s, trust window 4.8s: a resumes well inside its
	// window, so what stops it is the 412 on its renew.
	const ttl = 6 * time.Second
	paused, resume := make(chan struct{}, 1), make(chan struct{})
	a := b.manager("a", lease.Options{})
	var once sync.Once
	lease.SetBeforeRenew(a, func(string) {
		once.Do(func() {
			paused <- struct{}{}
			<-resume
		})
	})
	la, err := a.Acquire(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	filter := bson.D{{Key: "_id", Value: "r1"}}
	set := func(v string) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: v}}}} }
	if err := runs.FencedUpdate(ctx, filter, la.Fence(), set("a-running")); err != nil {
		t.Fatalf("holder a's first fenced write: %v", err)
	}
	<-paused // a is now paused before its first renew

	info, err := a.Status(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{}
	clk.Set(info.ExpiresAt) // as far as c can tell, a's lease has expired
	c := b.manager("c", lease.Options{Clock: clk})
	lc, err := c.Acquire(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lc.Release(ctx) }() // cleanup only: what the test checks is the fenced writes below
	if err := runs.FencedUpdate(ctx, filter, lc.Fence(), set("c-running")); err != nil {
		t.Fatalf("holder c's fenced write: %v", err)
	}

	close(resume)
	waitDone(t, la, 5*time.Second)
	if err := la.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "412") {
		t.Fatalf("paused holder: want ErrLost from a 412 renew, got %v", err)
	}
	if cause := context.Cause(la.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("context cause: want ErrLost, got %v", cause)
	}
	err = runs.FencedUpdate(ctx, filter, la.Fence(), set("a-late"))
	if !errors.Is(err, store.ErrStaleFence) {
		t.Fatalf("paused holder's fenced write: want ErrStaleFence, got %v", err)
	}
	var doc struct {
		Status string `bson:"status"`
	}
	if err := runs.Get(ctx, "r1", &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Status != "c-running" {
		t.Fatalf("document status (-want,+got): -c-running +%s", doc.Status)
	}
	if err := la.Release(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("release of a lost lease: want ErrLost, got %v", err)
	}
}

// TestStaleReleaseKeepsNewHolder: a release with a stale generation does not
// free the new holder's lease.
func TestStaleReleaseKeepsNewHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const ttl = 3 * time.Second
	paused, resume := make(chan struct{}, 1), make(chan struct{})
	a := b.manager("a", lease.Options{})
	var once sync.Once
	lease.SetBeforeRenew(a, func(string) {
		once.Do(func() {
			paused <- struct{}{}
			<-resume
		})
	})
	la, err := a.Acquire(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	<-paused
	info, _ := a.Status(ctx, "job")
	clk := &clock{}
	clk.Set(info.ExpiresAt)
	c := b.manager("c", lease.Options{Clock: clk})
	// A long ttl: c must not renew between the two Status reads below, so
	// that any change of generation can only come from a's stale release.
	lc, err := c.Acquire(ctx, "job", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Status(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}

	// a does not know it lost: its release writes with its old generation.
	errc := make(chan error, 1)
	go func() { errc <- la.Release(ctx) }()
	close(resume)
	if err := <-errc; !errors.Is(err, lease.ErrLost) {
		t.Fatalf("stale release: want ErrLost, got %v", err)
	}
	after, err := c.Status(ctx, "job")
	if err != nil {
		t.Fatalf("new holder's lease after stale release: %v", err)
	}
	if after.Holder != "c" || after.Epoch != lc.Epoch() || after.Generation != before.Generation {
		t.Fatalf("new holder's lease changed (-want,+got): -{c %d %d} +{%s %d %d}", lc.Epoch(), before.Generation, after.Holder, after.Epoch, after.Generation)
	}
	if lc.Err() != nil {
		t.Fatalf("new holder lost its lease: %v", lc.Err())
	}
	release(t, lc)
}

// TestLostCreateResponse: the response to a create that the server applied
// is dropped. The library retries, gets 412, and the acquirer recognises its
// own write: it is the holder, exactly once.
func TestLostCreateResponse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.ft.set(nth(1, isUpload, dropResponse))
	a := b.manager("a", lease.Options{})
	la, err := a.Acquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire with a lost create response: %v", err)
	}
	if got := b.ft.dropped.Load(); got != 1 {
		t.Fatalf("dropped responses (-want,+got): -1 +%d", got)
	}
	if la.Epoch() != 1 {
		t.Fatalf("epoch (-want,+got): -1 +%d", la.Epoch())
	}
	info, err := a.Status(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if info.Holder != "a" || info.Generation != la.Generation() {
		t.Fatalf("stored lease (-want,+got): -{a %d} +{%s %d}", la.Generation(), info.Holder, info.Generation)
	}
	if _, err := b.manager("c", lease.Options{}).Acquire(ctx, "job", 10*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquirer: want ErrHeld, got %v", err)
	}
	release(t, la)
}

// TestLostTakeoverAndRenewResponses: lost responses on a takeover write and
// on a renew are recognised the same way; the lease survives.
func TestLostTakeoverAndRenewResponses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	// ttl 6s: renew every 2s, trust window 4.8s, so the retried renew has
	// seconds to spare even under the race detector on a loaded machine.
	const ttl = 6 * time.Second
	a := b.manager("a", lease.Options{})
	la, err := a.Acquire(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	release(t, la)

	c := b.manager("c", lease.Options{})
	b.ft.set(nth(1, isUpload, dropResponse))
	lc, err := c.Acquire(ctx, "job", ttl)
	if err != nil {
		t.Fatalf("takeover with a lost response: %v", err)
	}
	if lc.Epoch() != 2 || b.ft.dropped.Load() != 1 {
		t.Fatalf("(-want,+got): -epoch 2, 1 dropped +epoch %d, %d dropped", lc.Epoch(), b.ft.dropped.Load())
	}

	b.ft.set(nth(1, isUpload, dropResponse)) // the next renew
	waitFor(t, "two renews", 20*time.Second, func() bool { return lc.Renews() >= 2 || lc.Err() != nil })
	if lc.Err() != nil {
		t.Fatalf("renew with a lost response lost the lease: %v", lc.Err())
	}
	if b.ft.dropped.Load() != 2 {
		t.Fatalf("dropped (-want,+got): -2 +%d", b.ft.dropped.Load())
	}
	release(t, lc)
}

// TestRenew503ShorterThanTrustWindow: 503s on renew for less than the trust
// window: the lease survives.
func TestRenew503ShorterThanTrustWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{})
	// Renew every 2s, trust window 4.8s; three 503s cost well under a
	// second of backoff.
	la, err := a.Acquire(ctx, "job", 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.ft.set(nth(3, isUpload, unavailable))
	waitFor(t, "a renew after the 503s", 20*time.Second, func() bool { return la.Renews() >= 1 || la.Err() != nil })
	if la.Err() != nil {
		t.Fatalf("lease lost to a short 503 burst: %v", la.Err())
	}
	if got := b.ft.failed.Load(); got != 3 {
		t.Fatalf("503s served (-want,+got): -3 +%d", got)
	}
	release(t, la)
}

// TestRenew503LongerThanTrustWindow: 503s on renew for longer than the trust
// window: the holder stops by itself before anyone else can acquire.
func TestRenew503LongerThanTrustWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{})
	la, err := a.Acquire(ctx, "job", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.ft.set(func(r *http.Request) action {
		if isUpload(r) {
			return unavailable
		}
		return pass
	})
	waitDone(t, la, 10*time.Second)
	if !errors.Is(la.Err(), lease.ErrLost) {
		t.Fatalf("want ErrLost, got %v", la.Err())
	}
	// The holder has stopped; a contender on a correct clock must still
	// find the lease held.
	_, err = b.manager("c", lease.Options{}).Acquire(ctx, "job", 3*time.Second)
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("contender right after the holder stopped: want ErrHeld, got %v", err)
	}
	if b.ft.failed.Load() == 0 {
		t.Fatal("no 503 was served")
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{})

	t.Run("releases after fn", func(t *testing.T) {
		var epoch int64
		err := lease.Run(ctx, a, "run", 3*time.Second, func(ctx context.Context, l *lease.Lease) error {
			epoch = l.Epoch()
			if _, err := b.manager("c", lease.Options{}).Acquire(ctx, "run", 3*time.Second); !errors.Is(err, lease.ErrHeld) {
				return fmt.Errorf("inside Run: want ErrHeld, got %w", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Status(ctx, "run"); !errors.Is(err, lease.ErrNotFound) || epoch != 1 {
			t.Fatalf("after Run: want free (ErrNotFound) and epoch 1, got %v, epoch %d", err, epoch)
		}
	})
	t.Run("busy", func(t *testing.T) {
		l, err := b.manager("c", lease.Options{}).Acquire(ctx, "busy", 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer release(t, l)
		called := false
		err = lease.Run(ctx, a, "busy", 3*time.Second, func(context.Context, *lease.Lease) error { called = true; return nil })
		if !errors.Is(err, lease.ErrHeld) || called {
			t.Fatalf("want ErrHeld and fn not called, got %v, called=%v", err, called)
		}
	})
	t.Run("lost while running", func(t *testing.T) {
		err := lease.Run(ctx, a, "lost", 3*time.Second, func(ctx context.Context, l *lease.Lease) error {
			if err := a.Break(context.Background(), "lost"); err != nil {
				return err
			}
			<-ctx.Done() // the next renew gets 412
			return ctx.Err()
		})
		if !errors.Is(err, lease.ErrLost) || !errors.Is(err, context.Canceled) {
			t.Fatalf("want ErrLost joined with fn's context.Canceled, got %v", err)
		}
	})
}

func TestBreakAndList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{})
	l1, err := a.Acquire(ctx, "one", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := a.Acquire(ctx, "two", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, l2)

	infos, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, i := range infos {
		got[i.Name] = fmt.Sprintf("%s/%d/%s", i.Holder, i.Epoch, i.TTL)
	}
	want := map[string]string{"one": "a/1/3s", "two": "a/1/10s"}
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("List (-want,+got): -%v +%v", want, got)
	}

	if err := a.Break(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l1, 5*time.Second)
	if !errors.Is(l1.Err(), lease.ErrLost) {
		t.Fatalf("broken holder: want ErrLost, got %v", l1.Err())
	}
	if err := a.Break(ctx, "one"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("break of a free lease: want ErrNotFound, got %v", err)
	}
	l3, err := b.manager("c", lease.Options{}).Acquire(ctx, "one", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l3.Epoch() != 2 {
		t.Fatalf("epoch after break (-want,+got): -2 +%d", l3.Epoch())
	}
	release(t, l3)
	if _, err := a.Status(ctx, "never"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("status of a lease never taken: want ErrNotFound, got %v", err)
	}
}

// TestAcquireWait: a waiter gets the lease soon after the holder releases it,
// and gives up with the held error when its context ends first.
func TestAcquireWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{})
	la, err := a.Acquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.manager("c", lease.Options{}).AcquireWait(short, "job", 3*time.Second); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("wait past the deadline: want DeadlineExceeded and ErrHeld, got %v", err)
	}

	got := make(chan *lease.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := b.manager("c", lease.Options{}).AcquireWait(ctx, "job", 3*time.Second)
		if err != nil {
			errc <- err
			return
		}
		got <- l
	}()
	release(t, la)
	select {
	case l := <-got:
		if l.Epoch() != 2 {
			t.Fatalf("waiter's epoch (-want,+got): -2 +%d", l.Epoch())
		}
		release(t, l)
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("waiter did not get the released lease")
	}
}

// TestAppliedCreateWithFailedAnswer: the server applied the create but the
// client got a non-retryable error. A read recognises the token: the
// acquirer is the holder, and nobody else is.
func TestAppliedCreateWithFailedAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.ft.set(nth(1, isUpload, appliedThen400))
	la, err := b.manager("a", lease.Options{}).Acquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire whose applied create answered 400: %v", err)
	}
	if b.ft.dropped.Load() != 1 || la.Epoch() != 1 {
		t.Fatalf("(-want,+got): -1 dropped, epoch 1 +%d dropped, epoch %d", b.ft.dropped.Load(), la.Epoch())
	}
	if _, err := b.manager("c", lease.Options{}).Acquire(ctx, "job", 10*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquirer: want ErrHeld, got %v", err)
	}
	release(t, la)
}

// TestReleaseUnreadKeepsNewHolder: a holder that was taken over without
// knowing it (its heartbeat has not run since) releases. With
// ReleaseUnread and the store's markers it does not read first, so it
// writes a marker naming its own epoch and token, and answers nil where
// the reading release answers ErrLost. Either way the new holder keeps
// the lease: its object is untouched, a third manager is refused, and
// once the new holder releases the third takes it. Released late, after
// the new holder's own release, the stale marker does not replace the
// newer one: the lease stays free.
func TestReleaseUnreadKeepsNewHolder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		unread, late bool
	}{{"read", false, false}, {"unread", true, false}, {"unread, after the new holder's release", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t)
			// A store of its own: the marker's key is the lease's name.
			markers := emutest.Store(t).LeaseMarkers()
			a := b.manager("a", lease.Options{Markers: markers, ReleaseUnread: tc.unread})
			// A long ttl: a's heartbeat (every ttl/3) does not run before
			// its release, so a does not learn it lost.
			la, err := a.Acquire(ctx, "job", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			info, err := a.Status(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			clk := &clock{}
			clk.Set(info.ExpiresAt)
			c := b.manager("c", lease.Options{Clock: clk, Markers: markers})
			lc, err := c.Acquire(ctx, "job", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			d := b.manager("d", lease.Options{Markers: markers})
			if tc.late {
				release(t, lc)
				if err := la.Release(ctx); err != nil {
					t.Fatalf("stale unread release: %v, want nil", err)
				}
				ld, err := d.Acquire(ctx, "job", 30*time.Second)
				if err != nil {
					t.Fatalf("acquire after the new holder released and the stale one wrote its marker: %v, want the lease free", err)
				}
				release(t, ld)
				return
			}
			before, err := c.Status(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			err = la.Release(ctx)
			switch {
			case tc.unread && err != nil:
				t.Fatalf("unread stale release: %v, want nil (it does not read, so it cannot know)", err)
			case !tc.unread && !errors.Is(err, lease.ErrLost):
				t.Fatalf("stale release: %v, want ErrLost", err)
			}
			after, err := c.Status(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if after.Holder != "c" || after.Free || after.Epoch != lc.Epoch() || after.Generation != before.Generation {
				t.Fatalf("new holder's lease after the stale release: %+v, want c's at epoch %d, generation %d, held", after, lc.Epoch(), before.Generation)
			}
			var held *lease.HeldError
			if _, err := d.Acquire(ctx, "job", 30*time.Second); !errors.As(err, &held) || held.Holder != "c" {
				t.Fatalf("a third manager's acquire while c holds: %v, want held by c", err)
			}
			if lc.Err() != nil {
				t.Fatalf("new holder lost its lease: %v", lc.Err())
			}
			release(t, lc)
			ld, err := d.Acquire(ctx, "job", 30*time.Second)
			if err != nil {
				t.Fatalf("acquire after the new holder released: %v", err)
			}
			if ld.Epoch() <= lc.Epoch() {
				t.Errorf("epoch %d after %d: the fence must only go up", ld.Epoch(), lc.Epoch())
			}
			release(t, ld)
		})
	}
}

// TestRetainLeavesItHeldToOthers: a retained lease writes nothing and
// stays held to every other manager until it expires, while its own
// manager takes it again at once, one epoch up. Once another manager has
// taken it over (after its expiry), the retaining manager's next acquire
// meets that holder instead of writing over it.
func TestRetainLeavesItHeldToOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.manager("a", lease.Options{ObjectWriteGap: -1})
	la, err := a.Acquire(ctx, "r", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gen := la.Generation()
	if err := la.Retain(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(la.Err(), lease.ErrNotHeld) || la.Context().Err() == nil {
		t.Errorf("a retained lease: Err %v, context %v; want ErrNotHeld and its context ended", la.Err(), la.Context().Err())
	}
	info, err := a.Status(ctx, "r")
	if err != nil || info.Holder != "a" || info.Free || info.Generation != gen {
		t.Fatalf("after Retain: %+v, %v; want still held by a, unwritten (generation %d)", info, err, gen)
	}
	other := b.manager("other", lease.Options{ObjectWriteGap: -1})
	var held *lease.HeldError
	if _, err := other.Acquire(ctx, "r", 30*time.Second); !errors.As(err, &held) || held.Holder != "a" {
		t.Fatalf("another manager's acquire of a retained lease: %v, want held by a", err)
	}
	la2, err := a.Acquire(ctx, "r", 30*time.Second)
	if err != nil || la2.Epoch() != la.Epoch()+1 {
		t.Fatalf("a's own acquire of the lease it retained: %v, %v; want it at epoch %d", la2, err, la.Epoch()+1)
	}
	if err := la2.Retain(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ = a.Status(ctx, "r")
	clk := &clock{}
	clk.Set(info.ExpiresAt)
	late := b.manager("late", lease.Options{Clock: clk, ObjectWriteGap: -1})
	ll, err := late.Acquire(ctx, "r", 30*time.Second)
	if err != nil {
		t.Fatalf("acquire after the retained lease expired: %v", err)
	}
	if _, err := a.Acquire(ctx, "r", 30*time.Second); !errors.As(err, &held) || held.Holder != "late" {
		t.Fatalf("a's acquire after another took the lease over: %v, want held by late", err)
	}
	if ll.Err() != nil {
		t.Errorf("late's lease: %v, want held", ll.Err())
	}
	release(t, ll)
}

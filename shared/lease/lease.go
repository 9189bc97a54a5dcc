package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/storage"

	"github.com/baton-cron/baton/shared/store"
)

// Lease is a held lease. It heartbeats in the background until Release or
// loss; its Context is cancelled on either.
type Lease struct {
	m      *Manager
	name   string
	ttl    time.Duration
	token  string
	epoch  int64
	ctx    context.Context
	cancel context.CancelCauseFunc

	stop     chan struct{}
	stopOnce sync.Once
	stopped  chan struct{}

	mu        sync.Mutex
	st        state     // last state we wrote (generation, record)
	lastRenew time.Time // monotonic: when the last successful write was sent
	// unconfirmed is when the earliest renew that ended in an error since
	// the last success was sent: it may have been applied, and if a later
	// renew finds it was, the server's Updated counts from it.
	unconfirmed time.Time
	err         error // ErrLost (wrapped) or ErrNotHeld once over
	released    bool
	renews      int64
	// noMarker makes Release write the free state instead of a marker
	// (tests only: ReleaseFreeState).
	noMarker bool
}

// start makes a Lease from the state our acquire wrote, and starts its
// heartbeat. sent is when the write was sent: the server stamped Updated
// after that, so a trust window counted from sent ends no later than
// Updated + ttl − safetyMargin.
func (m *Manager) start(name string, ttl time.Duration, st state, sent time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{
		m: m, name: name, ttl: ttl, token: st.Token, epoch: st.Epoch,
		ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), stopped: make(chan struct{}),
		st: st, lastRenew: sent,
	}
	go l.heartbeat()
	return l
}

// Name returns the lease name.
func (l *Lease) Name() string { return l.name }

// Holder returns the holder id.
func (l *Lease) Holder() string { return l.m.holder }

// Epoch returns the fencing token: it is higher than that of every earlier
// holder of this lease.
func (l *Lease) Epoch() int64 { return l.epoch }

// TTL returns the lease's ttl.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Context is cancelled when the lease is lost (a renew got 412, or the trust
// window closed) or released. context.Cause tells which.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is closed when Context is cancelled.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err returns nil while the lease is held, an error wrapping ErrLost after
// loss, and ErrNotHeld after Release.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Check returns nil while the lease can be relied on at this instant: not
// released, not lost, and inside its trust window. Context can lag behind
// that: a holder that wakes from a pause (GC, SIGSTOP, a frozen VM) past its
// trust window runs on until the heartbeat goroutine sees the window closed
// and cancels it. Check answers from the clock at once, so call it before a
// write that no fence protects. It changes nothing: the heartbeat still
// decides the loss.
func (l *Lease) Check() error {
	if err := l.Err(); err != nil {
		return err
	}
	if end := l.trustEnd(); !time.Now().Before(end) {
		return fmt.Errorf("%w: lease %q: trust window closed %s ago without a successful renew", ErrLost, l.name, time.Since(end).Round(time.Millisecond))
	}
	return nil
}

// Generation returns the generation of the lease object as last written by
// this holder.
func (l *Lease) Generation() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.Generation
}

// Renews returns the number of successful renews so far.
func (l *Lease) Renews() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renews
}

// Fence returns the fencing token for store.FencedUpdate.
func (l *Lease) Fence() store.Fence {
	return store.Fence{Field: store.DefaultFenceField, Epoch: l.epoch}
}

// trustEnd is lastSuccessfulRenew + ttl − safetyMargin, monotonic.
func (l *Lease) trustEnd() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastRenew.Add(l.ttl - l.m.safetyMargin(l.ttl))
}

// lose records the loss and cancels the context, once.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	first := l.err == nil
	if first {
		l.err = err
	}
	l.mu.Unlock()
	if first {
		l.m.met.LeaseLost(l.ctx, l.name) // a counter's Add ignores cancellation
	}
	l.m.log.Warn("lease lost", "lease", l.name, "holder", l.m.holder, "epoch", l.epoch, "err", err)
	l.cancel(err)
}

func (l *Lease) heartbeat() {
	defer close(l.stopped)
	interval := HeartbeatInterval(l.ttl)
	next := time.NewTimer(interval)
	defer next.Stop()
	for {
		end := l.trustEnd()
		trust := time.NewTimer(time.Until(end))
		select {
		case <-l.stop:
			trust.Stop()
			return
		case <-trust.C:
			l.lose(fmt.Errorf("%w: lease %q: trust window closed without a successful renew", ErrLost, l.name))
			return
		case <-next.C:
			trust.Stop()
		}
		if hook := l.m.beforeRenew; hook != nil {
			hook(l.name)
		}
		// Release may have been asked for during a pause; it writes with the
		// generation we have, which tells whether the lease is still ours.
		select {
		case <-l.stop:
			return
		default:
		}
		// A pause (GC, SIGSTOP, a blocked hook) can outlast the window
		// between the timers and here; never renew on a closed window.
		if !time.Now().Before(end) {
			l.lose(fmt.Errorf("%w: lease %q: trust window closed without a successful renew", ErrLost, l.name))
			return
		}
		before := time.Now()
		err := l.renew(end)
		switch {
		case err == nil:
			wait := interval
			l.mu.Lock()
			resynced := l.lastRenew.Before(before)
			l.mu.Unlock()
			if resynced {
				// The window counts from an earlier renew found applied,
				// so it is shorter than usual: renew within half of what
				// is left of it.
				wait = max(min(interval, time.Until(l.trustEnd())/2), MinHeartbeat)
			}
			next.Reset(wait)
		case errors.Is(err, ErrLost):
			l.lose(err)
			return
		default:
			// The library has already retried until its deadline (the end
			// of the trust window) or met a non-retryable error. Try again
			// shortly; the trust timer decides when to give up.
			l.m.log.Warn("lease renew failed; retrying", "lease", l.name, "err", err)
			next.Reset(min(interval, 200*time.Millisecond))
		}
	}
}

// renew rewrites the object with GenerationMatch(current), with a deadline
// at the end of the trust window. It returns an error wrapping ErrLost when
// the lease is no longer ours.
func (l *Lease) renew(end time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	l.mu.Lock()
	st := l.st
	l.mu.Unlock()
	rec := st.record
	rec.RenewedAt = l.m.now()
	if err := l.m.space(ctx, l.m.objectName(l.name)); err != nil {
		return fmt.Errorf("lease %q: renew: %w", l.name, err)
	}
	sent := time.Now()
	nst, err := l.m.write(ctx, l.name, rec, storage.Conditions{GenerationMatch: st.Generation})
	if err != nil && isPreconditionFailed(err) {
		// Either someone else wrote (lost), or our own renew was applied and
		// its response lost, and the library's retry met our new generation.
		cur, rerr := l.m.read(ctx, l.name)
		if rerr != nil && !errors.Is(rerr, ErrNotFound) {
			l.mu.Lock()
			if l.unconfirmed.IsZero() {
				l.unconfirmed = sent
			}
			l.mu.Unlock()
			return fmt.Errorf("lease %q: renew: re-read after 412: %w", l.name, rerr)
		}
		if rerr != nil || cur.Token != l.token || cur.Epoch != l.epoch || cur.Holder != l.m.holder {
			return fmt.Errorf("%w: lease %q: renew got 412: now held by %q epoch %d", ErrLost, l.name, cur.Holder, cur.Epoch)
		}
		nst, err = cur, nil
		// The write found applied may be an earlier renew that answered an
		// error, sent before this one: count the window from that one.
		l.mu.Lock()
		if !l.unconfirmed.IsZero() && l.unconfirmed.Before(sent) {
			sent = l.unconfirmed
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.unconfirmed.IsZero() {
			l.unconfirmed = sent
		}
		return fmt.Errorf("lease %q: renew: %w", l.name, err)
	}
	l.st = nst
	l.lastRenew = sent
	l.unconfirmed = time.Time{}
	l.renews++
	return nil
}

// Release stops the heartbeat and frees the lease. It reads the lease
// object and, when it is still ours, writes the release marker
// (marker.go), which frees the lease without writing its object again;
// when the marker cannot be written, it writes the free state (holder "",
// epoch kept) with GenerationMatch of the generation it saw. Releasing a
// lost lease returns its loss error; releasing twice returns nil. A release
// that finds someone else holding the lease changes nothing and returns
// ErrLost. The lease's context ends in every case, a failed release
// included.
func (l *Lease) Release(ctx context.Context) (err error) {
	l.stopOnce.Do(func() { close(l.stop) })
	// Once asked to stop, nothing renews the lease: its context ends even
	// when the free write fails (the lease then expires on its own).
	defer func() {
		if err != nil {
			l.cancel(fmt.Errorf("%w: %w", ErrNotHeld, err))
		}
	}()
	select {
	case <-l.stopped:
	case <-ctx.Done():
		return fmt.Errorf("lease %q: release: %w", l.name, ctx.Err())
	}
	l.mu.Lock()
	st, lost, released := l.st, l.err, l.released
	l.mu.Unlock()
	if released {
		return nil
	}
	if lost != nil {
		return lost
	}
	// The release marker (marker.go) frees the lease without writing its
	// object, which its acquire wrote moments ago for a short run. One read
	// first: a holder that was taken over (or broken) without knowing it
	// must learn so, and a marker would tell it nothing.
	var (
		cur  state
		rerr error
	)
	if l.m.releaseUnread && l.m.markers != nil {
		// Options.ReleaseUnread: the marker names our epoch and token,
		// which free nobody else's acquisition, and the store's write
		// never replaces a newer acquisition's marker.
		cur = st
	} else {
		cur, rerr = l.m.read(ctx, l.name)
	}
	if rerr == nil && cur.Holder == l.m.holder && cur.Token == l.token && cur.Epoch == l.epoch && !l.noMarker {
		merr := l.m.writeMarker(ctx, l.name, cur.record)
		if merr == nil {
			cur.Released = true
			l.settleRelease(cur)
			return nil
		}
		// The free state on the object does the same, one write more.
		l.m.log.Warn("lease release marker failed; writing the free state instead", "lease", l.name, "err", merr)
		st = cur
	}
	freeRec := st.record
	freeRec.Holder = ""
	freeRec.RenewedAt = l.m.now()
	if err := l.m.space(ctx, l.m.objectName(l.name)); err != nil {
		return fmt.Errorf("lease %q: release: %w", l.name, err)
	}
	nst, err := l.m.write(ctx, l.name, freeRec, storage.Conditions{GenerationMatch: st.Generation})
	if err != nil && isPreconditionFailed(err) {
		cur, rerr := l.m.read(ctx, l.name)
		switch {
		case rerr == nil && cur.free() && cur.Token == l.token && cur.Epoch == l.epoch:
			nst, err = cur, nil // our release applied; its response was lost
		case rerr == nil && cur.Holder == l.m.holder && cur.Token == l.token && cur.Epoch == l.epoch:
			// Still ours: a renew was applied but its answer was an error,
			// so our generation is behind. Free it from the one we see, or
			// it stays held, unrenewed, until it expires.
			nst, err = l.m.write(ctx, l.name, freeRec, storage.Conditions{GenerationMatch: cur.Generation})
		case rerr == nil || errors.Is(rerr, ErrNotFound):
			lostErr := fmt.Errorf("%w: lease %q: release got 412: now held by %q epoch %d", ErrLost, l.name, cur.Holder, cur.Epoch)
			l.lose(lostErr)
			return lostErr
		default:
			return fmt.Errorf("lease %q: release: re-read after 412: %w", l.name, rerr)
		}
	}
	if err != nil && !isPreconditionFailed(err) {
		// The free state may have landed with its answer lost (a store
		// that does not retry it into a 412, as Firestore's): a read
		// that shows it, with our token, is our release.
		if cur, rerr := l.m.read(ctx, l.name); rerr == nil && cur.free() && cur.Token == l.token && cur.Epoch == l.epoch {
			nst, err = cur, nil
		}
	}
	if err != nil {
		return fmt.Errorf("lease %q: release: %w", l.name, err)
	}
	l.settleRelease(nst)
	return nil
}

// Retain ends this holder's use of the lease without releasing it: the
// heartbeat stops and Context ends, as with Release, but nothing is
// written. The lease stays held in its store until its TTL runs out, so
// another manager meets it held until then; this manager's next Acquire
// of it writes over it at once, on the generation it wrote last (a write
// by anyone else since fails that, and the Acquire reads as usual). It is
// for a lease whose next acquire is due after its TTL anyway, or in this
// process: a decider shard's, which the next tick, a minute away, takes
// again (scheduler.Config.LapseShardLeases). Its release's write is saved.
// A lease already lost answers its loss; one whose last renew ended in an
// error (it may have landed, so the generation known may be behind) is
// released instead.
func (l *Lease) Retain(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	select {
	case <-l.stopped:
	case <-ctx.Done():
		l.cancel(fmt.Errorf("%w: retained: %w", ErrNotHeld, ctx.Err()))
		return fmt.Errorf("lease %q: retain: %w", l.name, ctx.Err())
	}
	l.mu.Lock()
	st, lost, released, unconfirmed := l.st, l.err, l.released, !l.unconfirmed.IsZero()
	l.mu.Unlock()
	if released || lost != nil {
		return lost
	}
	if unconfirmed {
		// A renew ended in an error and may have landed: the generation
		// we know may be behind, and our next acquire would meet our own
		// write as someone else's until it expired. Release instead.
		return l.Release(ctx)
	}
	// Free to this manager's next Acquire, which writes over it with
	// GenerationMatch; to everyone else it is held until it expires.
	st.Released = true
	l.settle(st)
	l.m.log.Debug("lease retained", "lease", l.name, "holder", l.m.holder, "epoch", l.epoch)
	return nil
}

// settleRelease records a successful release that left the lease as nst, for
// this manager's next acquire of it, and ends the lease's context.
func (l *Lease) settleRelease(nst state) {
	l.settle(nst)
	l.m.log.Debug("lease released", "lease", l.name, "holder", l.m.holder, "epoch", l.epoch, "marker", nst.Released)
}

// settle ends the lease as nst, which this manager's next acquire of it
// starts from (after a release, or Retain), and ends its context.
func (l *Lease) settle(nst state) {
	l.mu.Lock()
	l.released = true
	l.err = ErrNotHeld
	l.st = nst
	l.mu.Unlock()
	l.m.mu.Lock()
	l.m.free[l.name] = nst
	l.m.mu.Unlock()
	l.cancel(ErrNotHeld)
}

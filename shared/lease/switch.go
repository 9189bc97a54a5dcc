package lease

import (
	"context"
	"errors"
	"fmt"
)

// Switching the job-lease store.
//
// Job leases live in one ObjectStore (Options.JobLeases, or the bucket),
// under the same object name in either. A deployment that switches store
// (BATON_JOB_LEASE_STORE) runs both for a while: an instance of the old
// revision finishing a run holds its lease in the old store while the new
// revision acquires in the new one. Two objects for one lease would be two
// leases, so, as for the spread names (spread.go), the first Acquire of a
// job lease whose object is missing in its store retires the object the
// other store keeps (Options.OtherJobLeases): while it is held and live
// the lease is held (HeldError); otherwise it is overwritten, under its
// generation, by a tombstone (TombstoneHolder) that a manager keeping its
// job leases there never takes. The new object starts above the epoch the
// retired one reached, so fences only grow.
//
// Switching back finds a tombstone in the store it returns to: with
// OtherJobLeases set, a tombstone at a lease's own name reads as "moved
// away", and the Acquire retires the other store's object in the same way
// before it overwrites the tombstone. A manager without OtherJobLeases (an
// older version) takes the tombstone for a holder that never lets go,
// which keeps it out. Each side writes its own object only after it has
// retired the other's under the generation it read free, both with a
// compare-and-set, so at no moment do both stores hold a live lease.
//
// This costs a read and a tombstone write in the other store once per job
// lease (the first Acquire after its object is missing); later Acquires
// find their own object and never look at the other store.

// switching reports whether lease name's object in its store is to be
// checked against the other store's: a job lease (or a name
// AlsoInJobLeases names) with OtherJobLeases set.
func (m *Manager) switching(name string) bool {
	return m.other != nil && m.inJobStore(name)
}

// retireOther makes sure that the other store holds no live lease name,
// and leaves a tombstone there, returning the epoch that store's object
// reached. A live holder there is a *HeldError.
func (m *Manager) retireOther(ctx context.Context, name string) (int64, error) {
	object := m.objectName(name)
	for range maxAcquireSteps {
		var gen, epoch int64
		o, err := m.other.ReadObject(ctx, object)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return 0, fmt.Errorf("lease %q: read the other store's object: %w", name, err)
		default:
			if o.Record.Holder == TombstoneHolder {
				return o.Record.Epoch, nil
			}
			st := state{record: o.Record, Generation: o.Generation, Updated: o.Updated}
			if st, err = m.released(ctx, name, st); err != nil {
				return 0, err
			}
			if exp := st.expiresAt(m.skew); !st.free() && m.now().Before(exp) {
				m.met.LeaseConflict(ctx, name)
				return 0, &HeldError{Name: name, Holder: st.Holder, Epoch: st.Epoch, ExpiresAt: exp}
			}
			gen, epoch = o.Generation, o.Record.Epoch
		}
		now := m.now()
		tomb := record{Holder: TombstoneHolder, Epoch: epoch, TTLSeconds: tombstoneTTL.Seconds(), AcquiredAt: now, RenewedAt: now, Token: randomHex(8)}
		_, err = m.other.WriteObject(ctx, object, tomb, gen)
		if err == nil {
			m.log.Info("lease: the other job-lease store's object retired; the lease lives in this one now", "lease", name, "object", object, "epoch", epoch)
			return epoch, nil
		}
		if !isPreconditionFailed(err) {
			// A tombstone that landed with its answer lost reads as one
			// next round; any other outcome is read again too.
			if again, rerr := m.other.ReadObject(ctx, object); rerr == nil && again.Record.Token == tomb.Token {
				return epoch, nil
			}
			return 0, fmt.Errorf("lease %q: retire the other store's object: %w", name, err)
		}
	}
	return 0, fmt.Errorf("lease %q: retire the other store's object: gave up after %d contended rounds", name, maxAcquireSteps)
}

// released applies the release markers (the store's, then the bucket's)
// to a held state, as readLease does.
func (m *Manager) released(ctx context.Context, name string, st state) (state, error) {
	if st.free() {
		return st, nil
	}
	if m.markers != nil {
		// The store's marker first: it is where this manager's releases
		// go. A bucket marker (an older release, a manager without a
		// store) is read only when the store's does not match.
		rel, err := m.storeReleased(ctx, name, st)
		if err != nil || rel {
			st.Released = rel
			return st, err
		}
	}
	k, ok, err := m.readMarker(ctx, name)
	if err != nil {
		return state{}, err
	}
	st.Released = ok && k.matches(st)
	return st, nil
}

// otherStatus is the Info of lease name in the other store while a live
// holder has it there (a switch in flight), and nil otherwise.
func (m *Manager) otherStatus(ctx context.Context, name string) (*Info, error) {
	o, err := m.other.ReadObject(ctx, m.objectName(name))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease %q: read the other store's object: %w", name, err)
	}
	if o.Record.Holder == TombstoneHolder {
		return nil, nil
	}
	st, err := m.released(ctx, name, state{record: o.Record, Generation: o.Generation, Updated: o.Updated})
	if err != nil {
		return nil, err
	}
	if st.free() || !m.now().Before(st.expiresAt(m.skew)) {
		return nil, nil
	}
	return m.info(name, st), nil
}

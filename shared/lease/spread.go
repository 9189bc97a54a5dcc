package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/storage"
)

// Spread job leases.
//
// Cloud Storage keeps a bucket's object names in one lexicographic index
// and splits a range only when it runs hot; names that grow in sequence
// keep writing to one range (https://cloud.google.com/storage/docs/request-rate,
// "Use a naming convention that distributes load evenly across key
// ranges"). Job leases are written once per run, so at 10,000 runs a minute
// the names leases/job-<id>.json, which are as sequential as the schedule
// ids, would put a few hundred writes a second on one range. A job lease
// therefore lives under a two-hex-digit directory taken from a hash of its
// name: PREFIX + hh/ + NAME + ".json", hh the first byte of SHA-256(NAME).
// Its release marker sits beside it. The lease's name, and so the fence
// token targets receive (job-<id>:<epoch>), is unchanged.
//
// The upgrade. A process of an older version takes the same lease at the
// flat name PREFIX+NAME+".json" (the legacy object). Two objects for one
// lease would be two leases, so the first Acquire of a spread lease whose
// object does not exist yet retires the legacy object first: it reads it;
// while it is held and live the lease is held (HeldError, and the run is
// tried again later); otherwise it overwrites it, with a generation
// precondition, by a tombstone that names a holder forever (TombstoneHolder,
// a TTL of a century). An older process then finds the legacy object held
// and never takes it again, so the two versions exclude each other through
// the upgrade without draining anything first. The new object starts one
// epoch above the legacy one (and above the EpochFloor), so fences only
// grow. This costs one read and one write per job lease, once: later
// Acquires find the new object and never look at the legacy one.

// SpreadLeasePrefix is the name prefix of the leases that are spread:
// the scheduler's job leases (job-<id>, and a sharded schedule's
// job-<id>-<i>).
const SpreadLeasePrefix = "job-"

// TombstoneHolder is the holder a retired legacy object names, forever,
// so that a process of an older version never takes it again.
const TombstoneHolder = "moved-to-spread-name"

// tombstoneTTL is the retired legacy object's TTL: long enough that no
// older process ever sees it expire.
const tombstoneTTL = 100 * 365 * 24 * time.Hour

// spreads reports whether lease name lives under a hash directory.
func (m *Manager) spreads(name string) bool {
	return !m.flat && strings.HasPrefix(name, SpreadLeasePrefix)
}

// SpreadDir is the hash directory of a spread lease name, "hh/".
func SpreadDir(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:1]) + "/"
}

// nameOf is the lease name of an object name relative to the prefix
// (without ".json"): the spread ones drop their hash directory. legacy
// is true for the flat object of a name that this manager spreads.
func (m *Manager) nameOf(rel string) (name string, legacy bool) {
	if len(rel) > 3 && rel[2] == '/' {
		if rest := rel[3:]; m.spreads(rest) && SpreadDir(rest) == rel[:3] {
			return rest, false
		}
	}
	return rel, m.spreads(rel)
}

// ObjectName is the object that holds lease name, for operators and tests
// (Info.Object says the same of a listed lease).
func (m *Manager) ObjectName(name string) string { return m.objectName(name) }

// legacyName is the flat object an older version keeps lease name in.
func (m *Manager) legacyName(name string) string { return m.prefix + name + ".json" }

// legacyStatus is the Info of lease name at its flat object while a live
// older process holds it there, and nil otherwise (no object, free,
// released, expired or retired).
func (m *Manager) legacyStatus(ctx context.Context, name string) (*Info, error) {
	attrs, err := m.gcs.handle(m.legacyName(name)).Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease %q: read legacy object: %w", name, err)
	}
	rec, ok := recordFromMetadata(attrs.Metadata)
	if !ok || rec.Holder == TombstoneHolder || rec.Holder == "" {
		return nil, nil
	}
	st := state{record: rec, Generation: attrs.Generation, Updated: attrs.Updated}
	k, ok, err := m.readMarkerObject(ctx, name, m.legacyName(name)+markerSuffix)
	if err != nil {
		return nil, err
	}
	if st.Released = ok && k.matches(st); st.Released || !m.now().Before(st.expiresAt(m.skew)) {
		return nil, nil
	}
	i := m.info(name, st)
	i.Object = attrs.Name
	return i, nil
}

// retireLegacy makes sure that no process of an older version can take
// lease name at its flat object, and returns the epoch that object
// reached (0 when there is none). A live holder there is a *HeldError.
func (m *Manager) retireLegacy(ctx context.Context, name string) (int64, error) {
	obj := m.gcs.handle(m.legacyName(name))
	for range maxAcquireSteps {
		var (
			epoch int64
			cond  = storage.Conditions{DoesNotExist: true}
		)
		attrs, err := obj.Attrs(ctx)
		switch {
		case errors.Is(err, storage.ErrObjectNotExist):
		case err != nil:
			return 0, fmt.Errorf("lease %q: read legacy object: %w", name, err)
		default:
			rec, ok := recordFromMetadata(attrs.Metadata)
			if !ok {
				return 0, fmt.Errorf("lease %q: legacy object %s is not a lease", name, attrs.Name)
			}
			if rec.Holder == TombstoneHolder {
				return rec.Epoch, nil
			}
			st := state{record: rec, Generation: attrs.Generation, Updated: attrs.Updated}
			if !st.free() {
				k, ok, err := m.readMarkerObject(ctx, name, m.legacyName(name)+markerSuffix)
				if err != nil {
					return 0, err
				}
				st.Released = ok && k.matches(st)
			}
			if exp := st.expiresAt(m.skew); !st.free() && m.now().Before(exp) {
				m.met.LeaseConflict(ctx, name)
				return 0, &HeldError{Name: name, Holder: st.Holder, Epoch: st.Epoch, ExpiresAt: exp}
			}
			epoch, cond = rec.Epoch, storage.Conditions{GenerationMatch: attrs.Generation}
		}
		now := m.now()
		tomb := record{Holder: TombstoneHolder, Epoch: epoch, TTLSeconds: tombstoneTTL.Seconds(), AcquiredAt: now, RenewedAt: now, Token: randomHex(8)}
		if err := m.space(ctx, m.legacyName(name)); err != nil {
			return 0, fmt.Errorf("lease %q: retire legacy object: %w", name, err)
		}
		_, err = m.writeTo(ctx, m.legacyName(name), name, tomb, cond)
		if err == nil {
			m.log.Info("lease: legacy object retired; the lease lives at its spread name now", "lease", name, "legacy", m.legacyName(name), "object", m.objectName(name), "epoch", epoch)
			return epoch, nil
		}
		if !isPreconditionFailed(err) {
			return 0, fmt.Errorf("lease %q: retire legacy object: %w", name, err)
		}
		// An older process took it, or another acquirer retired it: read
		// again.
	}
	return 0, fmt.Errorf("lease %q: retire legacy object: gave up after %d contended rounds", name, maxAcquireSteps)
}

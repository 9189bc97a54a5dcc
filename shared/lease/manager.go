package lease

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/metrics"
)

// Options configures a Manager. The zero value is usable.
type Options struct {
	// Holder is this process's unique holder id; default
	// "hostname-pid-random".
	Holder string
	// Skew is the clock-skew allowance added to a lease's expiry; default 2s.
	Skew time.Duration
	// SafetyMargin shortens the holder's own trust window
	// (lastSuccessfulRenew + ttl − SafetyMargin); default ttl/5.
	SafetyMargin time.Duration
	// Clock is the wall clock used to judge expiry against the server's
	// Updated time and to stamp acquiredAt/renewedAt; nil means the wall
	// clock.
	Clock clock.Clock
	// Logger receives lease events; nil discards them.
	Logger *slog.Logger
	// EpochFloor, when set, is asked for the highest epoch that the fenced
	// store holds for a lease whose object does not exist. A lease store
	// that forgets (a deleted object, a lifecycle rule, a new bucket, an
	// emulator restarted without its data) would otherwise start again at
	// epoch 1, below the fences already written, and every fenced write
	// would be refused until the epoch caught up. The new lease's epoch is
	// one above the floor. An error fails the Acquire: creating the lease
	// at a guess could only stall its holder.
	EpochFloor func(ctx context.Context, name string) (int64, error)
	// FloorEachAcquire, when set, names the leases whose EpochFloor is
	// asked on every Acquire, not only when the object is missing, and
	// whose next epoch is then above the floor as well as above the
	// object's. It is for lease names that write one fence field in turn
	// (the scheduler's single tick lease and its decider shards' leases):
	// their epochs do not order against each other, so a lease that has
	// not been taken for a while is behind the fences the others wrote,
	// and every fenced write of its holder would be refused as stale.
	// It costs one EpochFloor call per Acquire of those names.
	FloorEachAcquire func(name string) bool
	// Metrics counts conflicts and losses; nil records into
	// metrics.Default().
	Metrics *metrics.Set
	// ObjectWriteGap is the least time between two writes this manager
	// sends to one object; zero means MinObjectWriteGap, Cloud Storage's
	// rate. Negative turns the spacing off: only for a test that drives
	// many lease cycles in simulated time against a stand-in with no rate
	// limit (a lax emulator), where a real second per cycle would be all
	// the test's time and prove nothing about the rate.
	ObjectWriteGap time.Duration
	// Flat keeps every lease at PREFIX+NAME+".json", job leases included,
	// with no hash directory and no legacy retirement (spread.go): the
	// layout of versions before the spread, for a test that plays an older
	// process. A deployment never sets it: all of its processes must agree
	// on where a lease lives.
	Flat bool
	// Markers, when set, keeps the release markers (marker.go) there
	// instead of in the bucket: a Cloud Storage marker is a Class A write
	// per release, a Firestore document a write unit, about a twentieth
	// of the price (docs/cost.md). Markers already in the bucket are
	// still honoured, so leases released before the switch, or by a
	// manager without it, read as released.
	Markers MarkerStore
	// JobLeases, when set, keeps the job leases (the names that spread,
	// spread.go) there instead of in the bucket: a Firestore document
	// (mongostore.LeaseObjects) is a write unit per acquire, a Cloud
	// Storage object a Class A write, about a twentieth of the price
	// (docs/cost.md). Every other lease (the tick lease) stays in the
	// bucket. All of a deployment's processes must agree on it, as on the
	// names; switching is an upgrade that retires the other store's
	// object (switch.go).
	JobLeases ObjectStore
	// OtherJobLeases is the store the job leases are not kept in (the
	// bucket when JobLeases is set, else a Firestore store), so that a
	// switch between the two, which runs both for a while, never lets
	// both hold one lease (switch.go). nil: no switch is guarded.
	OtherJobLeases ObjectStore
	// AlsoInJobLeases, when set, names leases besides the job leases that
	// JobLeases keeps, with the same switch between stores: the
	// scheduler's decider shard leases (scheduler.TickShardLease), which a
	// partitioned tick takes for each shard with something due, every
	// minute. In the bucket each acquire is a Class A write ($5 per
	// million), in Firestore a write unit ($0.26): docs/cost.md. Their
	// names are not spread (spread.go); every process of a deployment must
	// agree on it, as on JobLeases.
	AlsoInJobLeases func(name string) bool
	// ReleaseUnread makes Release write its marker without reading the
	// lease first, when Markers is set. The read tells a holder that was
	// taken over without knowing it that it was (Release then answers
	// ErrLost), and keeps it from writing a marker over the newer
	// holder's. Exclusion does not need the first: a marker frees a lease
	// only when it names the epoch and token the lease holds, and a newer
	// holder's are not ours. The store's marker write gives the second: it
	// never replaces a newer acquisition's marker (a bucket marker would,
	// so without Markers the read stays). The scheduler sets it: it only
	// logs what Release answers, and the read is a read unit and a round
	// trip on every run (docs/cost.md). A release whose marker write fails
	// writes the free state on the generation it last wrote, and reads
	// only if that is refused.
	ReleaseUnread bool
}

// MarkerStore keeps release markers outside the bucket. A marker is the
// epoch and token of the acquisition it releases, under a key (the
// marker's object name); a write replaces the key's marker and must be
// visible to every read that follows it (strong consistency), as a Cloud
// Storage object's is. Exclusion does not rest on it: a marker frees a
// lease only when it names the epoch and token its object holds, which
// only the holder knows and writes after its heartbeat has stopped.
type MarkerStore interface {
	// WriteReleaseMarker records that the acquisition (epoch, token) is
	// released. Rewriting the same value is harmless, so it may retry.
	WriteReleaseMarker(ctx context.Context, key string, epoch int64, token string) error
	// ReadReleaseMarker returns the key's marker; ok is false when there
	// is none.
	ReadReleaseMarker(ctx context.Context, key string) (epoch int64, token string, ok bool, err error)
}

// DefaultSkew is the clock-skew allowance when Options.Skew is zero.
const DefaultSkew = 2 * time.Second

// MinHeartbeat is the shortest heartbeat period: GCS allows about one write
// per second to one object.
const MinHeartbeat = time.Second

// Manager acquires and inspects leases under one bucket prefix. It is safe
// for concurrent use.
type Manager struct {
	bucket *storage.BucketHandle
	// gcs is the bucket as an ObjectStore; jobs is Options.JobLeases
	// (nil: the bucket).
	gcs  *gcsObjects
	jobs ObjectStore
	// other is Options.OtherJobLeases.
	other ObjectStore
	// also is Options.AlsoInJobLeases.
	also   func(name string) bool
	prefix string
	holder string
	skew   time.Duration
	margin time.Duration
	now    func() time.Time
	log    *slog.Logger
	floor  func(ctx context.Context, name string) (int64, error)
	// floorEach is Options.FloorEachAcquire.
	floorEach func(name string) bool
	met       *metrics.Set

	backoff gax.Backoff
	// beforeRenew, when set (tests only), runs before each renew; it may
	// block to simulate a paused holder.
	beforeRenew func(name string)

	mu sync.Mutex
	// free caches the state this manager left by its own release, so the
	// next acquire can write directly with GenerationMatch, skipping a read.
	free map[string]state
	// lastWrite is when this manager's last write to each object was (or
	// will be) sent, monotonic: writes to one object are spaced by
	// MinObjectWriteGap (marker.go).
	lastWrite map[string]time.Time
	// writeGap is Options.ObjectWriteGap with its default applied.
	writeGap time.Duration
	// flat is Options.Flat.
	flat bool
	// markers is Options.Markers; nil keeps markers in the bucket.
	markers MarkerStore
	// releaseUnread is Options.ReleaseUnread.
	releaseUnread bool
}

// NewManager returns a Manager for leases stored as PREFIX+NAME+".json" in
// b, or PREFIX+hh/+NAME+".json" for job leases (spread.go).
func NewManager(b *storage.BucketHandle, prefix string, o Options) *Manager {
	m := &Manager{
		bucket:    b,
		gcs:       newGCSObjects(b),
		jobs:      o.JobLeases,
		other:     o.OtherJobLeases,
		also:      o.AlsoInJobLeases,
		prefix:    prefix,
		holder:    o.Holder,
		skew:      o.Skew,
		margin:    o.SafetyMargin,
		now:       clock.Or(o.Clock).Now,
		log:       o.Logger,
		floor:     o.EpochFloor,
		floorEach: o.FloorEachAcquire,
		met:       metrics.Or(o.Metrics),
		backoff:   gax.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2},
		free:      map[string]state{},

		lastWrite: map[string]time.Time{},
		writeGap:  o.ObjectWriteGap,
		flat:      o.Flat,
		markers:   o.Markers,

		releaseUnread: o.ReleaseUnread,
	}
	if m.writeGap == 0 {
		m.writeGap = MinObjectWriteGap
	}
	if m.holder == "" {
		m.holder = defaultHolder()
	}
	if m.skew == 0 {
		m.skew = DefaultSkew
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m
}

// objectsFor is the store that keeps lease name.
func (m *Manager) objectsFor(name string) ObjectStore {
	if m.jobs != nil && m.inJobStore(name) {
		return m.jobs
	}
	return m.gcs
}

// inJobStore reports whether lease name is kept where the job leases are:
// a job lease, or a name Options.AlsoInJobLeases names.
func (m *Manager) inJobStore(name string) bool {
	return m.spreads(name) || m.also != nil && m.also(name)
}

// Holder returns this manager's holder id.
func (m *Manager) Holder() string { return m.holder }

// Skew returns the clock-skew allowance in use.
func (m *Manager) Skew() time.Duration { return m.skew }

func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(4))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// HeartbeatInterval is how often a lease with this ttl is renewed: ttl/3,
// but never more often than MinHeartbeat.
func HeartbeatInterval(ttl time.Duration) time.Duration {
	return max(ttl/3, MinHeartbeat)
}

func (m *Manager) safetyMargin(ttl time.Duration) time.Duration {
	if m.margin > 0 {
		return m.margin
	}
	return ttl / 5
}

func (m *Manager) validate(name string, ttl time.Duration) error {
	if name == "" || strings.HasPrefix(name, "/") {
		return fmt.Errorf("lease: invalid name %q", name)
	}
	window := ttl - m.safetyMargin(ttl)
	if hb := HeartbeatInterval(ttl); window <= hb {
		return fmt.Errorf("%w: ttl %s leaves a trust window of %s, not longer than the heartbeat period %s", ErrBadTTL, ttl, window, hb)
	}
	return nil
}

// maxAcquireSteps bounds the read/write rounds of one Acquire; every round
// is caused by another writer winning a race, so a few suffice.
const maxAcquireSteps = 6

// Acquire takes the lease, or fails with a *HeldError (errors.Is(err,
// ErrHeld)) when another live holder has it. On success the lease
// heartbeats until Release or loss. The lease's context does not inherit
// ctx's cancellation: ctx bounds Acquire only.
func (m *Manager) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	if err := m.validate(name, ttl); err != nil {
		return nil, err
	}
	token := randomHex(8)
	now := m.now()
	rec := record{Holder: m.holder, Epoch: 1, TTLSeconds: ttl.Seconds(), AcquiredAt: now, RenewedAt: now, Token: token}

	// First move: a direct write when we know the state (our own release),
	// else a read. A lease never seen is created with DoesNotExist.
	var cur state
	var known bool
	m.mu.Lock()
	if st, ok := m.free[name]; ok {
		cur, known = st, true
		delete(m.free, name)
	}
	m.mu.Unlock()

	// firstSent is when this Acquire first sent a write: a write recognised
	// by its token after a 412 was applied no earlier than that, so the trust
	// window counted from it is conservative.
	var firstSent time.Time
	floor := int64(-1) // asked once, the first time the object is missing
	for step := 0; step < maxAcquireSteps; step++ {
		if !known {
			st, err := m.readLease(ctx, name)
			switch {
			case errors.Is(err, ErrNotFound):
				cur = state{} // generation 0: DoesNotExist
			case err != nil:
				return nil, fmt.Errorf("lease %q: acquire: %w", name, err)
			default:
				cur = st
			}
		}
		known = false
		// moved: a tombstone at the lease's own name, left when the job
		// leases went to the other store (switch.go); taken like a
		// missing object, once the other store's is retired.
		moved := cur.Generation != 0 && cur.Holder == TombstoneHolder && m.switching(name)
		if cur.Generation != 0 && !cur.free() && !moved {
			if cur.Token == token {
				// Our own write, whose response was lost (see below).
				return m.start(name, ttl, cur, firstSent), nil //nolint:contextcheck // the lease outlives Acquire's ctx: its heartbeat runs on the lease's own context until Release or loss
			}
			if exp := cur.expiresAt(m.skew); m.now().Before(exp) {
				m.met.LeaseConflict(ctx, name)
				return nil, &HeldError{Name: name, Holder: cur.Holder, Epoch: cur.Epoch, ExpiresAt: exp}
			}
		}
		cond := storage.Conditions{DoesNotExist: true}
		rec.Epoch = 1
		if (cur.Generation == 0 || moved) && (m.floor != nil || m.spreads(name) || m.switching(name)) {
			if floor < 0 {
				var f int64
				if m.floor != nil {
					var err error
					if f, err = m.floor(ctx, name); err != nil {
						return nil, fmt.Errorf("lease %q: acquire: epoch floor: %w", name, err)
					}
					if f > 0 {
						m.log.Warn("lease object missing; its epoch starts above the fences the store holds", "lease", name, "floor", f)
					}
				}
				if m.spreads(name) {
					// Before the first write at the spread name: no older
					// process may hold, or take, the flat one.
					legacy, err := m.retireLegacy(ctx, name)
					if err != nil {
						return nil, err
					}
					f = max(f, legacy)
				}
				if m.switching(name) {
					// Nor may a manager keeping job leases in the other
					// store hold, or take, it there (switch.go).
					other, err := m.retireOther(ctx, name)
					if err != nil {
						return nil, err
					}
					f = max(f, other)
				}
				floor = max(f, 0)
			}
			rec.Epoch = floor + 1
		}
		if moved {
			cond = storage.Conditions{GenerationMatch: cur.Generation}
			rec.Epoch = max(rec.Epoch, cur.Epoch+1)
		} else if cur.Generation != 0 {
			cond = storage.Conditions{GenerationMatch: cur.Generation}
			rec.Epoch = cur.Epoch + 1
			if m.floor != nil && m.floorEach != nil && m.floorEach(name) {
				// Another lease name may have fenced past this one's epoch
				// (Options.FloorEachAcquire).
				f, err := m.floor(ctx, name)
				if err != nil {
					return nil, fmt.Errorf("lease %q: acquire: epoch floor: %w", name, err)
				}
				rec.Epoch = max(rec.Epoch, f+1)
			}
		}
		if err := m.space(ctx, m.objectName(name)); err != nil {
			return nil, fmt.Errorf("lease %q: acquire: %w", name, err)
		}
		sent := time.Now()
		if firstSent.IsZero() {
			firstSent = sent
		}
		st, err := m.write(ctx, name, rec, cond)
		if err == nil {
			m.log.Debug("lease acquired", "lease", name, "holder", m.holder, "epoch", rec.Epoch, "generation", st.Generation, "takeover", cur.Generation != 0 && !cur.free())
			return m.start(name, ttl, st, sent), nil //nolint:contextcheck // the lease outlives Acquire's ctx: its heartbeat runs on the lease's own context until Release or loss
		}
		if !isPreconditionFailed(err) {
			// The write may still have been applied (the library gave up
			// retrying after the server acted). If a read shows our token,
			// the lease is ours; otherwise, if it was applied, it expires
			// unrenewed and nobody runs meanwhile.
			if again, rerr := m.read(ctx, name); rerr == nil && again.Token == token && !again.free() {
				return m.start(name, ttl, again, firstSent), nil //nolint:contextcheck // the lease outlives Acquire's ctx: its heartbeat runs on the lease's own context until Release or loss
			}
			return nil, fmt.Errorf("lease %q: acquire: %w", name, err)
		}
		// 412: someone else wrote first, or our own write was applied and
		// its response lost, so the library's retry met our own generation.
		// The next read tells which (by token).
		m.met.LeaseConflict(ctx, name)
	}
	return nil, fmt.Errorf("lease %q: acquire: gave up after %d contended rounds", name, maxAcquireSteps)
}

// AcquireWait retries Acquire until it succeeds or ctx is done. While the
// lease is held it polls at the holder's expiry, but at least every
// heartbeat period, so a release is seen soon too.
func (m *Manager) AcquireWait(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	backoff := 100 * time.Millisecond
	for {
		l, err := m.Acquire(ctx, name, ttl)
		if err == nil {
			return l, nil
		}
		if errors.Is(err, ErrBadTTL) || ctx.Err() != nil {
			return nil, err
		}
		wait := backoff
		var held *HeldError
		if errors.As(err, &held) {
			wait = min(max(held.ExpiresAt.Sub(m.now()), 10*time.Millisecond), HeartbeatInterval(ttl))
			backoff = 100 * time.Millisecond
		} else {
			m.log.Warn("lease acquire failed; retrying", "lease", name, "err", err)
			backoff = min(backoff*2, HeartbeatInterval(ttl))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lease %q: acquire wait: %w (last: %w)", name, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Info describes a lease as stored.
type Info struct {
	// Name is the lease name; Object the object's name in the bucket.
	Name, Object string
	// Holder is the holder id; empty when the lease is free.
	Holder string
	// Epoch is the fencing epoch (kept in the free state).
	Epoch int64
	// TTL is the holder's ttl.
	TTL time.Duration
	// AcquiredAt and RenewedAt are the holder's own stamps (informational).
	AcquiredAt, RenewedAt time.Time
	// Updated is the server's time of the last write; expiry is judged on it.
	Updated time.Time
	// ExpiresAt is Updated + TTL + skew.
	ExpiresAt time.Time
	// Generation is the object's generation.
	Generation int64
	// Free is true for a released or broken lease.
	Free bool
}

// Live reports whether the lease is held and not expired at now.
func (i *Info) Live(now time.Time) bool { return !i.Free && now.Before(i.ExpiresAt) }

func (m *Manager) info(name string, st state) *Info {
	if st.Released {
		// Its holder has let go (release marker): shown as a free state.
		st.Holder = ""
	}
	return &Info{
		Name: name, Object: m.objectName(name), Holder: st.Holder, Epoch: st.Epoch, TTL: st.ttl(),
		AcquiredAt: st.AcquiredAt, RenewedAt: st.RenewedAt, Updated: st.Updated,
		ExpiresAt: st.expiresAt(m.skew), Generation: st.Generation, Free: st.free(),
	}
}

// Status returns the lease as stored. When the lease is free it returns
// ErrNotFound, with a non-nil *Info (carrying the last epoch) if the object
// exists in the free state, and a nil one if it does not exist.
func (m *Manager) Status(ctx context.Context, name string) (*Info, error) {
	st, err := m.readLease(ctx, name)
	if m.switching(name) && (errors.Is(err, ErrNotFound) || err == nil && st.Holder == TombstoneHolder) {
		// Not taken in this store since a switch: a manager keeping job
		// leases in the other store may hold it there (switch.go).
		if i, oerr := m.otherStatus(ctx, name); oerr != nil || i != nil {
			return i, oerr
		}
		if err == nil {
			return m.info(name, state{record: record{Epoch: st.Epoch}, Generation: st.Generation, Updated: st.Updated}), ErrNotFound
		}
	}
	if errors.Is(err, ErrNotFound) && m.spreads(name) {
		// Not taken at its spread name yet: during an upgrade an older
		// process may hold it at the flat one (spread.go), and the sweep
		// must not think its run's executor dead.
		if i, lerr := m.legacyStatus(ctx, name); lerr != nil || i != nil {
			return i, lerr
		}
	}
	if err != nil {
		return nil, err
	}
	i := m.info(name, st)
	if i.Free {
		return i, ErrNotFound
	}
	return i, nil
}

// List returns every lease object under the prefix, free ones included.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	it := m.bucket.Objects(ctx, &storage.Query{Prefix: m.prefix})
	var attrs []*storage.ObjectAttrs
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("lease: list %q: %w", m.prefix, err)
		}
		attrs = append(attrs, a)
	}
	out := m.infos(ctx, attrs, false)
	if m.jobs == nil {
		return out, nil
	}
	for tok := ""; ; {
		objs, next, err := m.jobs.ListObjects(ctx, m.prefix, MaxListPage, tok)
		if err != nil {
			return nil, fmt.Errorf("lease: list %q: %w", m.prefix, err)
		}
		out = append(out, m.jobInfos(ctx, objs)...)
		if tok = next; tok == "" {
			return out, nil
		}
	}
}

// jobInfos turns a page of Options.JobLeases objects into lease infos,
// with their release markers applied (one marker read per held lease);
// tombstones (switch.go) are not leases.
func (m *Manager) jobInfos(ctx context.Context, objs []Object) []Info {
	out := make([]Info, 0, len(objs))
	for _, o := range objs {
		rel, ok := strings.CutSuffix(strings.TrimPrefix(o.Name, m.prefix), ".json")
		if !ok || o.Record.Holder == TombstoneHolder {
			continue
		}
		name, _ := m.nameOf(rel)
		st, err := m.released(ctx, name, state{record: o.Record, Generation: o.Generation, Updated: o.Updated})
		if err != nil {
			m.log.Warn("lease: list: release marker unreadable; shown as held", "lease", name, "err", err)
			st = state{record: o.Record, Generation: o.Generation, Updated: o.Updated}
		}
		i := m.info(name, st)
		i.Object = o.Name
		out = append(out, *i)
	}
	return out
}

// infos turns a listing into lease infos, skipping what is not a lease and
// applying the release markers (marker.go) listed beside them. The listing
// is in name order and complete up to its last object; with more (a page
// that others follow), a held lease whose marker would sort after the
// page's last object has its marker read: it may be on the next page.
// That is at most one read a page, for its last lease.
func (m *Manager) infos(ctx context.Context, attrs []*storage.ObjectAttrs, more bool) []Info {
	last := ""
	if len(attrs) > 0 {
		last = attrs[len(attrs)-1].Name
	}
	markers := map[string]marker{} // by object name
	for _, a := range attrs {
		if _, ok := strings.CutSuffix(a.Name, ".json"+markerSuffix); ok {
			if k, ok := markerFromMetadata(a.Metadata); ok {
				markers[strings.TrimSuffix(a.Name, markerSuffix)] = k
			}
		}
	}
	out := make([]Info, 0, len(attrs))
	for _, a := range attrs {
		rel, ok := strings.CutSuffix(strings.TrimPrefix(a.Name, m.prefix), ".json")
		if !ok {
			continue
		}
		name, legacy := m.nameOf(rel)
		var st state
		var err error
		if legacy {
			// An older version's object of a spread lease: shown while such
			// a process holds it (an upgrade in flight), not once retired.
			rec, ok := recordFromMetadata(a.Metadata)
			if !ok || rec.Holder == TombstoneHolder {
				continue
			}
			st = state{record: rec, Generation: a.Generation, Updated: a.Updated}
		} else if st, err = m.stateFromAttrs(ctx, name, a); err != nil {
			m.log.Warn("lease: list: skipping object", "object", a.Name, "err", err)
			continue
		} else if st.Holder == TombstoneHolder && m.switching(name) {
			// The lease lives in the other store (switch.go). A job lease
			// the bucket has and JobLeases does not (not taken since a
			// switch) is shown from here: its first acquire in JobLeases
			// turns it into a tombstone first, so it is never shown twice.
			continue
		}
		if !st.free() {
			k, ok := markers[a.Name]
			if !ok && more && a.Name+markerSuffix > last {
				var err error
				if k, ok, err = m.readMarkerObject(ctx, name, a.Name+markerSuffix); err != nil {
					m.log.Warn("lease: list: release marker unreadable; shown as held", "lease", name, "err", err)
				}
			}
			st.Released = ok && k.matches(st)
			if !st.Released && m.markers != nil {
				rel, err := m.storeReleased(ctx, name, st)
				if err != nil {
					m.log.Warn("lease: list: release marker unreadable; shown as held", "lease", name, "err", err)
				}
				st.Released = rel
			}
		}
		i := m.info(name, st)
		i.Object = a.Name // a legacy object is not where the lease lives now
		out = append(out, *i)
	}
	return out
}

// MaxListPage is the largest page ListPage returns.
const MaxListPage = 500

// ListPage returns one page of lease objects under the prefix, free ones
// included, in object-name order (job leases sort by their hash directory,
// spread.go), and the token of the
// next page ("" on the last). It is built on the bucket list's own page
// token and maxResults, so a page of n reads at most n objects however
// deep it is: no skipping. pageSize must be 1..MaxListPage. A pageToken
// that is not one ListPage returned for this prefix gives
// ErrBadPageToken.
//
// A page may hold fewer than pageSize leases while more follow: objects
// under the prefix that are not leases (no .json suffix, or unreadable)
// are counted against the page and skipped, as List skips them. Release
// markers (NAME.json.released, marker.go) are such objects. A lease whose
// marker is on its page is shown free without another read; the page's
// last lease, whose marker may be on the next page, costs one metadata
// read when it is held.
func (m *Manager) ListPage(ctx context.Context, pageSize int, pageToken string) ([]Info, string, error) {
	if pageSize < 1 || pageSize > MaxListPage {
		return nil, "", fmt.Errorf("lease: list page: page size %d is not between 1 and %d", pageSize, MaxListPage)
	}
	gcsToken, jobs, err := m.decodePageToken(pageToken)
	if err != nil {
		return nil, "", err
	}
	if jobs {
		// The bucket's pages are done; the job leases follow from
		// Options.JobLeases, on that store's own tokens.
		objs, next, err := m.jobs.ListObjects(ctx, m.prefix, pageSize, gcsToken)
		if err != nil {
			return nil, "", fmt.Errorf("lease: list page %q: %w", m.prefix, err)
		}
		return m.jobInfos(ctx, objs), m.encodeJobsToken(next, next != ""), nil
	}
	q := &storage.Query{Prefix: m.prefix}
	// Only what stateFromAttrs reads: the list answers with less.
	if err := q.SetAttrSelection([]string{"Name", "Generation", "Updated", "Metadata"}); err != nil {
		return nil, "", fmt.Errorf("lease: list page: %w", err)
	}
	var attrs []*storage.ObjectAttrs
	next, err := iterator.NewPager(m.bucket.Objects(ctx, q), pageSize, gcsToken).NextPage(&attrs)
	if err != nil {
		// GCS answers 400 to a page token it did not issue (or one from a
		// different query); the caller edited ours.
		var ge *googleapi.Error
		if pageToken != "" && errors.As(err, &ge) && ge.Code == http.StatusBadRequest {
			return nil, "", fmt.Errorf("lease: list page %q: %w", m.prefix, ErrBadPageToken)
		}
		return nil, "", fmt.Errorf("lease: list page %q: %w", m.prefix, err)
	}
	// A lease's marker sorts right after it, so it is on the same page
	// unless the page ends between them; then the marker is read.
	tok := m.encodePageToken(next)
	if next == "" && m.jobs != nil {
		tok = m.encodeJobsToken("", true)
	}
	return m.infos(ctx, attrs, next != ""), tok, nil
}

// pageToken is what ListPage's tokens carry: the bucket list's own token,
// and the prefix it was issued for, so that a token from another list (or
// made up) is refused rather than passed on to GCS.
type pageToken struct {
	Prefix string `json:"p"`
	Token  string `json:"t"`
	// Jobs: the page is of Options.JobLeases, Token that store's (""
	// for its first page).
	Jobs bool `json:"j,omitempty"`
}

// encodeJobsToken is the token of a page of Options.JobLeases; "" when
// more is false (the last page).
func (m *Manager) encodeJobsToken(storeToken string, more bool) string {
	if !more {
		return ""
	}
	b, _ := json.Marshal(pageToken{Prefix: m.prefix, Token: storeToken, Jobs: true}) // strings and a bool cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func (m *Manager) encodePageToken(gcsToken string) string {
	if gcsToken == "" {
		return ""
	}
	b, _ := json.Marshal(pageToken{Prefix: m.prefix, Token: gcsToken}) // two strings cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func (m *Manager) decodePageToken(s string) (tok string, jobs bool, err error) {
	if s == "" {
		return "", false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var t pageToken
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Prefix != m.prefix || t.Token == "" && !t.Jobs || t.Jobs && m.jobs == nil {
		return "", false, fmt.Errorf("lease: list page: %w", ErrBadPageToken)
	}
	return t.Token, t.Jobs, nil
}

// Break frees the lease whoever holds it, keeping its epoch, so the next
// acquirer gets epoch+1 and the old holder's next renew gets 412. It is for
// operators. A lease already free gives ErrNotFound.
func (m *Manager) Break(ctx context.Context, name string) error {
	for step := 0; step < maxAcquireSteps; step++ {
		st, err := m.readLease(ctx, name)
		if err != nil {
			return fmt.Errorf("lease %q: break: %w", name, err)
		}
		if st.free() {
			return fmt.Errorf("lease %q: break: %w", name, ErrNotFound)
		}
		freeRec := record{Epoch: st.Epoch, TTLSeconds: st.TTLSeconds, AcquiredAt: st.AcquiredAt, RenewedAt: m.now()}
		if err := m.space(ctx, m.objectName(name)); err != nil {
			return fmt.Errorf("lease %q: break: %w", name, err)
		}
		_, err = m.write(ctx, name, freeRec, storage.Conditions{GenerationMatch: st.Generation})
		if err == nil {
			m.log.Warn("lease broken", "lease", name, "holder", st.Holder, "epoch", st.Epoch)
			return nil
		}
		if !isPreconditionFailed(err) {
			return fmt.Errorf("lease %q: break: %w", name, err)
		}
	}
	return fmt.Errorf("lease %q: break: gave up after %d contended rounds", name, maxAcquireSteps)
}

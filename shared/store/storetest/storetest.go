package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// Harness opens the stores the suite runs against. An implementation of
// the storage layer supplies one.
type Harness interface {
	// Open returns a store for one case, with its own Meter, and arranges
	// (t.Cleanup) for it to be closed. Every collection the case names must
	// start empty: a fresh database per call does that, and so does one
	// database shared by a whole run, since each case uses collection
	// names no other case uses.
	Open(t *testing.T) *mongostore.Store
	// Faults returns the fault injector for st, a store Open returned; or
	// nil and the reason when this implementation cannot inject faults,
	// which skips the cases that need it with that reason.
	Faults(t *testing.T, st *mongostore.Store) (Faults, string)
}

// BackendHarness opens the stores of an implementation that is not
// mongostore (shared/store/memstore): the suite runs its domain cases on
// the Backend, and skips the primitive cases, which test mongostore's
// Collection, with the reason that this Backend has none.
type BackendHarness interface {
	// OpenBackend is Harness.Open for any Backend.
	OpenBackend(t *testing.T) store.Backend
	// BackendFaults is Harness.Faults for a Backend OpenBackend returned.
	BackendFaults(t *testing.T, b store.Backend) (Faults, string)
}

// mongoHarness runs a Harness as a BackendHarness.
type mongoHarness struct{ h Harness }

func (m mongoHarness) OpenBackend(t *testing.T) store.Backend { return m.h.Open(t) }

func (m mongoHarness) BackendFaults(t *testing.T, b store.Backend) (Faults, string) {
	return m.h.Faults(t, b.(*mongostore.Store))
}

// CollectionPrefixer is implemented by a harness whose stores share a
// database with other runs or other data (a real endpoint, where the
// database must exist beforehand and is not the suite's to drop). Every
// collection the suite uses is then named with this prefix, unique to the
// run, so that the harness can drop exactly those collections at the end.
// Without it the prefix is DefaultCollectionPrefix.
type CollectionPrefixer interface {
	CollectionPrefix() string
}

// ViewPrefix is the CollectionPrefix a CollectionPrefixer harness gives
// the stores it opens for case t: its own prefix, then a short hash of
// the case's name. The domain views use fixed collection names (runs,
// schedules, gpu_jobs, ...), and each case must find them empty, as it
// would in a database of its own.
func ViewPrefix(t *testing.T, prefix string) string {
	h := sha256.Sum256([]byte(t.Name()))
	return prefix + hex.EncodeToString(h[:4]) + "_"
}

// DefaultCollectionPrefix begins the suite's collection names when the
// harness does not choose a prefix.
const DefaultCollectionPrefix = "storetest_"

// Faults injects server failures into the commands of one store's
// database, the way MongoDB's failCommand fail point does. There is one
// fail point per server, so the suite runs its fault cases one at a time,
// and a harness's other users must not arm it meanwhile. Each armed fault
// ends when the case does (t.Cleanup) or when its count runs out.
type Faults interface {
	// Refuse makes the next times of the named commands (insert, update,
	// delete, findAndModify) on coll answer the server error code without
	// running: 112 is Firestore's Aborted, 262 its DeadlineExceeded.
	Refuse(t *testing.T, coll string, times int, code int32, commands ...string)
	// LoseAnswer makes the next times of the named commands on coll run,
	// and then answer code in place of their result: a write that landed
	// whose answer was lost. An injector that can refuse but not this
	// calls t.Skip with its reason.
	LoseAnswer(t *testing.T, coll string, times int, code int32, commands ...string)
}

// Server error codes the fault cases inject.
const (
	// CodeAborted is MongoDB's WriteConflict, Firestore's Aborted: the
	// write was not applied.
	CodeAborted int32 = 112
	// CodeDeadlineExceeded is MongoDB's ExceededTimeLimit, Firestore's
	// DeadlineExceeded: the write may have been applied.
	CodeDeadlineExceeded int32 = 262
	// CodeInternal is InternalError, which nothing retries.
	CodeInternal int32 = 1
)

// Racers is how many goroutines the race cases start at once: the issue's
// 20, enough to make a lost compare-and-set show up on every run.
const Racers = 20

// Run runs the whole suite against h, each case as a subtest of t. The
// cases run one after another (the fault cases share one fail point, and
// the race cases should not compete with each other for the machine).
func Run(t *testing.T, h Harness) {
	s := &suite{h: mongoHarness{h}, prefix: t.Name() + "/", collPrefix: DefaultCollectionPrefix}
	if p, ok := h.(CollectionPrefixer); ok {
		s.collPrefix, s.prefixer = p.CollectionPrefix(), p
	}
	s.run(t)
}

// RunBackend runs the whole suite against h, as Run does, for a Backend
// that is not mongostore.
func RunBackend(t *testing.T, h BackendHarness) {
	s := &suite{h: h, prefix: t.Name() + "/", collPrefix: DefaultCollectionPrefix}
	if p, ok := h.(CollectionPrefixer); ok {
		s.collPrefix, s.prefixer = p.CollectionPrefix(), p
	}
	s.run(t)
}

func (s *suite) run(t *testing.T) {
	t.Run("CompareAndSet", s.compareAndSet)
	t.Run("Idempotency", s.idempotency)
	t.Run("Fence", s.fence)
	t.Run("Page", s.page)
	t.Run("Meter", s.meter)
	t.Run("Errors", s.errorCodes)
	t.Run("Faults", s.faults)
	t.Run("Schedules", s.schedules)
	t.Run("Catalog", s.catalog)
	t.Run("Calendars", s.calendars)
	t.Run("Versions", s.versions)
	t.Run("Runs", s.runs)
	t.Run("Notices", s.notices)
	t.Run("GPU", s.gpu)
}

type suite struct {
	h          BackendHarness
	prefixer   CollectionPrefixer // the harness's, or nil
	prefix     string             // the name of Run's t, and a slash
	collPrefix string             // begins every collection name
}

// coll opens a store for the case t and a collection on it named after
// the case, so that cases sharing a database never share a collection.
func (s *suite) coll(t *testing.T) (*mongostore.Store, *mongostore.Collection) {
	t.Helper()
	st := s.mongo(t, s.h.OpenBackend(t))
	return st, st.Collection(s.collName(t))
}

// mongo is b as mongostore's Store, for a case that tests mongostore's
// primitives; it skips t for another Backend, which has none.
func (s *suite) mongo(t *testing.T, b store.Backend) *mongostore.Store {
	t.Helper()
	st, ok := b.(*mongostore.Store)
	if !ok {
		t.Skipf("this case tests mongostore's Collection, the building block of the MongoDB implementation; %T has none (its domain methods are tested by the other cases)", b)
	}
	return st
}

// collName is the collection prefix, then t's name below Run's folded to
// lower-case letters, digits and underscores: unique to the case.
func (s *suite) collName(t *testing.T) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '_'
	}, strings.TrimPrefix(t.Name(), s.prefix))
	return s.collPrefix + name
}

// faultsFor returns the injector for st, or skips t with the harness's
// reason.
func (s *suite) faultsFor(t *testing.T, st store.Backend) Faults {
	t.Helper()
	f, why := s.h.BackendFaults(t, st)
	if f == nil {
		t.Skipf("the harness cannot inject faults: %s", why)
	}
	return f
}

// doc is the suite's document: a version for compare-and-set, an owner
// naming the writer that won, a counter to show a write applied once, a
// fence, and a sort key for paging.
type doc struct {
	ID      string `bson:"_id"`
	Version int64  `bson:"version"`
	Owner   int64  `bson:"owner"`
	N       int64  `bson:"n"`
	Fence   int64  `bson:"fence,omitempty"`
}

func byID(id string) bson.D { return bson.D{{Key: "_id", Value: id}} }

func set(fields ...bson.E) bson.D { return bson.D{{Key: "$set", Value: bson.D(fields)}} }

func inc(field string) bson.D {
	return bson.D{{Key: "$inc", Value: bson.D{{Key: field, Value: 1}}}}
}

func insert(t *testing.T, c *mongostore.Collection, d any) {
	t.Helper()
	if ok, err := c.InsertIdempotent(t.Context(), d); err != nil || !ok {
		t.Fatalf("insert %+v = %v, %v; want true, nil", d, ok, err)
	}
}

func get(t *testing.T, c *mongostore.Collection, id string) doc {
	t.Helper()
	var d doc
	if err := c.Get(t.Context(), id, &d); err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return d
}

// race starts n goroutines at once, each running f with its index, and
// waits for them all.
func race(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}

// raceWinners races n writers (race) and returns the indexes of those
// whose write returned nil; every loser must hear a plain ErrConflict
// (onlyConflict), which what(i) names in the report.
func raceWinners(t *testing.T, n int, what func(i int) string, write func(i int) error) []int {
	t.Helper()
	var mu sync.Mutex
	var winners []int
	race(n, func(i int) {
		err := write(i)
		if err == nil {
			mu.Lock()
			winners = append(winners, i)
			mu.Unlock()
			return
		}
		onlyConflict(t, what(i), err)
	})
	return winners
}

// onlyConflict reports an error that is not a plain ErrConflict: a racer
// that lost must hear exactly that, never an unknown outcome or a stale
// fence.
func onlyConflict(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrStaleFence) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("%s = %v; want ErrConflict alone", what, err)
	}
	wantCode(t, what, err, errcode.Aborted)
}

// wantCode checks the errcode.Code of an error an operation returned: the
// HTTP layer and callers' retries go by it, not by the sentinels.
func wantCode(t *testing.T, what string, err error, want errcode.ErrorCode) {
	t.Helper()
	if got := errcode.Code(err); got != want {
		t.Errorf("%s = %v; errcode.Code is %v, want %v", what, err, got, want)
	}
}

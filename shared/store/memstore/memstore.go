package memstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// Kinds of operation, the keys of Options.Latency.
const (
	// KindRead is a read of one document by id.
	KindRead = "read"
	// KindQuery is a query (a page, a find, a count).
	KindQuery = "query"
	// KindInsert is an insert.
	KindInsert = "insert"
	// KindUpdate is a conditional update (update or findAndModify).
	KindUpdate = "update"
	// KindDelete is a delete.
	KindDelete = "delete"
)

// Options configures a Store. The zero value is the conformance suite's:
// no latency, no contention, no caps.
type Options struct {
	// Latency is the time one operation of a kind (KindRead, ...) takes,
	// slept outside the store's lock; a kind not in the map takes
	// DefaultLatency.
	Latency map[string]time.Duration
	// DefaultLatency is the latency of the kinds Latency does not name.
	DefaultLatency time.Duration
	// Contention makes a write to a document that another write is still
	// committing (within its latency) fail with Aborted (112), as
	// Firestore's optimistic concurrency aborts the later of two
	// overlapping writes to one document: "Transactions that read or
	// write a document that is being modified by another transaction may
	// fail with ABORTED"
	// (https://cloud.google.com/firestore/docs/transaction-data-contention).
	// The write is then retried as mongostore retries a 112
	// (mongostore.WriteAttempts, the same backoff), and reported
	// store.ErrContended when every attempt met it.
	Contention bool
	// HotRanges caps the write rate into narrow ranges of indexed fields:
	// "If you index a field that increases or decreases sequentially
	// between documents in a collection, like a timestamp, then the
	// maximum write rate to the collection is 500 writes per second"
	// (https://cloud.google.com/firestore/docs/best-practices#high_read_write_and_delete_rates_to_a_narrow_document_range,
	// https://cloud.google.com/firestore/docs/solutions/shard-timestamp).
	HotRanges []HotRange
	// Ramp paces all writes to a new database to Firestore's 500/50/5
	// rule: "start with a maximum of 500 operations per second to a new
	// collection, then increase traffic by 50% every 5 minutes"
	// (https://cloud.google.com/firestore/docs/best-practices#ramping_up_traffic).
	Ramp bool
	// OnWrite, when set, is called after each write that landed (once per
	// document, when the meter counts it), outside the lock: how a
	// benchmark sees when a decision was committed and attributes writes
	// to shards.
	OnWrite func(Write)
}

// HotRange is one index whose sequential values Firestore caps: writes
// whose document, after the write, holds Field with a value in one
// Bucket-wide range, and the same values of the fields Prefix names (the
// fields an index leads with, such as a virtual shard), share one
// PerSecond budget. A write that leaves Field unchanged does not touch the
// index and is not paced.
type HotRange struct {
	// Collection is the collection ("schedules", "runs").
	Collection string
	// Field is the sequential field ("nextRunAt", "fireTime").
	Field string
	// Prefix names the fields that lead the index before Field; a
	// document without one of them is in the range of the missing value.
	Prefix []string
	// Bucket is the width of a range of Field's time values; 0 means one
	// minute (every advance of a minute schedule moves nextRunAt to the
	// same minute).
	Bucket time.Duration
	// PerSecond is the cap; 0 means Firestore's 500.
	PerSecond float64
}

// Write is one write that landed, as Options.OnWrite sees it.
type Write struct {
	// Collection and ID name the document; Op is the meter's operation
	// (without the collection).
	Collection, ID, Op string
	// ScheduleID is the schedule the document belongs to: its own id in
	// schedules, scheduleId in runs and versions; empty elsewhere.
	ScheduleID string
	// At is when the write's answer was ready.
	At time.Time
}

// Store is the in-memory Backend. It is safe for concurrent use.
type Store struct {
	opts  Options
	meter *store.Meter
	key   [32]byte // signs page tokens

	mu    sync.Mutex
	colls map[string]map[string]bson.M
	// byShard is the schedules by vshard, an equality index kept beside
	// the collection, so that one partition's due read scans its own
	// shard's schedules, not all of them: the store's CPU must not
	// serialise deciders that Firestore would serve from separate index
	// ranges.
	byShard map[int64]map[string]bson.M
	// runsByShard is the same for the runs, whose sweep reads one decider
	// shard at a time; runs without vshard are under store.LegacyRuns.
	runsByShard map[int64]map[string]bson.M
	// dueIdx is the enabled schedules' nextRunAt in milliseconds, by id:
	// the store's own typed index for the unpartitioned due read (which
	// returns the schedules mongostore's walk over the shards does, in
	// one order rather than shard by shard), scanned
	// instead of every schedule's BSON, so that its cost (a tick reads
	// 1,000 pages of 100,000 schedules) is not the store's CPU but the
	// latency the bench sets. It is no model of a Firestore index: the
	// write-rate model is HotRanges.
	dueIdx   map[string]int64
	inflight map[string]int // collection/id → writes committing
	faults   []*fault
	pace     map[string]time.Time // hot range → when its next write may land
	born     time.Time            // for the ramp
	aborts   int64                // 112s met, for tests and benchmarks
	paced    int64                // writes that waited for a hot range or the ramp

	// now and sleep are the clock of the models (time.Now and a timer);
	// the tests replace them to prove the models without timing anything.
	now   func() time.Time
	sleep func(ctx context.Context, kind string, d time.Duration) error
}

var _ store.Backend = (*Store)(nil)

// New returns an empty store.
func New(o Options) *Store {
	s := &Store{opts: o, meter: store.NewMeter(), colls: map[string]map[string]bson.M{}, byShard: map[int64]map[string]bson.M{}, runsByShard: map[int64]map[string]bson.M{}, dueIdx: map[string]int64{},
		inflight: map[string]int{}, pace: map[string]time.Time{}, now: time.Now,
		sleep: func(ctx context.Context, _ string, d time.Duration) error { return clock.Sleep(ctx, d) }}
	s.born = s.now()
	_, _ = rand.Read(s.key[:])
	return s
}

// Schedules implements store.Backend.
func (s *Store) Schedules() store.Schedules { return schedules{s} }

// Runs implements store.Backend.
func (s *Store) Runs() store.Runs { return runs{s} }

// Catalog implements store.Backend.
func (s *Store) Catalog() store.Catalog { return catalog{s} }

// Calendars implements store.Backend.
func (s *Store) Calendars() store.Calendars { return calendars{s} }

// GPU implements store.Backend.
func (s *Store) GPU() store.GPU { return gpuQueue{s} }

// Meter implements store.Backend.
func (s *Store) Meter() *store.Meter { return s.meter }

// Close implements store.Backend; there is nothing to release.
func (s *Store) Close(context.Context) error { return nil }

// Stats are what the models did, for a benchmark's report and the tests
// that prove the models.
type Stats struct {
	// Aborts counts the 112s contention answered (each attempt).
	Aborts int64
	// Paced counts the writes that waited for a hot range or the ramp.
	Paced int64
}

// Stats reads the models' counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Aborts: s.aborts, Paced: s.paced}
}

// Len is the number of documents in collection coll: for a benchmark's
// setup check, unmetered.
func (s *Store) Len(coll string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.colls[coll])
}

// Load inserts docs (domain structs, as the views would store them) into
// coll without latency, meter, models or hooks: a benchmark's setup, as
// the emulator benches insert theirs with raw batches. An existing id is
// an error.
func (s *Store) Load(coll string, docs ...any) error {
	ms := make([]bson.M, len(docs))
	for i, d := range docs {
		m, err := toDoc(d)
		if err != nil {
			return fmt.Errorf("memstore: load into %s: %w", coll, err)
		}
		ms[i] = m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.coll(coll)
	for _, m := range ms {
		id := idOf(m)
		if _, ok := c[id]; ok {
			return fmt.Errorf("memstore: load into %s: _id %s exists", coll, id)
		}
		s.put(coll, id, m)
	}
	return nil
}

// put stores m under id in coll, keeping the shard index. Called with
// s.mu held.
func (s *Store) put(coll, id string, m bson.M) {
	c := s.coll(coll)
	if coll == runsColl {
		if old := c[id]; old != nil {
			delete(s.runsByShard[runShard(old)], id)
		}
		v := runShard(m)
		b := s.runsByShard[v]
		if b == nil {
			b = map[string]bson.M{}
			s.runsByShard[v] = b
		}
		b[id] = m
	}
	if coll == schedColl {
		s.unindex(c[id])
		if t, ok := msOf(m["nextRunAt"]); ok && isTrue(m, "enabled") {
			s.dueIdx[id] = t
		}
		if v, ok := intOf(m["vshard"]); ok {
			b := s.byShard[v]
			if b == nil {
				b = map[string]bson.M{}
				s.byShard[v] = b
			}
			b[id] = m
		}
	}
	c[id] = m
}

// del removes id from coll, keeping the shard index. Called with s.mu
// held.
func (s *Store) del(coll, id string) {
	c := s.coll(coll)
	if coll == runsColl {
		if old := c[id]; old != nil {
			delete(s.runsByShard[runShard(old)], id)
		}
	}
	if coll == schedColl {
		s.unindex(c[id])
	}
	delete(c, id)
}

// runShard is the decider shard a run is indexed under: its vshard, or
// store.LegacyRuns without one.
func runShard(m bson.M) int64 {
	if v, ok := intOf(m["vshard"]); ok {
		return v
	}
	return store.LegacyRuns
}

func (s *Store) unindex(old bson.M) {
	if old == nil {
		return
	}
	delete(s.dueIdx, idOf(old))
	if v, ok := intOf(old["vshard"]); ok {
		delete(s.byShard[v], idOf(old))
	}
}

func (s *Store) coll(name string) map[string]bson.M {
	c := s.colls[name]
	if c == nil {
		c = map[string]bson.M{}
		s.colls[name] = c
	}
	return c
}

// ---- documents ----

// toDoc is d as the database stores it: marshalled by the driver's rules
// (omitempty, times in milliseconds) and read back as a map.
func toDoc(d any) (bson.M, error) {
	raw, err := bson.Marshal(d)
	if err != nil {
		return nil, err
	}
	var m bson.M
	if err := bson.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// decode reads m into out as the driver decodes a document.
func decode(m bson.M, out any) error {
	raw, err := bson.Marshal(m)
	if err != nil {
		return err
	}
	return bson.Unmarshal(raw, out)
}

// clone copies m's top level: the views replace fields, never mutate
// nested values in place.
func clone(m bson.M) bson.M {
	out := make(bson.M, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func idOf(m bson.M) string { s, _ := m["_id"].(string); return s }

// val is v as a stored value: times in milliseconds, as BSON keeps them;
// anything else is marshalled when the document is read.
func val(v any) any {
	switch t := v.(type) {
	case time.Time:
		return bson.NewDateTimeFromTime(t)
	case string, bool, int64, bson.DateTime, bson.M:
		return v
	}
	// Anything else (a named string, a struct, a pointer) as the driver
	// would store it.
	var m bson.M
	raw, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err == nil && bson.Unmarshal(raw, &m) == nil {
		return m["v"]
	}
	return v
}

// msOf is a stored time's milliseconds.
func msOf(v any) (int64, bool) {
	switch t := v.(type) {
	case bson.DateTime:
		return int64(t), true
	case time.Time:
		return t.UnixMilli(), true
	}
	return 0, false
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// intOf is a stored number.
func intOf(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	}
	return 0, false
}

func strOf(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case fmt.Stringer:
		return s.String()
	}
	return ""
}

// eqStr is a string field's equality.
func eqStr(m bson.M, field, want string) bool { return strOf(m[field]) == want }

// timeEq is a time field's equality with t at millisecond precision (what
// a filter on a time the database stored compares).
func timeEq(m bson.M, field string, t time.Time) bool {
	v, ok := msOf(m[field])
	return ok && v == ms(t)
}

// timeLTE is field ≤ t; a missing field never matches ($lte).
func timeLTE(m bson.M, field string, t time.Time) bool {
	v, ok := msOf(m[field])
	return ok && v <= ms(t)
}

func isTrue(m bson.M, field string) bool { b, _ := m[field].(bool); return b }

func has(m bson.M, field string) bool { _, ok := m[field]; return ok && m[field] != nil }

// ---- errors ----

// serverError is the server's answer to one attempt: a code from the
// injected faults or the contention model.
type serverError struct {
	code    int32
	applied bool
}

func (e *serverError) Error() string {
	return fmt.Sprintf("memstore: server error %d (%s)", e.code, codeName(e.code))
}

func codeName(c int32) string {
	switch c {
	case 112:
		return "WriteConflict: Aborted, too much contention"
	case 262:
		return "ExceededTimeLimit: DeadlineExceeded"
	case 50:
		return "MaxTimeMSExpired"
	}
	return "injected"
}

func notApplied(err error) bool {
	var se *serverError
	return errors.As(err, &se) && se.code == 112
}

func timedOut(err error) bool {
	var se *serverError
	return errors.As(err, &se) && (se.code == 262 || se.code == 50)
}

func unknownOutcome(err error) bool {
	if err == nil || notApplied(err) {
		return false
	}
	return timedOut(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// writeError is mongostore's Collection.writeError: contention that
// outlasted the retries is ErrContended, a possible landing
// ErrUnknownOutcome.
func writeError(op, coll string, err error) error {
	if notApplied(err) {
		return fmt.Errorf("store: %s %s: %w: %w", op, coll, store.ErrContended, err)
	}
	return plainWriteError(op, coll, err)
}

func plainWriteError(op, coll string, err error) error {
	if unknownOutcome(err) {
		return fmt.Errorf("store: %s %s: %w: %w", op, coll, store.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("store: %s %s: %w", op, coll, err)
}

// retryWrite is mongostore's: up to mongostore.WriteAttempts while the
// attempt met 112 (and, with afterTimeout, a deadline code), with the
// same full-jitter backoff doubling from 25 ms.
func retryWrite(ctx context.Context, afterTimeout bool, write func() error) error {
	const base = 25 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := write()
		if err == nil || attempt == mongostore.WriteAttempts-1 {
			return err
		}
		if !notApplied(err) && (!afterTimeout || !timedOut(err)) {
			return err
		}
		d := base << attempt
		t := time.NewTimer(d/2 + mrand.N(d/2+1)) //nolint:gosec // jitter, as mongostore's
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (not retried: %v)", err, context.Cause(ctx)) //nolint:errorlint // as mongostore: the result is the write's error
		case <-t.C:
		}
	}
}

// ---- faults ----

// fault is one armed injection (Faults): the next times commands on coll
// answer code, before running (refuse) or after (a lost answer).
type fault struct {
	coll     string
	commands map[string]bool
	times    int
	code     int32
	afterRun bool
}

// takeFault returns the fault armed for command on coll, using one of its
// times, or nil. Called with s.mu held.
func (s *Store) takeFault(coll, command string) *fault {
	for i, f := range s.faults {
		if f.coll == coll && f.commands[command] && f.times > 0 {
			f.times--
			if f.times == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

// Refuse makes the next times of the named commands (insert, update,
// delete, findAndModify: the command mongostore would send for the
// write) on coll answer code without running, as MongoDB's failCommand
// fail point does. It is the conformance suite's fault injector
// (storetest.Faults) and lasts until its count runs out or Disarm.
func (s *Store) Refuse(coll string, times int, code int32, commands ...string) {
	s.arm(coll, times, code, false, commands)
}

// LoseAnswer makes the next times of the named commands on coll run, and
// then answer code in place of their result: a write that landed whose
// answer was lost.
func (s *Store) LoseAnswer(coll string, times int, code int32, commands ...string) {
	s.arm(coll, times, code, true, commands)
}

// Disarm removes every armed fault.
func (s *Store) Disarm() {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
}

func (s *Store) arm(coll string, times int, code int32, afterRun bool, commands []string) {
	f := &fault{coll: coll, commands: map[string]bool{}, times: times, code: code, afterRun: afterRun}
	for _, c := range commands {
		f.commands[c] = true
	}
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
}

// ---- latency and the models ----

func (s *Store) latency(kind string) time.Duration {
	if d, ok := s.opts.Latency[kind]; ok {
		return d
	}
	return s.opts.DefaultLatency
}

// wait sleeps the latency of one operation of kind.
func (s *Store) wait(ctx context.Context, kind string) error {
	return s.sleep(ctx, kind, s.latency(kind))
}

// kindPace is the sleep of a write held back by a hot range or the ramp.
const kindPace = "pace"

// rangeKey is the hot range the document after a write falls in, for the
// range h; "" when the write does not touch h's index entry (another
// collection, Field missing after the write, or the entry's key, Prefix
// and Field, unchanged: Firestore rewrites an index entry only when its
// values change).
func rangeKey(h HotRange, coll string, before, after bson.M) string {
	if h.Collection != coll {
		return ""
	}
	if _, ok := after[h.Field]; !ok {
		return ""
	}
	key := entryRange(h, after)
	if before != nil && entryRange(h, before) == key {
		return ""
	}
	return key
}

// entryRange is the range of h that document m's index entry is in: its
// Prefix values, then Field's value (a time by its Bucket).
func entryRange(h HotRange, m bson.M) string {
	var b strings.Builder
	b.Grow(64)
	b.WriteString(h.Collection)
	b.WriteByte('/')
	b.WriteString(h.Field)
	for _, p := range h.Prefix {
		b.WriteByte('/')
		b.WriteString(p)
		b.WriteByte('=')
		writeKeyValue(&b, m[p])
	}
	b.WriteByte('@')
	v := m[h.Field]
	if t, ok := msOf(v); ok {
		bucket := h.Bucket
		if bucket <= 0 {
			bucket = time.Minute
		}
		b.WriteString(strconv.FormatInt(t/bucket.Milliseconds(), 10))
	} else {
		writeKeyValue(&b, v)
	}
	return b.String()
}

// writeKeyValue writes an index key's value: the stored kinds directly
// (every write of a benchmark computes a dozen of these), anything else
// as fmt prints it.
func writeKeyValue(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("<nil>")
	case string:
		b.WriteString(x)
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int32:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case bson.DateTime:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	default:
		fmt.Fprint(b, v)
	}
}

// slot admits one write into the paced lane key at perSecond, and
// returns how long it must wait: the generic cell rate algorithm, with a
// burst of one second's writes, so that a lane below its rate never waits
// and one above it is held to the rate. Called with s.mu held.
func (s *Store) slot(key string, perSecond float64, now time.Time) time.Duration {
	interval := time.Duration(float64(time.Second) / perSecond)
	tau := time.Second - interval // the burst allowance
	tat := s.pace[key]            // theoretical arrival time of the next write
	if tat.Before(now) {
		tat = now
	}
	s.pace[key] = tat.Add(interval)
	return max(tat.Sub(now)-tau, 0)
}

// paceFor is how long a write of coll that turns before into after must
// wait for the hot ranges and the ramp. Called with s.mu held.
func (s *Store) paceFor(coll string, before, after bson.M) time.Duration {
	now := s.now()
	var d time.Duration
	for _, h := range s.opts.HotRanges {
		key := rangeKey(h, coll, before, after)
		if key == "" {
			continue
		}
		rate := h.PerSecond
		if rate <= 0 {
			rate = 500
		}
		d = max(d, s.slot(key, rate, now))
	}
	if s.opts.Ramp {
		// 500 a second, 50% more every 5 minutes since the database was
		// made.
		rate := 500.0
		for step := now.Sub(s.born) / (5 * time.Minute); step > 0; step-- {
			rate *= 1.5
		}
		d = max(d, s.slot("ramp", rate, now))
	}
	if d > 0 {
		s.paced++
	}
	return d
}

// ---- the write primitive ----

// mutation is one write to one document: pred is its filter over the
// stored document (nil: the document does not exist), and apply makes
// the document after the write from a copy of the stored one (nil: delete
// it). apply runs only when pred held.
type mutation struct {
	kind, command, op string
	coll, id          string
	pred              func(m bson.M) bool
	apply             func(m bson.M) bson.M
}

// errMiss is a write whose filter matched nothing.
var errMiss = errors.New("memstore: no document matched")

// errDup is an insert of an id that exists (E11000).
var errDup = errors.New("memstore: E11000 duplicate key")

// attempt runs one attempt of w, as the server would: the injected
// faults, the latency, the contention window, the hot-range pace, then
// the commit. It returns the document after the write (or, for a delete,
// before it).
func (s *Store) attempt(ctx context.Context, w mutation) (bson.M, error) {
	key := w.coll + "/" + w.id
	s.mu.Lock()
	f := s.takeFault(w.coll, w.command)
	if f != nil && !f.afterRun {
		s.mu.Unlock()
		return nil, &serverError{code: f.code}
	}
	busy := s.inflight[key] > 0
	s.inflight[key]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.inflight[key]--; s.inflight[key] == 0 {
			delete(s.inflight, key)
		}
		s.mu.Unlock()
	}()
	if err := s.wait(ctx, w.kind); err != nil {
		return nil, err
	}
	if busy && s.opts.Contention {
		// The later of two overlapping writes to one document aborts;
		// it did not commit.
		s.mu.Lock()
		s.aborts++
		s.mu.Unlock()
		return nil, &serverError{code: 112}
	}
	s.mu.Lock()
	if len(s.opts.HotRanges) > 0 || s.opts.Ramp {
		// Reserve the landing time the ranges allow, wait for it with the
		// lock released, and then commit against the document as it is
		// then (its filter is evaluated at the commit).
		cur := s.colls[w.coll][w.id]
		if d := s.pacePreview(w, cur); d > 0 {
			s.mu.Unlock()
			if err := s.sleep(ctx, kindPace, d); err != nil {
				return nil, err
			}
			s.mu.Lock()
		}
	}
	out, err := s.commit(w)
	s.mu.Unlock()
	if err == nil && f != nil {
		return out, &serverError{code: f.code, applied: true}
	}
	return out, err
}

// pacePreview computes the document the write would make and reserves its
// pace. Called with s.mu held.
func (s *Store) pacePreview(w mutation, cur bson.M) time.Duration {
	if w.apply == nil || (w.pred != nil && !w.pred(cur)) {
		return 0
	}
	var base bson.M
	if cur != nil {
		base = clone(cur)
	}
	after := w.apply(base)
	if after == nil {
		return 0
	}
	return s.paceFor(w.coll, cur, after)
}

// commit applies w if its filter holds. Called with s.mu held.
func (s *Store) commit(w mutation) (bson.M, error) {
	c := s.coll(w.coll)
	cur := c[w.id]
	if !w.pred(cur) {
		if cur != nil && w.command == "insert" {
			return nil, errDup
		}
		return nil, errMiss
	}
	if w.apply == nil {
		s.del(w.coll, w.id)
		return cur, nil
	}
	var base bson.M
	if cur != nil {
		base = clone(cur)
	}
	next := w.apply(base)
	s.put(w.coll, w.id, next)
	return next, nil
}

// landed meters and reports one write that landed.
func (s *Store) landed(coll, op, id string, doc bson.M) {
	s.meter.AddWrite(coll+"."+op, 1)
	if s.opts.OnWrite == nil {
		return
	}
	sid := ""
	switch coll {
	case "schedules":
		sid = id
	default:
		if doc != nil {
			sid = strOf(doc["scheduleId"])
		}
	}
	s.opts.OnWrite(Write{Collection: coll, ID: id, Op: op, ScheduleID: sid, At: s.now()})
}

// update is mongostore's UpdateOne (and FindOneAndUpdate, by command):
// retried on 112 only; a miss is ErrConflict; a lost answer
// ErrUnknownOutcome. It returns the document after the write.
func (s *Store) update(ctx context.Context, coll, command string, id string, pred func(bson.M) bool, apply func(bson.M) bson.M) (bson.M, error) {
	w := mutation{kind: KindUpdate, command: command, op: command, coll: coll, id: id,
		pred: func(m bson.M) bool { return m != nil && pred(m) }, apply: apply}
	var out bson.M
	err := retryWrite(ctx, false, func() (err error) {
		out, err = s.attempt(ctx, w)
		return err
	})
	switch {
	case err == nil:
		s.landed(coll, command, id, out)
		if command == "findAndModify" {
			s.meter.Add(coll+".findAndModify", 1)
		}
		return out, nil
	case errors.Is(err, errMiss):
		return nil, fmt.Errorf("store: update %s: %w", coll, store.ErrConflict)
	}
	return nil, writeError(command, coll, err)
}

// fencedUpdate is mongostore's FencedUpdate: the write also needs the
// stored fence (field) at most epoch, or absent, and records epoch. A
// miss reads the document once to tell a stale fence (ErrStaleFence)
// from a conflict.
func (s *Store) fencedUpdate(ctx context.Context, coll, id, field string, epoch int64, pred func(bson.M) bool, apply func(bson.M) bson.M) error {
	fenced := func(m bson.M) bool {
		if !pred(m) {
			return false
		}
		v, ok := m[field]
		if !ok || v == nil {
			return true
		}
		n, isNum := intOf(v)
		return isNum && n <= epoch
	}
	w := mutation{kind: KindUpdate, command: "update", coll: coll, id: id,
		pred: func(m bson.M) bool { return m != nil && fenced(m) },
		apply: func(m bson.M) bson.M {
			m = apply(m)
			m[field] = epoch
			return m
		}}
	var out bson.M
	err := retryWrite(ctx, false, func() (err error) {
		out, err = s.attempt(ctx, w)
		return err
	})
	contended := err != nil && notApplied(err)
	if err != nil && !contended && !errors.Is(err, errMiss) {
		return writeError("fenced update", coll, err)
	}
	if err == nil {
		s.landed(coll, "fencedUpdate", id, out)
		return nil
	}
	miss := func() error { return fmt.Errorf("store: fenced update %s: %w", coll, store.ErrConflict) }
	if contended {
		miss = func() error { return writeError("fenced update", coll, err) }
	}
	doc, rerr := s.get(ctx, coll, id)
	if rerr != nil {
		if errors.Is(rerr, store.ErrNotFound) {
			return miss()
		}
		return fmt.Errorf("store: fenced update %s: not applied, and the fence check failed: %w", coll, rerr)
	}
	s.meter.Add(coll+".fenceCheck", 1)
	if stored, ok := intOf(doc[field]); ok && stored > epoch {
		return fmt.Errorf("store: fenced update %s: stored fence %d > epoch %d: %w", coll, stored, epoch, store.ErrStaleFence)
	}
	return miss()
}

// insert is mongostore's InsertIdempotent: retried on 112 and on a
// deadline code (the deterministic id makes a repeat harmless); a
// duplicate id is inserted=false; any other failure is settled by
// reading the id back.
func (s *Store) insert(ctx context.Context, coll string, doc any) (bool, error) {
	m, err := toDoc(doc)
	if err != nil {
		return false, fmt.Errorf("store: insert into %s: %w", coll, err)
	}
	id := idOf(m)
	w := mutation{kind: KindInsert, command: "insert", coll: coll, id: id,
		pred:  func(cur bson.M) bool { return cur == nil },
		apply: func(bson.M) bson.M { return clone(m) }}
	err = retryWrite(ctx, true, func() error {
		_, err := s.attempt(ctx, w)
		return err
	})
	switch {
	case err == nil:
		s.landed(coll, "insert", id, m)
		return true, nil
	case errors.Is(err, errDup):
		return false, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	stored, rerr := s.get(rctx, coll, id)
	switch {
	case errors.Is(rerr, store.ErrNotFound):
		return false, plainWriteError("insert into", coll, err)
	case rerr != nil:
		return false, fmt.Errorf("store: insert into %s: %w: %w; reading _id %v back failed too: %v", coll, store.ErrUnknownOutcome, err, id, rerr) //nolint:errorlint // as mongostore: the outcome is the insert's
	}
	s.meter.Add(coll+".insertCheck", 1)
	if why, ok := sameKind(m, stored); !ok {
		return false, fmt.Errorf("store: insert into %s: %w; _id %v holds a different kind of document (%s), not taken for this insert", coll, err, id, why)
	}
	return false, nil
}

// sameKind is mongostore's: every field both documents hold has the same
// kind of value (numbers one kind; null matches anything).
func sameKind(ours, stored bson.M) (string, bool) {
	for k, v := range ours {
		sv, ok := stored[k]
		if !ok || v == nil || sv == nil {
			continue
		}
		if kindOf(v) != kindOf(sv) {
			return k, false
		}
	}
	return "", true
}

func kindOf(v any) string {
	if _, ok := intOf(v); ok {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// deleteOne is mongostore's DeleteOne: retried on 112; a miss is
// ErrConflict.
func (s *Store) deleteOne(ctx context.Context, coll, id string, pred func(bson.M) bool) error {
	w := mutation{kind: KindDelete, command: "delete", coll: coll, id: id,
		pred: func(m bson.M) bool { return m != nil && pred(m) }}
	var out bson.M
	err := retryWrite(ctx, false, func() (err error) {
		out, err = s.attempt(ctx, w)
		return err
	})
	switch {
	case err == nil:
		s.landed(coll, "delete", id, out)
		return nil
	case errors.Is(err, errMiss):
		return fmt.Errorf("store: delete from %s: %w", coll, store.ErrConflict)
	}
	return writeError("delete from", coll, err)
}

// ---- reads ----

// get reads one document by id (KindRead), metered as mongostore's find.
func (s *Store) get(ctx context.Context, coll, id string) (bson.M, error) {
	if err := s.wait(ctx, KindRead); err != nil {
		return nil, fmt.Errorf("store: find in %s: %w", coll, err)
	}
	s.mu.Lock()
	m := s.colls[coll][id]
	s.mu.Unlock()
	if m == nil {
		return nil, fmt.Errorf("store: find in %s: %w", coll, store.ErrNotFound)
	}
	s.meter.Add(coll+".find", 1)
	return m, nil
}

// getInto reads one document by id into out.
func (s *Store) getInto(ctx context.Context, coll, id string, out any) error {
	m, err := s.get(ctx, coll, id)
	if err != nil {
		return err
	}
	if err := decode(m, out); err != nil {
		return fmt.Errorf("store: find in %s: %w", coll, err)
	}
	return nil
}

// find reads the documents of coll that match, sorted by less, at most
// limit of them (0: all), metered per document returned under op.
func (s *Store) find(ctx context.Context, coll, op string, match func(bson.M) bool, less func(a, b bson.M) bool, limit int) ([]bson.M, error) {
	return s.findIn(ctx, coll, op, nil, match, less, limit)
}

// findIn is findInShards over one vshard (all of coll when shard is nil).
func (s *Store) findIn(ctx context.Context, coll, op string, shard *int64, match func(bson.M) bool, less func(a, b bson.M) bool, limit int) ([]bson.M, error) {
	if shard == nil {
		return s.findInShards(ctx, coll, op, nil, match, less, limit)
	}
	return s.findInShards(ctx, coll, op, []int64{*shard}, match, less, limit)
}

// findInShards is one query over the schedules or runs of the vshards in
// shards (all of coll when shards is nil): match must require them too,
// since the per-shard maps only narrow the scan. One wait, as one
// query with $in on the index's leading key is one round trip.
func (s *Store) findInShards(ctx context.Context, coll, op string, shards []int64, match func(bson.M) bool, less func(a, b bson.M) bool, limit int) ([]bson.M, error) {
	if err := s.wait(ctx, KindQuery); err != nil {
		return nil, fmt.Errorf("store: %s in %s: %w", op, coll, err)
	}
	s.mu.Lock()
	sets := []map[string]bson.M{s.colls[coll]}
	if shards != nil && (coll == schedColl || coll == runsColl) {
		sets = sets[:0]
		for _, v := range shards {
			if coll == schedColl {
				sets = append(sets, s.byShard[v])
			} else {
				sets = append(sets, s.runsByShard[v])
			}
		}
	}
	var out []bson.M
	if less != nil && limit > 0 {
		// The first limit in order, kept sorted as they are found: a
		// page of 100 of 100,000 due schedules never sorts them all.
		out = make([]bson.M, 0, min(limit, 64))
		for _, docs := range sets {
			for _, m := range docs {
				if !match(m) || (len(out) == limit && !less(m, out[limit-1])) {
					continue
				}
				i := sort.Search(len(out), func(i int) bool { return less(m, out[i]) })
				if len(out) < limit {
					out = append(out, nil)
				}
				copy(out[i+1:], out[i:len(out)-1])
				out[i] = m
			}
		}
	} else {
		for _, docs := range sets {
			for _, m := range docs {
				if match(m) {
					out = append(out, m)
				}
			}
		}
	}
	s.mu.Unlock()
	if less != nil && limit <= 0 {
		sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	s.meter.Add(coll+"."+op, int64(len(out)))
	return out, nil
}

// findOne is find with limit 1, ErrNotFound when nothing matches.
func (s *Store) findOne(ctx context.Context, coll string, match func(bson.M) bool, less func(a, b bson.M) bool) (bson.M, error) {
	got, err := s.find(ctx, coll, "find", match, less, 1)
	if err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("store: find in %s: %w", coll, store.ErrNotFound)
	}
	return got[0], nil
}

// decodeAll reads ms into a slice of T.
func decodeAll[T any](coll string, ms []bson.M) ([]T, error) {
	out := make([]T, len(ms))
	for i, m := range ms {
		if err := decode(m, &out[i]); err != nil {
			return nil, fmt.Errorf("store: decode %s: %w", coll, err)
		}
	}
	return out, nil
}

// ---- orderings ----

// cmpTime orders two documents by a time field, missing first (as MongoDB
// sorts null before dates).
func cmpTime(a, b bson.M, field string) int {
	av, aok := msOf(a[field])
	bv, bok := msOf(b[field])
	switch {
	case !aok && !bok:
		return 0
	case !aok:
		return -1
	case !bok:
		return 1
	case av < bv:
		return -1
	case av > bv:
		return 1
	}
	return 0
}

func cmpID(a, b bson.M) int { return strings.Compare(idOf(a), idOf(b)) }

// byTimeThenID orders by field, then _id, ascending.
func byTimeThenID(field string) func(a, b bson.M) bool {
	return func(a, b bson.M) bool {
		if c := cmpTime(a, b, field); c != 0 {
			return c < 0
		}
		return cmpID(a, b) < 0
	}
}

func byTime(field string) func(a, b bson.M) bool {
	return func(a, b bson.M) bool { return cmpTime(a, b, field) < 0 }
}

// deleteBatch is mongostore's deleteBatch: the ids of at most limit
// matching documents in order (one query), then one delete of those that
// still match, retried on 112 and on a deadline code (deleting again is
// harmless).
func (s *Store) deleteBatch(ctx context.Context, coll string, match func(bson.M) bool, less func(a, b bson.M) bool, limit int) (int, error) {
	if limit < 1 || limit > maxLimit {
		return 0, fmt.Errorf("store: delete from %s: batch %d out of range 1..%d", coll, limit, maxLimit)
	}
	got, err := s.find(ctx, coll, "find", match, less, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete from %s: %w", coll, err)
	}
	if len(got) == 0 {
		return 0, nil
	}
	ids := make([]string, len(got))
	for i, m := range got {
		ids[i] = idOf(m)
	}
	var deleted []bson.M
	err = retryWrite(ctx, true, func() error {
		s.mu.Lock()
		f := s.takeFault(coll, "delete")
		s.mu.Unlock()
		if f != nil && !f.afterRun {
			return &serverError{code: f.code}
		}
		if err := s.wait(ctx, KindDelete); err != nil {
			return err
		}
		s.mu.Lock()
		c := s.coll(coll)
		for _, id := range ids {
			if m := c[id]; m != nil && match(m) {
				s.del(coll, id)
				deleted = append(deleted, m)
			}
		}
		s.mu.Unlock()
		if f != nil {
			return &serverError{code: f.code, applied: true}
		}
		return nil
	})
	if err != nil {
		return 0, writeError("delete from", coll, err)
	}
	for _, m := range deleted {
		s.landed(coll, "delete", idOf(m), m)
	}
	return len(deleted), nil
}

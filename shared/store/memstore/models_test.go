package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/memstore"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

// recorder is a clock that stands still and a sleep that returns at once,
// recording what was asked for, per kind.
type recorder struct {
	mu    sync.Mutex
	now   time.Time
	slept map[string][]time.Duration
	// block, when set, is called by the sleep of kind; it may wait.
	block func(kind string)
}

func newRecorder(st *memstore.Store) *recorder {
	r := &recorder{now: t0, slept: map[string][]time.Duration{}}
	memstore.SetClock(st, func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now },
		func(_ context.Context, kind string, d time.Duration) error {
			r.mu.Lock()
			r.slept[kind] = append(r.slept[kind], d)
			block := r.block
			r.mu.Unlock()
			if block != nil {
				block(kind)
			}
			return nil
		})
	return r
}

func (r *recorder) kinds(kind string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.slept[kind]...)
}

func pendingRun(id, scheduleID string, fire time.Time, vshard int) map[string]any {
	return map[string]any{"_id": id, "scheduleId": scheduleID, "fireTime": fire, "source": "scheduled",
		"status": "pending", "attempt": 1, "createdAt": fire, "vshard": vshard}
}

// TestLatencyPerKind: every operation asks for the latency of its kind,
// once per attempt, and the kinds Latency does not name take the default.
func TestLatencyPerKind(t *testing.T) {
	st := memstore.New(memstore.Options{
		Latency:        map[string]time.Duration{memstore.KindInsert: 7 * time.Millisecond, memstore.KindUpdate: 11 * time.Millisecond},
		DefaultLatency: 3 * time.Millisecond,
	})
	rec := newRecorder(st)
	ctx := t.Context()
	r := &store.RunRecord{Run: schedule.Run{ID: "r1", ScheduleID: "s", FireTime: t0, Source: schedule.SourceScheduled, Status: schedule.RunPending, CreatedAt: t0}}
	if ok, err := st.Runs().Insert(ctx, r); !ok || err != nil {
		t.Fatalf("insert = %v, %v", ok, err)
	}
	if err := st.Runs().MarkWaiting(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Runs().Get(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Runs().PendingOf(ctx, "s", nil, 10); err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string][]time.Duration{
		memstore.KindInsert: {7 * time.Millisecond},
		memstore.KindUpdate: {11 * time.Millisecond},
		memstore.KindRead:   {3 * time.Millisecond},
		memstore.KindQuery:  {3 * time.Millisecond},
	} {
		if got := rec.kinds(kind); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s slept %v; want %v", kind, got, want)
		}
	}
}

// TestContention: a write to a document that another write is still
// committing meets Aborted (112) on every attempt while the first one
// holds it, and ends in ErrContended after mongostore's retry budget,
// having changed nothing; the first write lands. Without the model both
// land.
func TestContention(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("contention=%v", on), func(t *testing.T) {
			st := memstore.New(memstore.Options{Contention: on})
			rec := newRecorder(st)
			ctx := t.Context()
			if err := st.Load(schedule.RunsCollection, pendingRun("r1", "s", t0, 0)); err != nil {
				t.Fatal(err)
			}
			// The first write's latency lasts until the second write
			// has finished.
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			rec.block = func(kind string) {
				if kind != memstore.KindUpdate {
					return
				}
				first := false
				once.Do(func() { first = true })
				if first {
					close(entered)
					<-release
				}
			}
			firstErr := make(chan error, 1)
			go func() { firstErr <- st.Runs().Skip(ctx, "r1", "first", t0, time.Time{}, nil) }()
			<-entered
			second := st.Runs().MarkWaiting(ctx, "r1")
			close(release)
			if err := <-firstErr; err != nil {
				t.Fatalf("the first write = %v; want nil (it landed)", err)
			}
			got, err := st.Runs().Get(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			aborts := st.Stats().Aborts
			if !on {
				if second != nil || !got.Waiting || aborts != 0 {
					t.Errorf("without the model: second write = %v, waiting %v, %d aborts; want nil, true, 0", second, got.Waiting, aborts)
				}
				return
			}
			if !errors.Is(second, store.ErrContended) || !errors.Is(second, store.ErrConflict) || errors.Is(second, store.ErrUnknownOutcome) {
				t.Errorf("the overlapping write = %v; want ErrContended (a conflict, not an unknown outcome)", second)
			}
			if aborts != mongostore.WriteAttempts {
				t.Errorf("%d attempts met 112; want mongostore's budget, %d", aborts, mongostore.WriteAttempts)
			}
			if got.Waiting || got.Status != schedule.RunSkipped {
				t.Errorf("run after = %+v; want skipped by the first write, not marked waiting by the aborted one", got.Run)
			}
		})
	}
}

// TestHotRange: writes that put one minute into an index's time field are
// held to 500 a second after a burst of one second's worth, per range; an
// index led by vshard splits the range, and each shard gets its own 500.
func TestHotRange(t *testing.T) {
	const n = 1500
	for _, tc := range []struct {
		name       string
		shards     int
		wantPaced  int64
		wantLongst time.Duration
	}{
		// One range: writes 0..499 are the burst; write k ≥ 500 waits
		// k×2ms − 998ms, the last (k = 1499) 2 s.
		{"one range", 1, n - 500, 2 * time.Second},
		// Two shards: 750 writes each, the last waits 749×2 − 998 ms.
		{"two shards", 2, 2 * (n/2 - 500), 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New(memstore.Options{HotRanges: []memstore.HotRange{{Collection: schedule.RunsCollection, Field: "fireTime", Prefix: []string{"vshard"}}}})
			rec := newRecorder(st)
			for i := range n {
				r := pendingRun(fmt.Sprintf("r%05d", i), "s", t0.Add(time.Duration(i)*time.Millisecond), i%tc.shards)
				if _, err := storeInsert(t.Context(), st, r); err != nil {
					t.Fatal(err)
				}
			}
			paced := rec.kinds(memstore.KindPace)
			if got := st.Stats().Paced; got != tc.wantPaced || int64(len(paced)) != tc.wantPaced {
				t.Errorf("%d writes paced (%d waits asked for); want %d", got, len(paced), tc.wantPaced)
			}
			longest := time.Duration(0)
			for _, d := range paced {
				longest = max(longest, d)
			}
			if longest != tc.wantLongst {
				t.Errorf("longest wait %s; want %s", longest, tc.wantLongst)
			}
		})
	}
}

// TestHotRangeUnchangedField: a write that leaves the indexed field as it
// was does not touch the index, and is never paced.
func TestHotRangeUnchangedField(t *testing.T) {
	st := memstore.New(memstore.Options{HotRanges: []memstore.HotRange{{Collection: schedule.RunsCollection, Field: "fireTime", PerSecond: 1}}})
	rec := newRecorder(st)
	if err := st.Load(schedule.RunsCollection, pendingRun("r1", "s", t0, 0)); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := st.Runs().MarkWaiting(t.Context(), "r1"); err != nil {
			t.Fatal(err)
		}
	}
	if p := rec.kinds(memstore.KindPace); len(p) != 0 {
		t.Errorf("writes that left fireTime alone waited %v; want none", p)
	}
}

// TestHotRangeEntryMoves: a write that changes a field the index leads
// with (status, in by_status) moves the run's entry to another range even
// with fireTime unchanged: a claim writes the (running, minute) range, and
// two claims into it at 1 a second pace the second.
func TestHotRangeEntryMoves(t *testing.T) {
	st := memstore.New(memstore.Options{HotRanges: []memstore.HotRange{{Collection: schedule.RunsCollection, Field: "fireTime", Prefix: []string{"status"}, PerSecond: 1}}})
	rec := newRecorder(st)
	if err := st.Load(schedule.RunsCollection, pendingRun("r1", "s", t0, 0), pendingRun("r2", "s", t0, 0)); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"r1", "r2"} {
		if err := st.Runs().Claim(t.Context(), id, store.RunClaim{Token: fmt.Sprint(i), Holder: "h", At: t0, SweepAt: t0.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if p := rec.kinds(memstore.KindPace); len(p) != 1 || p[0] != time.Second {
		t.Errorf("two claims into one (status, minute) range at 1/s waited %v; want one wait of 1s", p)
	}
}

// TestRamp: a new database takes 500 writes a second, and 50% more every
// 5 minutes (the 500/50/5 rule).
func TestRamp(t *testing.T) {
	for _, tc := range []struct {
		age       time.Duration
		wantPaced int64
	}{{0, 1000 - 500}, {5 * time.Minute, 1000 - 750}, {10 * time.Minute, 1000 - 1125}} {
		t.Run(tc.age.String(), func(t *testing.T) {
			st := memstore.New(memstore.Options{Ramp: true})
			rec := newRecorder(st)
			rec.mu.Lock()
			rec.now = t0.Add(tc.age)
			rec.mu.Unlock()
			for i := range 1000 {
				if _, err := storeInsert(t.Context(), st, pendingRun(fmt.Sprintf("r%04d", i), "s", t0, 0)); err != nil {
					t.Fatal(err)
				}
			}
			want := max(tc.wantPaced, 0)
			if got := st.Stats().Paced; got != want {
				t.Errorf("%d of 1000 writes paced at age %s; want %d", got, tc.age, want)
			}
		})
	}
}

// storeInsert inserts a raw run document (with the vshard field the
// deciders add) through the views' insert path.
func storeInsert(ctx context.Context, st *memstore.Store, doc map[string]any) (bool, error) {
	return memstore.InsertDoc(ctx, st, schedule.RunsCollection, doc)
}

package scheduler_test

// A tick that loses the tick lease while it decides: paused past its lease
// while a newer tick takes over (a stale tick), or stopped partway by an
// error. Two engines share the database and the bucket, each with its own
// holder, lease manager and clock.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"

	"cloud.google.com/go/storage"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// twoTicks is a stale engine and a live one on one database and bucket.
type twoTicks struct {
	stale, live *bundle
}

func newTwoTicks(t *testing.T, stale, live func(*scheduler.Config)) *twoTicks {
	t.Helper()
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	mk := func(holder string, mod func(*scheduler.Config)) *bundle {
		m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: holder})
		c := newClock(t0)
		cfg := scheduler.Config{Store: s, Leases: m, Clock: c, TickLeaseTTL: 10 * time.Second}
		if mod != nil {
			mod(&cfg)
		}
		e, err := scheduler.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Wait)
		return &bundle{store: s, leases: m, clock: c, eng: e}
	}
	return &twoTicks{stale: mk("stale", stale), live: mk("live", live)}
}

// takeOver is what happens while the stale tick is paused past its lease:
// its lease is taken from it (broken, as an expiry would free it; its
// heartbeat does not renew within the test's minute-long TTL, so it does
// not notice), and the live engine ticks.
func (tt *twoTicks) takeOver() (*scheduler.Summary, error) {
	if err := tt.live.leases.Break(context.Background(), scheduler.TickLease); err != nil {
		return nil, err
	}
	return tt.live.eng.Tick(context.Background(), time.Time{})
}

// TestStaleTickDecisionIsUndone: a tick pauses past its tick lease while a
// newer tick decides the same schedule, at a later now, and advances it.
// The stale tick's advance must be refused as stale (not taken for an edit
// that wins), the tick must stop, and what it decided for that schedule
// on its own must not run: the live tick's decision stands.
func TestStaleTickDecisionIsUndone(t *testing.T) {
	t.Parallel()
	slow := func(c *scheduler.Config) { c.TickLeaseTTL = time.Minute }

	t.Run("a fire time the live tick dropped is skipped", func(t *testing.T) {
		t.Parallel()
		tt := newTwoTicks(t, slow, nil)
		key, g := newGate(t, 0)
		tt.stale.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Catchup: schedule.CatchupNone, Target: gateTarget(key)})
		// The stale tick decides at 09:01:01: 09:01 is on time. It pauses
		// before inserting; the live tick decides at 09:03:00, when 09:01
		// is missed and catchup none drops it.
		tt.stale.clock.Set(t0.Add(time.Minute + time.Second))
		tt.live.clock.Set(t0.Add(3 * time.Minute))
		var once sync.Once
		var live *scheduler.Summary
		var liveErr error
		scheduler.SetBeforeInsert(tt.stale.eng, func(string) error {
			once.Do(func() { live, liveErr = tt.takeOver() })
			return nil
		})
		sum, err := tt.stale.eng.Tick(context.Background(), time.Time{})
		if liveErr != nil {
			t.Fatalf("live tick: %v", liveErr)
		}
		t.Logf("stale tick: %+v, err %v; live tick: epoch %d, decided %d", sum, err, live.Epoch, live.Decided)
		if !errors.Is(err, store.ErrStaleFence) {
			t.Errorf("stale tick: err %v, want ErrStaleFence", err)
		}
		r := tt.stale.run(t, schedule.RunID("job", t0.Add(time.Minute), schedule.SourceScheduled, 1))
		if r.Status != schedule.RunSkipped || !strings.Contains(r.Reason, "stale tick") {
			t.Errorf("the stale tick's 09:01: %s %q, want skipped as decided by a stale tick", r.Status, r.Reason)
		}
		if want := r.FinishedAt.Add(schedule.DefaultKeep); !r.ExpireAt.Equal(want) {
			// A finished run: retention must delete it like any other.
			t.Errorf("the stale tick's 09:01: expireAt %s, want finishedAt + the default keep = %s", r.ExpireAt, want)
		}
		// Later ticks: a 09:01 left pending would be recovered by their
		// sweep once its reservation ended.
		tt.live.clock.Set(t0.Add(5*time.Minute + time.Second))
		tt.live.tick(t)
		want := []string{"09:01 scheduled skipped", "09:02 scheduled succeeded", "09:03 scheduled succeeded", "09:04 scheduled succeeded", "09:05 scheduled succeeded"}
		if diff := cmp.Diff(want, fireTimesOf(tt.live.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		if n := g.calls.Load(); n != 4 {
			t.Errorf("target ran %d times, want 4 (09:02 to 09:05)", n)
		}
	})

	t.Run("a fire time the live tick also decided still runs", func(t *testing.T) {
		t.Parallel()
		d := &recDispatcher{}
		tasks := func(c *scheduler.Config) { c.Tasks = d }
		tt := newTwoTicks(t, func(c *scheduler.Config) { slow(c); tasks(c) }, tasks)
		key, g := newGate(t, 0)
		tt.stale.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Catchup: schedule.CatchupNone, Target: gateTarget(key)})
		// The stale tick decides 09:01 and 09:02 at 09:02:01 and inserts
		// them; then it pauses. The live tick at 09:02:45 drops 09:01
		// (missed) and finds 09:02 already recorded, which it hands off.
		tt.stale.clock.Set(t0.Add(2*time.Minute + time.Second))
		tt.live.clock.Set(t0.Add(2*time.Minute + 45*time.Second))
		var once sync.Once
		var liveErr error
		scheduler.SetAfterInsert(tt.stale.eng, func(string) error {
			once.Do(func() { _, liveErr = tt.takeOver() })
			return nil
		})
		_, err := tt.stale.eng.Tick(context.Background(), time.Time{})
		if liveErr != nil {
			t.Fatalf("live tick: %v", liveErr)
		}
		if !errors.Is(err, store.ErrStaleFence) {
			t.Errorf("stale tick: err %v, want ErrStaleFence", err)
		}
		var handed [][]string
		for _, task := range d.all() {
			handed = append(handed, task.Runs)
			if _, err := tt.live.eng.Execute(context.Background(), task, nil); err != nil {
				t.Errorf("execute %v: %v", task.Runs, err)
			}
		}
		if want := [][]string{{"job@20260302T090200Z"}}; !cmp.Equal(handed, want) {
			t.Errorf("handed off %v, want only the live tick's %v", handed, want)
		}
		want := []string{"09:01 scheduled skipped", "09:02 scheduled succeeded"}
		if diff := cmp.Diff(want, fireTimesOf(tt.live.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		if n := g.calls.Load(); n != 1 {
			t.Errorf("target ran %d times, want 1 (09:02)", n)
		}
	})
}

// stalledRenews holds, once armed, every write of the tick lease's object
// until the test ends, however its request's context ends: the heartbeat
// goroutine is stuck in a renew, as it is in a paused process, so nothing
// cancels the lease's context while its trust window runs out. Other
// objects (the job leases) are written as usual.
type stalledRenews struct {
	base    http.RoundTripper
	armed   atomic.Bool
	release chan struct{}
}

func (s *stalledRenews) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.armed.Load() && req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, "/upload/") &&
		req.URL.Query().Get("name") == "leases/"+scheduler.TickLease+".json" {
		<-s.release
	}
	return s.base.RoundTrip(req)
}

// TestPausedTickStopsAtItsLeaseDeadline: the tick's heartbeat is stuck
// while the tick decides, and the tick lease's trust window closes between
// two schedules. The lease's context is still live (its heartbeat has not
// run to notice), but the lease can no longer be relied on: a newer tick
// may be deciding. The tick must not record runs for the next schedule.
func TestPausedTickStopsAtItsLeaseDeadline(t *testing.T) {
	t.Parallel()
	s := emutest.Store(t)
	_, bucket := emutest.GCS(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	rt := &stalledRenews{base: http.DefaultTransport, release: make(chan struct{})}
	t.Cleanup(func() { close(rt.release) })
	client, err := storage.NewClient(context.Background(), append(emutest.GCSServer(t).ClientOptions(), option.WithHTTPClient(&http.Client{Transport: rt}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "paused"})
	c := newClock(t0)
	// Heartbeat every second, trust window 2.4 s; one schedule a page, so
	// the schedules are decided one after the other.
	e, err := scheduler.New(scheduler.Config{Store: s, Leases: m, Clock: c, TickLeaseTTL: 3 * time.Second, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	b := &bundle{store: s, leases: m, clock: c, eng: e}
	key, _ := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "a", Cron: "* * * * *", Target: gateTarget(key)})
	b.addSchedule(t, schedule.Schedule{ID: "b", Cron: "* * * * *", Target: gateTarget(key)})
	scheduler.SetAfterInsert(e, func(id string) error {
		if id == "a" {
			// The next renew (the first is due at 1 s) sticks, so the
			// window closes by 3.4 s after the acquire at the latest.
			rt.armed.Store(true)
			time.Sleep(3500 * time.Millisecond)
		}
		return nil
	})
	c.Set(t0.Add(time.Minute + time.Second))
	_, err = e.Tick(context.Background(), time.Time{})
	t.Logf("tick: err %v", err)
	if !errors.Is(err, lease.ErrLost) {
		t.Errorf("tick: err %v, want one wrapping lease.ErrLost", err)
	}
	if runs := b.runs(t, "b"); len(runs) != 0 {
		t.Errorf("runs of b decided after the tick lease's deadline: %v, want none", fireTimesOf(runs))
	}
	if got := b.getSchedule(t, "b").NextRunAt; !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("b's nextRunAt %s, want 09:01 still: the next tick decides it", got.Format("15:04:05"))
	}
}

// TestTickStoppedPartwayStartsWhatItCommitted: a tick stops on the second
// of two schedules (a crash there, a lost lease, a stale fence). The first
// schedule's decision is committed (its advance landed), and only its
// claim executes a run, so its runs start now rather than wait for the
// sweep to find them after the reservation.
func TestTickStoppedPartwayStartsWhatItCommitted(t *testing.T) {
	crash := errors.New("killed on the second schedule")
	for _, handOff := range []bool{false, true} {
		name := map[bool]string{false: "executed", true: "handed off"}[handOff]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := &recDispatcher{}
			b := setup(t, func(c *scheduler.Config) {
				if handOff {
					c.Tasks = d
				}
			})
			key, g := newGate(t, 0)
			b.addSchedule(t, schedule.Schedule{ID: "a", Cron: "* * * * *", Target: gateTarget(key)})
			b.addSchedule(t, schedule.Schedule{ID: "b", Cron: "* * * * *", Target: gateTarget(key)})
			scheduler.SetAfterInsert(b.eng, func(id string) error {
				if id == "b" {
					return crash
				}
				return nil
			})
			b.clock.Set(t0.Add(time.Minute + time.Second))
			if _, err := b.eng.Tick(context.Background(), time.Time{}); !errors.Is(err, crash) {
				t.Fatalf("tick: err %v, want %v", err, crash)
			}
			if got := b.getSchedule(t, "a").NextRunAt; !got.Equal(t0.Add(2 * time.Minute)) {
				t.Fatalf("a's nextRunAt %s, want 09:02: its advance landed", got.Format("15:04"))
			}
			a := b.run(t, "a@20260302T090100Z")
			if handOff {
				var handed []string
				for _, task := range d.all() {
					handed = append(handed, task.Runs...)
				}
				if !cmp.Equal(handed, []string{a.ID}) {
					t.Errorf("handed off %v, want a's run %s", handed, a.ID)
				}
				return
			}
			if a.Status != schedule.RunSucceeded || g.calls.Load() != 1 {
				t.Errorf("a's run after the tick: %s, target ran %d times; want it executed now: the sweep would not take it before 09:02:01, and the clock is at %s",
					a.Status, g.calls.Load(), b.clock.Now().Format("15:04:05"))
			}
			if r := b.run(t, "b@20260302T090100Z"); r.Status != schedule.RunPending {
				t.Errorf("b's run: %s, want pending (its advance never landed)", r.Status)
			}
		})
	}
}

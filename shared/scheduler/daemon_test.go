package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// daemonUnder is one daemon process: its own lease holder and engine on the
// shared database and bucket, on the real clock.
type daemonUnder struct {
	d      *scheduler.Daemon
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returns
	lead   chan int64
	lose   chan error
}

func startDaemon(t *testing.T, s *mongostore.Store, bucket *lease.Manager, mod func(*scheduler.DaemonConfig)) *daemonUnder {
	t.Helper()
	e, err := scheduler.New(scheduler.Config{Store: s, Leases: bucket, TickLeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	u := &daemonUnder{done: make(chan struct{}), lead: make(chan int64, 10), lose: make(chan error, 10)}
	cfg := scheduler.DaemonConfig{Engine: e,
		OnLead: func(epoch int64) { u.lead <- epoch },
		OnLose: func(err error) { u.lose <- err },
	}
	if mod != nil {
		mod(&cfg)
	}
	u.d, err = scheduler.NewDaemon(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel = cancel
	go func() {
		defer close(u.done)
		if err := u.d.Run(ctx); err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-u.done })
	return u
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func insertNow(t *testing.T, s *mongostore.Store, sc schedule.Schedule) {
	t.Helper()
	if err := sc.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	next, err := schedule.NextFire(sc.Cron, sc.TimeZone, now)
	if err != nil {
		t.Fatal(err)
	}
	sc.NextRunAt, sc.Enabled, sc.Version, sc.CreatedAt, sc.UpdatedAt = next.UTC(), true, 1, now, now
	if _, err := s.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonTakeover: daemon A leads and B waits. A's tick lease is broken
// (as an operator's `baton lease break`, or a pause past its TTL, would
// leave it) and A dies; B takes over, and the per-second schedule keeps
// firing every second exactly once.
func TestDaemonTakeover(t *testing.T) {
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	mgr := func(holder string) *lease.Manager {
		return lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: holder})
	}
	key, g := newGate(t, 0)
	insertNow(t, s, schedule.Schedule{ID: "sec", Cron: "* * * * * *", Target: gateTarget(key)})

	var ticksMu sync.Mutex
	ticksBy := map[string]int{}
	onTick := func(name string) func(*scheduler.DaemonConfig) {
		return func(c *scheduler.DaemonConfig) {
			c.OnTick = func(sum *scheduler.Summary) {
				ticksMu.Lock()
				ticksBy[name] += sum.Decided
				ticksMu.Unlock()
			}
		}
	}
	a := startDaemon(t, s, mgr("daemon-a"), onTick("a"))
	epochA := waitFor(t, a.lead, "daemon A to lead")
	b := startDaemon(t, s, mgr("daemon-b"), onTick("b"))
	// A fires a few seconds while B waits.
	for g.calls.Load() < 3 {
		waitFor(t, g.started, "a run under daemon A")
	}
	if b.d.Leading() {
		t.Fatal("both daemons lead")
	}
	if err := mgr("operator").Break(context.Background(), scheduler.TickLease); err != nil {
		t.Fatal(err)
	}
	lostErr := waitFor(t, a.lose, "daemon A to notice it lost the tick lease")
	a.cancel() // A dies after losing: B must take over
	<-a.done
	if !errors.Is(lostErr, lease.ErrLost) {
		t.Logf("A stopped leading with: %v", lostErr)
	}
	epochB := waitFor(t, b.lead, "daemon B to take over")
	if epochB <= epochA {
		t.Errorf("B's epoch %d is not above A's %d", epochB, epochA)
	}
	// B fires a few seconds of its own.
	for n := g.calls.Load() + 3; g.calls.Load() < n; {
		waitFor(t, g.started, "a run under daemon B")
	}
	b.cancel()
	<-b.done

	var runs []schedule.Run
	if err := s.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{{Key: "scheduleId", Value: "sec"}}, &runs); err != nil {
		t.Fatal(err)
	}
	seen := map[time.Time]bool{}
	first, last := runs[0].FireTime, runs[0].FireTime
	var succeeded int64
	holders := map[string]int{}
	for _, r := range runs {
		if seen[r.FireTime] {
			t.Errorf("fire time %s has two runs", r.FireTime)
		}
		seen[r.FireTime] = true
		if r.FireTime.Before(first) {
			first = r.FireTime
		}
		if r.FireTime.After(last) {
			last = r.FireTime
		}
		if r.Status == schedule.RunSucceeded {
			succeeded++
		}
		holders[r.Holder]++
	}
	for ft := first; !ft.After(last); ft = ft.Add(time.Second) {
		if !seen[ft] {
			t.Errorf("fire time %s never ran (lost in the takeover)", ft.Format(time.RFC3339))
		}
	}
	if g.calls.Load() != succeeded {
		t.Errorf("%d executions for %d succeeded runs", g.calls.Load(), succeeded)
	}
	if holders["daemon-a"] == 0 || holders["daemon-b"] == 0 {
		t.Errorf("runs by holder %v: want runs under both daemons", holders)
	}
	t.Logf("runs %d from %s to %s; by holder %v; decided per daemon %v", len(runs), first.Format("15:04:05"), last.Format("15:04:05"), holders, ticksBy)
}

// TestDaemonPicksUpEdits: with MaxIdle a minute, only the edit watcher can
// make the daemon fire an edited schedule within the wait: edit a yearly
// schedule to fire every second, and a run must follow.
func TestDaemonPicksUpEdits(t *testing.T) {
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	key, g := newGate(t, 0)
	insertNow(t, s, schedule.Schedule{ID: "edit-me", Cron: "0 0 1 1 *", Target: gateTarget(key)})
	edits := make(chan string, 100)
	ticked := make(chan struct{}, 100)
	u := startDaemon(t, s, lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "daemon"}), func(c *scheduler.DaemonConfig) {
		c.MaxIdle = time.Minute
		c.OnEdit = func(id string, _ time.Time) { edits <- id }
		c.OnTick = func(*scheduler.Summary) { ticked <- struct{}{} }
	})
	waitFor(t, u.lead, "the daemon to lead")
	waitFor(t, ticked, "the first tick")
	if m := u.d.WatchMode(); m != "poll" {
		// The emulator refuses $changeStream, as Firestore does by default.
		t.Errorf("watch mode %q, want poll", m)
	}
	now := time.Now().UTC()
	next, _ := schedule.NextFire("* * * * * *", "", now)
	err := s.Collection(schedule.SchedulesCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "edit-me"}},
		bson.D{
			{Key: "$set", Value: bson.D{{Key: "cron", Value: "* * * * * *"}, {Key: "nextRunAt", Value: next}, {Key: "updatedAt", Value: now}}},
			{Key: "$inc", Value: bson.D{{Key: "version", Value: 1}}},
		})
	if err != nil {
		t.Fatal(err)
	}
	if id := waitFor(t, edits, "the edit to be seen"); id != "edit-me" {
		t.Errorf("saw an edit of %q", id)
	}
	waitFor(t, g.started, "a run of the edited schedule")
}

// TestDaemonSlowRunDelaysNoTick: the daemon runs executions off its ticking
// path, so a run that does not end keeps no other schedule waiting: a
// per-second schedule fires five fire times in a row while the slow one's
// first run is still blocked.
func TestDaemonSlowRunDelaysNoTick(t *testing.T) {
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	slowKey, slow := newGate(t, 1<<30) // blocks until the test ends
	fastKey, fast := newGate(t, 0)
	insertNow(t, s, schedule.Schedule{ID: "slow", Cron: "* * * * * *", Overlap: schedule.OverlapSkip, Target: gateTarget(slowKey)})
	insertNow(t, s, schedule.Schedule{ID: "fast", Cron: "* * * * * *", Target: gateTarget(fastKey)})
	u := startDaemon(t, s, lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "daemon"}), nil)
	waitFor(t, u.lead, "the daemon to lead")
	waitFor(t, slow.started, "the slow run")
	before := fast.calls.Load()
	for fast.calls.Load() < before+5 {
		waitFor(t, fast.started, "a fast run while the slow one is blocked")
	}
	if n := slow.calls.Load(); n != 1 {
		t.Errorf("slow target called %d times, want 1 (its later fires overlap and are skipped)", n)
	}
}

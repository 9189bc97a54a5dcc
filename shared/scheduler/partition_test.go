package scheduler_test

// Partitioned deciders (issue 28): the coordinator → partition path on the
// strict emulators, with P changing while the system runs, every partition
// task delivered twice at once, and a stale decider shard holder that wakes
// in the middle of its decision.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// partitionRig is several engines (function instances, each its own lease
// holder) on one database and bucket, sharing the scripted clock, and an
// http target that counts its calls per run.
type partitionRig struct {
	store   *mongostore.Store
	clock   *clock
	engines map[string]*scheduler.Engine
	leases  map[string]*lease.Manager
	srv     *httptest.Server

	mu    sync.Mutex
	calls map[string]int // run id → calls
}

func newPartitionRig(t *testing.T, holders ...string) *partitionRig {
	t.Helper()
	return newPartitionRigWith(t, nil, holders...)
}

// newPartitionRigWith is newPartitionRig with each holder's engine
// configuration changed by with, when set.
func newPartitionRigWith(t *testing.T, with func(holder string, c *scheduler.Config), holders ...string) *partitionRig {
	t.Helper()
	r := &partitionRig{store: emutest.Store(t), clock: newClock(t0), engines: map[string]*scheduler.Engine{},
		leases: map[string]*lease.Manager{}, calls: map[string]int{}}
	if err := r.store.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.calls[req.Header.Get(scheduler.HeaderRunID)]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	u, _ := url.Parse(r.srv.URL)
	client, bucket := emutest.SimulatedTimeGCS(t)
	for _, h := range holders {
		// EpochFloor as in the functions: a shard lease that is broken
		// (as an expiry frees it) restarts above the fences stored.
		m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: h, ObjectWriteGap: -1, EpochFloor: scheduler.EpochFloor(r.store)})
		// The default TTL: under -race on a loaded machine a 10 s lease's
		// heartbeat can miss its window, and a decider that loses its
		// lease stops mid-shard (correctly, and a later tick records the
		// fire times it left as missed), which is not what this tests.
		ttl := scheduler.DefaultTickLeaseTTL
		if h == "stale" {
			// Its heartbeat (a third of the TTL) must not notice the
			// break while it is paused: it wakes believing it holds.
			ttl = 3 * time.Minute
		}
		cfg := scheduler.Config{Store: r.store, Leases: m, Clock: r.clock, TickLeaseTTL: ttl,
			AllowedTargets: []string{u.Hostname()}}
		if with != nil {
			with(h, &cfg)
		}
		e, err := scheduler.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Wait)
		r.engines[h], r.leases[h] = e, m
	}
	return r
}

// addSchedules inserts n every-minute schedules through Normalize (which
// sets each one's decider shard), 16 at a time.
func (r *partitionRig) addSchedules(t *testing.T, n int, overlap schedule.Overlap) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var failed atomic.Value
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s := schedule.Schedule{ID: fmt.Sprintf("every-minute-%05d", i), Cron: "* * * * *", Overlap: overlap,
				Target: schedule.Target{Type: schedule.TargetHTTP, HTTP: &schedule.HTTPTarget{URL: r.srv.URL + "/hit"}}}
			if err := s.Normalize(schedule.ValidateOptions{AllowedHosts: []string{"127.0.0.1"}}); err != nil {
				failed.Store(err)
				return
			}
			now := r.clock.Now()
			next, _ := schedule.NextFire(s.Cron, s.TimeZone, now)
			s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next.UTC(), true, 1, now, now
			if ok, err := r.store.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil || !ok {
				failed.Store(fmt.Errorf("insert %s: inserted %v: %w", s.ID, ok, err))
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
}

// recorder is a PartitionDispatcher that keeps the tasks a coordinator
// created, by name, as Cloud Tasks does (a second create of a name is
// ALREADY_EXISTS, which the dispatcher answers as success).
type recorder struct {
	mu    sync.Mutex
	names map[string]bool
	tasks []scheduler.PartitionTask
}

func (rc *recorder) DispatchPartition(_ context.Context, t scheduler.PartitionTask) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.names == nil {
		rc.names = map[string]bool{}
	}
	if !rc.names[t.Name] {
		rc.names[t.Name] = true
		rc.tasks = append(rc.tasks, t)
	}
	return nil
}

func (rc *recorder) take() []scheduler.PartitionTask {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := rc.tasks
	rc.tasks = nil
	return out
}

// TestPartitionedDecidersExactlyOnce is issue 28's first acceptance line:
// every-minute schedules over ten minutes of the engine's clock, P cycling
// 1 → 4 → 16 → 3, each partition task delivered twice at once (to two
// instances), the coordinating tick itself duplicated, and in one minute a
// stale decider shard holder that pauses mid-decide past its lease while
// the live partitions decide its shard, then wakes. Every fire time gets
// exactly one run, every nextRunAt moves on once a minute, and no run's
// target is called twice.
//
// BATON_TEST_PARTITION_SCHEDULES sets the count: make test-scale (part of
// make test) runs the 2,000 without the race detector. Left unset,
// it is 60 (600 fire times, all 64 shards populated), and 20 under -short
// and -race: make test-race runs this package under the race detector,
// which also instruments the embedded FerretDB, so it covers the
// concurrency at a size it can afford and test-scale covers the size. A
// run's cost no longer grows with the runs stored (the Mongo emulator's
// front narrows conditional writes to their _id and indexes FerretDB's
// _id lookup); what still grows with the count is FerretDB scanning the
// schedules collection for each shard's due query, in Go.
func TestPartitionedDecidersExactlyOnce(t *testing.T) {
	n := 60
	if testing.Short() || raceBuild {
		n = 20
	}
	if v, err := strconv.Atoi(os.Getenv("BATON_TEST_PARTITION_SCHEDULES")); err == nil && v > 0 {
		n = v
	}
	const minutes = 10
	r := newPartitionRig(t, "coord", "a", "b", "stale")
	r.addSchedules(t, n, schedule.OverlapAllow)
	rec := &recorder{}
	// The coordinator's engine creates tasks; the instances decide.
	coordCfg := scheduler.Config{Store: r.store, Leases: r.leases["coord"], Clock: r.clock, Partitions: rec}
	coord, err := scheduler.New(coordCfg)
	if err != nil {
		t.Fatal(err)
	}
	ps := []int{1, 4, 16, 3}
	staleMinute := 6
	// The stale holder's pause: it has taken its shard's lease and read the
	// shard, and stops just before recording the first schedule's runs.
	paused, wake := make(chan string, 1), make(chan struct{})
	var pauseOnce sync.Once
	scheduler.SetBeforeInsert(r.engines["stale"], func(id string) error {
		pauseOnce.Do(func() {
			paused <- id
			<-wake
		})
		return nil
	})
	start := time.Now()
	for m := 1; m <= minutes; m++ {
		P := ps[(m-1)*len(ps)/minutes]
		fire := t0.Add(time.Duration(m) * time.Minute)
		r.clock.Set(fire.Add(time.Second))
		// Cloud Scheduler delivers at least once: two coordinating ticks
		// of one schedule time create each partition task once.
		for range 2 {
			if _, err := coord.Coordinate(context.Background(), fire, P); err != nil {
				t.Fatalf("minute %d: coordinate: %v", m, err)
			}
		}
		tasks := rec.take()
		if len(tasks) != P {
			t.Fatalf("minute %d: %d partition tasks for P=%d", m, len(tasks), P)
		}
		var staleDone chan error
		stale := 0
		if m == staleMinute {
			// The stale instance takes the shards of a partition that
			// has schedules first, and pauses holding one of them. At
			// the race detector's 20 schedules over 64 shards, partition
			// 0 of 16 can have none, and a stale holder that never
			// reaches a schedule never pauses.
			stale = partitionWithSchedules(t, n, tasks)
			staleDone = make(chan error, 1)
			go func() {
				_, err := r.engines["stale"].TickPartition(context.Background(), fire, tasks[stale].Partition, P)
				staleDone <- err
			}()
			var id string
			select {
			case id = <-paused:
			case err := <-staleDone:
				t.Fatalf("minute %d: the stale holder finished (%v) without reaching a schedule to pause on", m, err)
			}
			v := schedule.DeciderShardOf(id, schedule.DeciderShards())
			// Its lease expires while it is paused (a break frees it as
			// an expiry would; its heartbeat, at a third of the TTL,
			// has not noticed yet).
			if err := r.leases["a"].Break(context.Background(), scheduler.TickShardLease(v)); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(tasks))
		for _, task := range tasks {
			for _, h := range []string{"a", "b"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sum, err := r.engines[h].TickPartition(context.Background(), task.ScheduleTime, task.Partition, task.Partitions)
					if err != nil {
						errs <- fmt.Errorf("minute %d, %s, partition %d/%d: %w", m, h, task.Partition, task.Partitions, err)
						return
					}
					if testing.Verbose() {
						t.Logf("minute %d %s p%d/%d: decided %d shards %d/%d took %s", m, h, task.Partition, task.Partitions, sum.Decided, sum.ShardsDecided, sum.ShardsSkipped, sum.Took)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if staleDone != nil {
			close(wake)
			if err := <-staleDone; err == nil {
				t.Errorf("minute %d: the stale holder's partition succeeded; want it stopped (its advance refused as stale, or its lease lost)", m)
			} else {
				t.Logf("stale holder stopped: %v", err)
			}
			// The partition a stale holder leaves undone (the shards
			// it had not reached) is redelivered by Cloud Tasks.
			if _, err := r.engines["a"].TickPartition(context.Background(), fire, tasks[stale].Partition, P); err != nil {
				t.Errorf("minute %d: redelivery: %v", m, err)
			}
		}
		for _, e := range r.engines {
			e.Wait()
		}
		// Every nextRunAt moved on exactly once this minute.
		if k, err := r.store.Collection(schedule.SchedulesCollection).Count(context.Background(), bson.D{{Key: "nextRunAt", Value: bson.D{{Key: "$ne", Value: fire.Add(time.Minute)}}}}); err != nil || k != 0 {
			t.Errorf("minute %d: %d schedules (%v) not at nextRunAt %s", m, k, err, fire.Add(time.Minute))
		}
		t.Logf("minute %d (P=%d): %s", m, P, time.Since(start))
	}
	t.Logf("%d schedules × %d minutes: %s wall", n, minutes, time.Since(start))

	// Exactly one run per fire time, each executed, none called twice.
	type runRow struct {
		ID         string    `bson:"_id"`
		ScheduleID string    `bson:"scheduleId"`
		FireTime   time.Time `bson:"fireTime"`
		Status     string    `bson:"status"`
	}
	var runs []runRow
	if err := r.store.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{}, &runs); err != nil {
		t.Fatal(err)
	}
	perFire := map[string]int{}
	ids := map[string][]string{}
	for _, run := range runs {
		k := run.ScheduleID + "@" + run.FireTime.UTC().Format(time.RFC3339)
		perFire[k]++
		ids[k] = append(ids[k], run.ID+" "+run.Status)
		if run.Status != string(schedule.RunSucceeded) && run.Status != string(schedule.RunSkipped) {
			t.Errorf("run %s is %s", run.ID, run.Status)
		}
	}
	bad := 0
	for i := range n {
		id := fmt.Sprintf("every-minute-%05d", i)
		for m := 1; m <= minutes; m++ {
			k := id + "@" + t0.Add(time.Duration(m)*time.Minute).Format(time.RFC3339)
			if perFire[k] != 1 && bad < 10 {
				bad++
				t.Errorf("%s: %d runs %v; want exactly 1", k, perFire[k], ids[k])
			}
		}
	}
	if len(runs) != n*minutes {
		t.Errorf("%d runs; want %d (one per schedule and minute)", len(runs), n*minutes)
	}
	r.mu.Lock()
	calls := 0
	for id, c := range r.calls {
		calls += c
		if c != 1 {
			t.Errorf("run %s: target called %d times", id, c)
		}
	}
	r.mu.Unlock()
	if calls != n*minutes {
		t.Errorf("target called %d times; want %d", calls, n*minutes)
	}
	// Each nextRunAt moved on once a minute: now the minute after the last.
	var scheds []schedule.Schedule
	if err := r.store.Collection(schedule.SchedulesCollection).Find(context.Background(), bson.D{}, &scheds); err != nil {
		t.Fatal(err)
	}
	want := t0.Add((minutes + 1) * time.Minute)
	for _, s := range scheds {
		if !s.NextRunAt.Equal(want) {
			t.Errorf("%s: nextRunAt %s; want %s", s.ID, s.NextRunAt, want)
			break
		}
	}
}

// oneSchedule inserts one every-minute schedule with the target t and
// catch-up c, and returns its decider shard.
func (r *partitionRig) oneSchedule(t *testing.T, id string, c schedule.Catchup) int {
	t.Helper()
	s := schedule.Schedule{ID: id, Cron: "* * * * *", Catchup: c,
		Target: schedule.Target{Type: schedule.TargetHTTP, HTTP: &schedule.HTTPTarget{URL: r.srv.URL + "/hit"}}}
	if err := s.Normalize(schedule.ValidateOptions{AllowedHosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	now := r.clock.Now()
	next, _ := schedule.NextFire(s.Cron, s.TimeZone, now)
	s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next.UTC(), true, 1, now, now
	if ok, err := r.store.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil || !ok {
		t.Fatalf("insert %s: %v %v", id, ok, err)
	}
	return s.DeciderShard
}

// TestHeldDeciderShardIsSkipped: a partition finds one of its shards held
// by another holder (a duplicate delivery, or a partition of another P
// still deciding): it decides its other shards, leaves that one alone
// without waiting, and answers ok, so Cloud Tasks does not redeliver it.
func TestHeldDeciderShardIsSkipped(t *testing.T) {
	t.Parallel()
	r := newPartitionRig(t, "a", "other")
	held := r.oneSchedule(t, "held", schedule.CatchupLatest)
	var free string
	for i := 0; ; i++ {
		id := fmt.Sprintf("free-%d", i)
		if schedule.DeciderShardOf(id, schedule.DeciderShards()) != held {
			r.oneSchedule(t, id, schedule.CatchupLatest)
			free = id
			break
		}
	}
	l, err := r.leases["other"].Acquire(context.Background(), scheduler.TickShardLease(held), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(context.Background()) }()
	r.clock.Set(t0.Add(time.Minute + time.Second))
	sum, err := r.engines["a"].TickPartition(context.Background(), t0.Add(time.Minute), 0, 1)
	if err != nil {
		t.Fatalf("a partition with a held shard failed: %v", err)
	}
	if sum.ShardsSkipped != 1 || sum.ShardsDecided != 1 || sum.ShardsQuiet != schedule.DeciderShards()-2 || sum.Decided != 1 {
		t.Errorf("summary: decided %d runs, shards %d decided %d skipped %d quiet; want 1 run, 1, 1 and %d", sum.Decided, sum.ShardsDecided, sum.ShardsSkipped, sum.ShardsQuiet, schedule.DeciderShards()-2)
	}
	var got schedule.Schedule
	if err := r.store.Collection(schedule.SchedulesCollection).Get(context.Background(), "held", &got); err != nil {
		t.Fatal(err)
	}
	if !got.NextRunAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("the held shard's schedule moved to %s; want it left at %s for its holder", got.NextRunAt, t0.Add(time.Minute))
	}
	if err := r.store.Collection(schedule.SchedulesCollection).Get(context.Background(), free, &got); err != nil {
		t.Fatal(err)
	}
	if !got.NextRunAt.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("%s: nextRunAt %s; want %s", free, got.NextRunAt, t0.Add(2*time.Minute))
	}
}

// TestStaleDeciderShardHolderIsFenced: a partition pauses holding a
// shard's lease, after reading the shard and before recording a fire time
// that the live holder, deciding later, drops by its catch-up policy. The
// lease expires and a live partition decides the shard under the shard's
// next epoch. When the stale one wakes, its advance is refused by the
// shard's fence, its partition fails, and the fire time it recorded is
// undone (recorded skipped), never called.
func TestStaleDeciderShardHolderIsFenced(t *testing.T) {
	t.Parallel()
	r := newPartitionRig(t, "live", "stale")
	v := r.oneSchedule(t, "job", schedule.CatchupNone)
	paused, wake := make(chan struct{}), make(chan struct{})
	scheduler.SetBeforeInsert(r.engines["stale"], func(string) error {
		close(paused)
		<-wake
		return nil
	})
	// The stale partition decides at 09:01:01, when 09:01 is on time.
	r.clock.Set(t0.Add(time.Minute + time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := r.engines["stale"].TickPartition(context.Background(), t0.Add(time.Minute), v%4, 4)
		done <- err
	}()
	<-paused
	if err := r.leases["live"].Break(context.Background(), scheduler.TickShardLease(v)); err != nil {
		t.Fatal(err)
	}
	// The live partition decides at 09:03:00: 09:01 is missed and catch-up
	// none drops it; 09:02 and 09:03 are on time.
	r.clock.Set(t0.Add(3 * time.Minute))
	if _, err := r.engines["live"].TickPartition(context.Background(), t0.Add(3*time.Minute), v%4, 4); err != nil {
		t.Fatal(err)
	}
	close(wake)
	if err := <-done; err == nil {
		t.Error("the stale partition succeeded; want its advance refused by the shard's fence")
	}
	r.engines["stale"].Wait()
	var runs []schedule.Run
	if err := r.store.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{{Key: "scheduleId", Value: "job"}}, &runs); err != nil {
		t.Fatal(err)
	}
	for _, run := range runs {
		if run.FireTime.Equal(t0.Add(time.Minute)) && run.Status != schedule.RunSkipped {
			t.Errorf("the stale holder's 09:01 run %s is %s; want it undone (skipped)", run.ID, run.Status)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, c := range r.calls {
		if c != 1 {
			t.Errorf("run %s called %d times", id, c)
		}
	}
	if len(r.calls) != 2 {
		t.Errorf("calls %v; want the live decision's two (09:02, 09:03)", r.calls)
	}
}

// partitionWithSchedules is the index in tasks of the first partition
// whose decider shards hold one of the test's n schedules.
func partitionWithSchedules(t *testing.T, n int, tasks []scheduler.PartitionTask) int {
	t.Helper()
	for i, task := range tasks {
		for k := range n {
			v := schedule.DeciderShardOf(fmt.Sprintf("every-minute-%05d", k), schedule.DeciderShards())
			if v%task.Partitions == task.Partition {
				return i
			}
		}
	}
	t.Fatalf("no partition of %d holds one of %d schedules", len(tasks), n)
	return 0
}

// TestQuietShardTakesNoLease: a partition takes the lease of a decider
// shard only when something in it is due; the others are looked at (a
// read) and left, so a tick's Cloud Storage writes grow with the shards
// that have work, not with V (docs/cost.md).
func TestQuietShardTakesNoLease(t *testing.T) {
	t.Parallel()
	r := newPartitionRig(t, "a")
	busy := r.oneSchedule(t, "busy", schedule.CatchupLatest)
	r.clock.Set(t0.Add(time.Minute + time.Second))
	sum, err := r.engines["a"].TickPartition(context.Background(), t0.Add(time.Minute), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Decided != 1 || sum.ShardsDecided != 1 || sum.ShardsQuiet != schedule.DeciderShards()-1 {
		t.Errorf("summary: decided %d, shards %d decided %d quiet; want 1, 1 and %d", sum.Decided, sum.ShardsDecided, sum.ShardsQuiet, schedule.DeciderShards()-1)
	}
	infos, err := r.leases["a"].List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var shards []string
	for _, in := range infos {
		if strings.HasPrefix(in.Name, "tick-") {
			shards = append(shards, in.Name)
		}
	}
	if want := []string{scheduler.TickShardLease(busy)}; !slices.Equal(shards, want) {
		t.Errorf("shard leases written %v, want only %v", shards, want)
	}
}

// TestDecidedShardLeaseLapses: with LapseShardLeases, a decided shard's
// lease is not released (no marker, no write): it stays held by its
// decider until it expires. Another process's tick meanwhile finds the
// shard held and skips it, deciding nothing; the decider's own next tick
// takes the lease again at once, with a higher epoch, and decides it. Each
// fire time runs once. Decided late in its minute, or with a TTL that
// would outlast a minute's tick, the lease is released as before.
func TestDecidedShardLeaseLapses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newPartitionRigWith(t, func(h string, c *scheduler.Config) {
		c.LapseShardLeases = true
		if h == "long" {
			c.TickLeaseTTL = time.Minute
		}
	}, "a", "b", "long")
	v := r.oneSchedule(t, "s", schedule.CatchupLatest)
	name := scheduler.TickShardLease(v)
	tick := func(h string, minute int) *scheduler.Summary {
		t.Helper()
		r.clock.Set(t0.Add(time.Duration(minute)*time.Minute + time.Second))
		sum, err := r.engines[h].TickPartition(ctx, t0.Add(time.Duration(minute)*time.Minute), 0, 1)
		if err != nil {
			t.Fatalf("%s's tick of minute %d: %v", h, minute, err)
		}
		r.engines[h].Wait()
		return sum
	}
	if sum := tick("a", 1); sum.Decided != 1 || sum.ShardsDecided != 1 {
		t.Fatalf("a's first tick: %+v, want the shard decided", sum)
	}
	first, err := r.leases["a"].Status(ctx, name)
	if err != nil || first.Holder != "a" || first.Free {
		t.Fatalf("the decided shard's lease: %+v, %v; want it still held by a (left to lapse)", first, err)
	}
	if sum := tick("b", 2); sum.Decided != 0 || sum.ShardsSkipped != 1 {
		t.Errorf("b's tick while a's lease lapses: %+v, want the shard skipped, nothing decided", sum)
	}
	if sum := tick("a", 2); sum.Decided != 1 || sum.ShardsDecided != 1 {
		t.Errorf("a's next tick: %+v, want the shard decided under the lease it left", sum)
	}
	second, err := r.leases["a"].Status(ctx, name)
	if err != nil || second.Holder != "a" || second.Epoch <= first.Epoch {
		t.Errorf("the lease after a's second tick: %+v, %v; want a's, epoch above %d", second, err, first.Epoch)
	}
	r.mu.Lock()
	calls := maps.Clone(r.calls)
	r.mu.Unlock()
	if len(calls) != 2 {
		t.Errorf("runs called %v, want the two fire times", calls)
	}
	for id, n := range calls {
		if n != 1 {
			t.Errorf("run %s called %d times, want once", id, n)
		}
	}
	// Decided late in its minute (a partition task redelivered 40 s in),
	// the lease would outlast the next minute's tick: released.
	r.clock.Set(t0.Add(3*time.Minute + 40*time.Second))
	if _, err := r.engines["a"].TickPartition(ctx, t0.Add(3*time.Minute), 0, 1); err != nil {
		t.Fatal(err)
	}
	r.engines["a"].Wait()
	if in, err := r.leases["a"].Status(ctx, name); in == nil || !in.Free {
		t.Errorf("the shard's lease after a decide 40 s into its minute: %+v, %v; want it released", in, err)
	}
	// A TTL of a minute would outlast the next tick: released as before.
	if _, err := r.leases["a"].Acquire(ctx, name, 30*time.Second); err != nil {
		t.Fatal(err) // a holds it again, for long's tick to meet
	}
	if sum := tick("long", 4); sum.Decided != 0 || sum.ShardsSkipped != 1 {
		t.Fatalf("long's tick while a holds the shard: %+v, want the shard skipped", sum)
	}
	if err := r.leases["a"].Break(ctx, name); err != nil {
		t.Fatal(err)
	}
	if sum := tick("long", 4); sum.ShardsDecided != 1 {
		t.Fatalf("long's tick: %+v, want the shard decided", sum)
	}
	// Status answers a free lease's state with ErrNotFound.
	if in, err := r.leases["long"].Status(ctx, name); in == nil || !in.Free {
		t.Errorf("the shard's lease after a decide with a one-minute TTL: %+v, %v; want it released", in, err)
	}
}

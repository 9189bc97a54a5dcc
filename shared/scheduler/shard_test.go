package scheduler_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// shardTarget is an http target (httptest: the edge a target is) that
// records each request's X-Baton-Shard and param by run id, fails the
// first call of the shards in fail, and blocks the shards in block until
// release is closed.
type shardTarget struct {
	srv     *httptest.Server
	mu      sync.Mutex
	calls   map[string][]string // run id → "shard param" per call
	perSh   map[string]int      // shard header → calls
	fail    map[string]bool
	block   map[string]bool
	started chan string
	release chan struct{}
}

func newShardTarget(t *testing.T) *shardTarget {
	st := &shardTarget{calls: map[string][]string{}, perSh: map[string]int{}, fail: map[string]bool{}, block: map[string]bool{},
		started: make(chan string, 100), release: make(chan struct{})}
	st.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sh := r.Header.Get(schedule.ShardHeader)
		st.mu.Lock()
		st.calls[r.Header.Get(scheduler.HeaderRunID)] = append(st.calls[r.Header.Get(scheduler.HeaderRunID)], sh+" "+r.Header.Get(schedule.ShardParamHeader))
		st.perSh[sh]++
		n, fail, block := st.perSh[sh], st.fail[sh], st.block[sh]
		st.mu.Unlock()
		st.started <- sh
		if block && n == 1 {
			<-st.release
		}
		if fail && n == 1 {
			http.Error(w, "shard failing as asked", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(func() {
		select {
		case <-st.release:
		default:
			close(st.release)
		}
		st.srv.Close()
	})
	return st
}

func (st *shardTarget) setup(t *testing.T) *bundle {
	u, _ := url.Parse(st.srv.URL)
	return setup(t, func(c *scheduler.Config) { c.AllowedTargets = []string{u.Host} })
}

func (st *shardTarget) target() schedule.Target {
	return schedule.Target{Type: schedule.TargetHTTP, HTTP: &schedule.HTTPTarget{URL: st.srv.URL + "/shard"}}
}

func (st *shardTarget) snapshot() map[string][]string {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := map[string][]string{}
	for k, v := range st.calls {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func idsOf(runs []schedule.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.ID+" "+string(r.Status))
	}
	sort.Strings(out)
	return out
}

// TestShardsFanOut: a fire of a schedule with shards: 3 is three runs,
// <run>#0..2, and each request says its own shard and param. A duplicated
// tick (same instant, again) inserts and calls nothing more.
func TestShardsFanOut(t *testing.T) {
	st := newShardTarget(t)
	b := st.setup(t)
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Shards: 3, ShardParams: []string{"a", "b", "c"}, Target: st.target()})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	if sum := b.tick(t); sum.Decided != 3 || sum.Succeeded != 3 {
		t.Fatalf("summary %+v, want 3 decided and 3 succeeded", sum)
	}
	b.tick(t) // a duplicated tick: its fire is decided
	if _, err := b.eng.Tick(context.Background(), b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	runs := b.runs(t, "job")
	want := []string{"job@20260302T090100Z#0 succeeded", "job@20260302T090100Z#1 succeeded", "job@20260302T090100Z#2 succeeded"}
	if got := idsOf(runs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	calls := st.snapshot()
	for i, p := range []string{"a", "b", "c"} {
		id := fmt.Sprintf("job@20260302T090100Z#%d", i)
		if w := fmt.Sprintf("%d/3 %s", i, p); len(calls[id]) != 1 || calls[id][0] != w {
			t.Errorf("run %s: calls %q, want one %q", id, calls[id], w)
		}
	}
	if len(calls) != 3 {
		t.Errorf("calls %v, want 3 runs called", calls)
	}
	if s := b.getSchedule(t, "job"); s.Overlap != schedule.OverlapSkip {
		t.Errorf("overlap %q, want skip (the sharded default)", s.Overlap)
	}
	agg := schedule.AggregateFire("job@20260302T090100Z", 3, schedule.LatestShards(runs, "job@20260302T090100Z", 3))
	if agg.Status != schedule.RunSucceeded {
		t.Errorf("aggregate %+v, want succeeded", agg)
	}
}

// TestShardRetry: one shard fails and retries; the others do not run
// again, and the fire is succeeded only once the retry is.
func TestShardRetry(t *testing.T) {
	st := newShardTarget(t)
	st.fail["1/3"] = true
	b := st.setup(t)
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Shards: 3, Target: st.target(),
		Retry: schedule.Retry{MaxAttempts: 2, Backoff: schedule.Duration(10 * time.Second)}})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	b.tick(t)
	fire := "job@20260302T090100Z"
	agg := schedule.AggregateFire(fire, 3, schedule.LatestShards(b.runs(t, "job"), fire, 3))
	if agg.Status != schedule.RunPending {
		t.Fatalf("aggregate after the failure %s (%s), want pending: shard 1's retry is", agg.Status, agg.Reason)
	}
	b.clock.Add(15 * time.Second)
	b.tick(t) // the sweep runs the due retry
	want := []string{fire + "#0 succeeded", fire + "#1 failed", fire + "#1-a2 succeeded", fire + "#2 succeeded"}
	if got := idsOf(b.runs(t, "job")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	calls := st.snapshot()
	if len(calls[fire+"#0"]) != 1 || len(calls[fire+"#2"]) != 1 || fmt.Sprint(calls[fire+"#1-a2"]) != "[1/3 ]" {
		t.Errorf("calls %v: shards 0 and 2 once, the retry as shard 1/3", calls)
	}
	agg = schedule.AggregateFire(fire, 3, schedule.LatestShards(b.runs(t, "job"), fire, 3))
	if agg.Status != schedule.RunSucceeded || agg.Attempt != 2 {
		t.Errorf("aggregate %s attempt %d (%s), want succeeded at attempt 2", agg.Status, agg.Attempt, agg.Reason)
	}
}

// TestShardOverlap: a slow shard 1 holds only its own job lease. The next
// fire's shards 0 and 2 run; its shard 1 is skipped (overlap skip).
func TestShardOverlap(t *testing.T) {
	st := newShardTarget(t)
	st.block["1/3"] = true
	b := st.setup(t)
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Shards: 3, Target: st.target()})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := b.eng.Tick(context.Background(), time.Time{}); err != nil {
			t.Errorf("first tick: %v", err)
		}
	}()
	seen := map[string]bool{}
	for len(seen) < 3 {
		select {
		case sh := <-st.started:
			seen[sh] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("shards started: %v", seen)
		}
	}
	b.clock.Set(t0.Add(2*time.Minute + time.Second))
	b.tick(t)
	close(st.release)
	<-done
	f1, f2 := "job@20260302T090100Z", "job@20260302T090200Z"
	got := idsOf(b.runs(t, "job"))
	want := []string{f1 + "#0 succeeded", f1 + "#1 succeeded", f1 + "#2 succeeded", f2 + "#0 succeeded", f2 + "#1 skipped", f2 + "#2 succeeded"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	agg := schedule.AggregateFire(f2, 3, schedule.LatestShards(b.runs(t, "job"), f2, 3))
	if agg.Status != schedule.RunSkipped {
		t.Errorf("aggregate of the second fire %s (%s), want skipped (a shard skipped, none failed)", agg.Status, agg.Reason)
	}
}

// TestShardInsertFaults: the shard runs' inserts fail (refused, or landed
// with the answer lost); the next tick decides the fire again, and it is
// still three runs, each called once.
func TestShardInsertFaults(t *testing.T) {
	for name, fail := range map[string]func(t *testing.T, b *bundle){
		"refused": func(t *testing.T, b *bundle) {
			emutest.FailCommand(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 2}}, "insert")
		},
		"landed, answer lost": func(t *testing.T, b *bundle) {
			emutest.FailCommandAfterWrite(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 2}}, "insert")
		},
		"connection dropped": func(t *testing.T, b *bundle) {
			emutest.FailCommandDrop(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "insert")
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := newShardTarget(t)
			b := st.setup(t)
			b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Shards: 3, Target: st.target()})
			b.clock.Set(t0.Add(time.Minute + time.Second))
			fail(t, b)
			b.tick(t)
			emutest.FailCommandOff(t, b.store)
			b.clock.Add(2 * time.Second)
			b.tick(t)
			b.clock.Add(2 * time.Minute) // past every reservation: the sweep runs what is left
			b.tick(t)
			fire := "job@20260302T090100Z"
			var got []string
			for _, r := range b.runs(t, "job") {
				if schedule.FireID(r.ID) == fire {
					got = append(got, r.ID+" "+string(r.Status))
				}
			}
			sort.Strings(got)
			want := []string{fire + "#0 succeeded", fire + "#1 succeeded", fire + "#2 succeeded"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("runs of the fire %v, want %v", got, want)
			}
			for _, id := range want {
				id = id[:len(id)-len(" succeeded")]
				if n := len(st.snapshot()[id]); n != 1 {
					t.Errorf("run %s called %d times, want once", id, n)
				}
			}
		})
	}
}

// TestShardLeaseEpochFloor: a shard's job lease (job-<id>-<i>) has an epoch
// floor at least as high as the fences its runs carry, so a lease store
// that forgot it does not hand out an epoch the runs would refuse.
func TestShardLeaseEpochFloor(t *testing.T) {
	st := newShardTarget(t)
	b := st.setup(t)
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Shards: 2, Target: st.target()})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	b.tick(t)
	var top int64
	for _, r := range b.runs(t, "job") {
		top = max(top, r.Epoch)
	}
	if top == 0 {
		t.Fatal("no run carries a job lease epoch")
	}
	floor, err := scheduler.EpochFloor(b.store)(context.Background(), scheduler.ShardJobLease("job", 1))
	if err != nil || floor < top {
		t.Fatalf("floor of %s: %d, %v; want at least %d", scheduler.ShardJobLease("job", 1), floor, err, top)
	}
}

// TestShardBackfillAndRemainingRuns: a backfill of a sharded schedule
// creates one run per shard of each fire, and a repeat creates none;
// remainingRuns counts fires, not shards.
func TestShardBackfillAndRemainingRuns(t *testing.T) {
	st := newShardTarget(t)
	b := st.setup(t)
	one := int64(1)
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Shards: 3, RemainingRuns: &one, Target: st.target()})
	b.clock.Set(t0.Add(3*time.Minute + time.Second))
	b.tick(t)
	if s := b.getSchedule(t, "job"); s.Enabled || s.RemainingRuns == nil || *s.RemainingRuns != 0 {
		t.Fatalf("after one fire of 3 shards: enabled %v remainingRuns %v; want disabled at 0", s.Enabled, s.RemainingRuns)
	}
	if n := len(b.runs(t, "job")); n != 3 {
		t.Fatalf("%d runs after the one fire remainingRuns allowed; want 3", n)
	}
	req := schedule.BackfillRequest{Start: t0.Add(-2 * time.Minute), End: t0}
	res, err := b.eng.Backfill(context.Background(), "job", req, req.Start)
	if err != nil || res.Created != 2 || res.Existing != 0 || len(res.Fires) != 2 || res.Fires[0].Run != "job@20260302T085800Z" {
		t.Fatalf("backfill: %+v, %v; want 2 fires created, run ids the fire ids", res, err)
	}
	b.eng.Wait()
	res, err = b.eng.Backfill(context.Background(), "job", req, req.Start)
	if err != nil || res.Created != 0 || res.Existing != 2 || res.Fires[0].Status != schedule.RunSucceeded {
		t.Fatalf("repeat: %+v, %v; want 0 created, 2 existing and succeeded", res, err)
	}
	b.eng.Wait()
	var backfilled int
	for _, r := range b.runs(t, "job") {
		if r.Source == schedule.SourceBackfill {
			backfilled++
			if r.Status != schedule.RunSucceeded || len(st.snapshot()[r.ID]) != 1 {
				t.Errorf("backfilled run %s: %s, called %d times; want succeeded, once", r.ID, r.Status, len(st.snapshot()[r.ID]))
			}
		}
	}
	if backfilled != 6 {
		t.Errorf("%d backfilled runs; want 2 fires × 3 shards", backfilled)
	}
}

package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// probe is a builtin shared by the schedules of a concurrency group test:
// it counts the executions running at once (and the most ever), reports
// each start (the run's name arg) on started, and holds each execution
// until one token is sent on release.
type probe struct {
	mu      sync.Mutex
	active  int
	most    int
	calls   map[string]int
	started chan string
	release chan struct{}
}

var (
	probesMu sync.Mutex
	probes   = map[string]*probe{}
)

func init() {
	scheduler.RegisterBuiltin("test-probe", func(ctx context.Context, args map[string]string) (string, error) {
		probesMu.Lock()
		p := probes[args["key"]]
		probesMu.Unlock()
		if p == nil {
			return "", fmt.Errorf("no probe %q", args["key"])
		}
		p.mu.Lock()
		p.active++
		p.most = max(p.most, p.active)
		p.calls[args["name"]]++
		p.mu.Unlock()
		defer func() { p.mu.Lock(); p.active--; p.mu.Unlock() }()
		p.started <- args["name"]
		select {
		case <-p.release:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
}

func newProbe(t *testing.T) (string, *probe) {
	p := &probe{calls: map[string]int{}, started: make(chan string, 100), release: make(chan struct{}, 100)}
	key := fmt.Sprintf("%s-%p", t.Name(), p)
	probesMu.Lock()
	probes[key] = p
	probesMu.Unlock()
	t.Cleanup(func() {
		for range 20 {
			p.release <- struct{}{}
		}
		probesMu.Lock()
		delete(probes, key)
		probesMu.Unlock()
	})
	return key, p
}

func (p *probe) waitStarted(t *testing.T) string {
	t.Helper()
	select {
	case n := <-p.started:
		return n
	case <-time.After(15 * time.Second):
		t.Fatal("probe: no execution started within 15s")
		return ""
	}
}

// noStart checks that nothing more started (the engine's calls have all
// returned: the caller waited for the run to be recorded waiting).
func (p *probe) noStart(t *testing.T) {
	t.Helper()
	select {
	case n := <-p.started:
		t.Fatalf("probe: %s started although its group is full", n)
	default:
	}
}

func (p *probe) stats() (most int, calls map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := map[string]int{}
	for k, v := range p.calls {
		c[k] = v
	}
	return p.most, c
}

func probeTarget(key, name string) schedule.Target {
	return schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "test-probe", Args: map[string]string{"key": key, "name": name}}}
}

// groupSchedule is a daily 09:01 schedule in group etl: each test decides
// one fire per schedule, and later ticks only sweep.
func groupSchedule(id, key string, limit int, overlap schedule.Overlap) schedule.Schedule {
	return schedule.Schedule{ID: id, Cron: "1 9 * * *", Overlap: overlap, Target: probeTarget(key, id),
		Concurrency: &schedule.Concurrency{Group: "etl", Limit: limit}}
}

// tickAsync ticks at the bundle's clock in the background.
func tickAsync(t *testing.T, b *bundle) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := b.eng.Tick(context.Background(), time.Time{}); err != nil {
			t.Errorf("tick: %v", err)
		}
	}()
	return done
}

// waitRun polls (real time, bounded) until run id satisfies ok.
func (b *bundle) waitRun(t *testing.T, id string, what string, ok func(schedule.Run) bool) schedule.Run {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var r schedule.Run
		err := b.store.Collection(schedule.RunsCollection).Get(context.Background(), id, &r)
		if err == nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: not %s within 15s (last: %+v, %v)", id, what, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitingForGroup(r schedule.Run) bool {
	return r.Status == schedule.RunPending && r.WaitingFor == scheduler.GroupWaitReason("etl")
}

func runAt(id string) string {
	return schedule.RunID(id, t0.Add(time.Minute), schedule.SourceScheduled, 1)
}

// TestGroupLimitAcrossSchedules: three schedules in a group of limit 2
// never run more than two at once; the third waits (recorded on its run)
// and runs once a slot frees, from the sweep.
func TestGroupLimitAcrossSchedules(t *testing.T) {
	b := setup(t)
	key, p := newProbe(t)
	ids := []string{"ga", "gb", "gc"}
	for _, id := range ids {
		b.addSchedule(t, groupSchedule(id, key, 2, schedule.OverlapBufferOne))
	}
	b.clock.Set(t0.Add(time.Minute + time.Second))
	tick1 := tickAsync(t, b)
	first := map[string]bool{p.waitStarted(t): true, p.waitStarted(t): true}
	var waiting string
	for _, id := range ids {
		if !first[id] {
			waiting = id
		}
	}
	r := b.waitRun(t, runAt(waiting), "waiting for group etl", waitingForGroup)
	if r.Group != "etl" {
		t.Fatalf("waiting run's group = %q; want etl", r.Group)
	}
	p.noStart(t)

	// One finishes: its slot frees, and the sweep's recovery of the
	// waiting run (due GroupRecheck after its wait) takes it.
	p.release <- struct{}{}
	b.clock.Add(scheduler.GroupRecheck + time.Second)
	tick2 := tickAsync(t, b)
	if got := p.waitStarted(t); got != waiting {
		t.Fatalf("started %s; want the waiting %s", got, waiting)
	}
	p.release <- struct{}{}
	p.release <- struct{}{}
	<-tick1
	<-tick2
	most, calls := p.stats()
	if most > 2 {
		t.Fatalf("%d runs of group etl (limit 2) ran at once", most)
	}
	for _, id := range ids {
		if calls[id] != 1 {
			t.Errorf("%s ran %d times; want 1", id, calls[id])
		}
		got := b.waitRun(t, runAt(id), "succeeded", func(r schedule.Run) bool { return r.Status == schedule.RunSucceeded })
		if got.WaitingFor != "" || got.Group != "" {
			t.Errorf("%s: finished run still says waitingFor %q group %q", id, got.WaitingFor, got.Group)
		}
	}
}

// TestGroupWaitingOrder: a group's waiting runs run oldest fire time
// first, and a new fire that finds a slot free still waits behind an older
// waiting run rather than pass it.
func TestGroupWaitingOrder(t *testing.T) {
	b := setup(t)
	key, p := newProbe(t)
	for _, id := range []string{"oa", "ob"} {
		s := groupSchedule(id, key, 1, schedule.OverlapAllow)
		s.Cron = "* * * * *"
		s.Target = probeTarget(key, id)
		b.addSchedule(t, s)
	}
	// 09:01: one of the two runs, the other waits.
	b.clock.Set(t0.Add(time.Minute + time.Second))
	tick1 := tickAsync(t, b)
	ran := p.waitStarted(t)
	other := map[string]string{"oa": "ob", "ob": "oa"}[ran]
	w := runAt(other)
	b.waitRun(t, w, "waiting", waitingForGroup)
	p.release <- struct{}{}
	<-tick1
	// The slot is free now. Keep the waiting run's redelivery away (as if
	// its task's retry were still backing off), and let 09:02 fire.
	far := t0.Add(time.Hour)
	if err := b.store.Collection(schedule.RunsCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: w}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "sweepAt", Value: far}}}}); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(2*time.Minute + time.Second))
	tick2 := tickAsync(t, b) // both 09:02 runs wait behind the 09:01 one
	for _, id := range []string{"oa", "ob"} {
		b.waitRun(t, schedule.RunID(id, t0.Add(2*time.Minute), schedule.SourceScheduled, 1), "waiting behind "+w, waitingForGroup)
	}
	p.noStart(t)
	<-tick2
	// Now the sweep may take them all: the line runs in order, one at a
	// time: 09:01 (other), then the 09:02 runs by id.
	b.clock.Set(far.Add(time.Second))
	var order []string
	for range 3 {
		done := tickAsync(t, b)
		order = append(order, p.waitStarted(t))
		p.release <- struct{}{}
		<-done
		b.clock.Add(scheduler.GroupRecheck + time.Second)
	}
	want := []string{other, "oa", "ob"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("group etl ran %v; want %v (oldest fire time first)", order, want)
	}
	if most, _ := p.stats(); most > 1 {
		t.Fatalf("%d runs of a limit-1 group ran at once", most)
	}
}

// freeAgain reports whether a lease that exists is free (released, or
// expired); a lease never taken is not.
func freeAgain(info *lease.Info, err error) bool {
	if errors.Is(err, lease.ErrNotFound) {
		return info != nil
	}
	return err == nil && !info.Live(time.Now())
}

// TestGroupSlotOfDeadHolderFrees: a slot whose holder died (its lease
// stops being renewed) frees by expiry, and the waiting run proceeds: the
// group does not stall.
func TestGroupSlotOfDeadHolderFrees(t *testing.T) {
	client, bucketName := emutest.GCS(t)
	bucket := client.Bucket(bucketName)
	leases := lease.NewManager(bucket, "leases/", lease.Options{Holder: "test-" + t.Name()})
	b := setup(t, func(c *scheduler.Config) { c.Leases = leases })
	key, p := newProbe(t)
	b.addSchedule(t, groupSchedule("da", key, 1, schedule.OverlapBufferOne))
	// The dead process: it took slot 0 and stopped, without a release.
	const ttl = 3 * time.Second
	now := time.Now().UTC()
	rec := map[string]any{"holder": "dead-host", "epoch": 1, "ttlSeconds": ttl.Seconds(), "acquiredAt": now, "renewedAt": now, "token": "dead"}
	body, _ := json.Marshal(rec)
	w := bucket.Object("leases/" + scheduler.GroupSlotLease("etl", 0) + ".json").If(storage.Conditions{DoesNotExist: true}).NewWriter(context.Background())
	w.ContentType = "application/json"
	w.Metadata = map[string]string{
		"baton-holder": "dead-host", "baton-epoch": "1", "baton-ttl-seconds": strconv.FormatFloat(ttl.Seconds(), 'f', -1, 64),
		"baton-acquired-at": now.Format(time.RFC3339Nano), "baton-renewed-at": now.Format(time.RFC3339Nano), "baton-token": "dead",
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(time.Minute + time.Second))
	b.tick(t)
	id := runAt("da")
	b.waitRun(t, id, "waiting for the dead holder's slot", waitingForGroup)
	p.noStart(t)
	// Wait (real time: expiry is judged on the emulator's clock) until the
	// dead holder's slot has expired; nobody released it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := leases.Status(context.Background(), scheduler.GroupSlotLease("etl", 0))
		if freeAgain(info, err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead holder's slot still live after 30s: %+v %v", info, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.clock.Add(scheduler.GroupRecheck + time.Second)
	done := tickAsync(t, b)
	if got := p.waitStarted(t); got != "da" {
		t.Fatalf("started %s; want da", got)
	}
	p.release <- struct{}{}
	<-done
	b.waitRun(t, id, "succeeded", func(r schedule.Run) bool { return r.Status == schedule.RunSucceeded })
}

// TestGroupWaitWriteFaults: the write that records a run's wait fails
// (refused, dropped connection, or landed with its answer lost). The run
// is never claimed while the group is full, never dropped, and runs once
// when the slot frees.
func TestGroupWaitWriteFaults(t *testing.T) {
	faults := map[string]func(t *testing.T, b *bundle){
		"refused": func(t *testing.T, b *bundle) {
			emutest.FailCommand(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		},
		"dropped connection": func(t *testing.T, b *bundle) {
			emutest.FailCommandDrop(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		},
		"landed, answer lost": func(t *testing.T, b *bundle) {
			emutest.FailCommandAfterWrite(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		},
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			b := setup(t)
			key, p := newProbe(t)
			b.addSchedule(t, groupSchedule("fa", key, 1, schedule.OverlapBufferOne))
			b.addSchedule(t, groupSchedule("fb", key, 1, schedule.OverlapBufferOne))
			var once sync.Once
			scheduler.SetBeforeGroupWait(b.eng, func(string) { once.Do(func() { fault(t, b) }) })
			b.clock.Set(t0.Add(time.Minute + time.Second))
			tick1 := tickAsync(t, b)
			ran := p.waitStarted(t)
			other := map[string]string{"fa": "fb", "fb": "fa"}[ran]
			// The waiting run's executor has returned once its job lease
			// is free again (it releases after the wait, recorded or not).
			deadline := time.Now().Add(30 * time.Second)
			for {
				info, err := b.leases.Status(context.Background(), scheduler.JobLease(other))
				if freeAgain(info, err) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("job lease of %s still held after 30s", other)
				}
				time.Sleep(20 * time.Millisecond)
			}
			emutest.FailCommandOff(t, b.store)
			r := b.waitRun(t, runAt(other), "pending", func(r schedule.Run) bool { return r.Status == schedule.RunPending })
			if name == "landed, answer lost" && r.WaitingFor != scheduler.GroupWaitReason("etl") {
				t.Errorf("landed wait not recorded: waitingFor %q", r.WaitingFor)
			}
			p.noStart(t)
			p.release <- struct{}{}
			<-tick1
			// Past the deciding tick's reservation too: an unrecorded wait
			// leaves the run due for the sweep then.
			b.clock.Add(2 * time.Minute)
			done := tickAsync(t, b)
			if got := p.waitStarted(t); got != other {
				t.Fatalf("started %s; want %s", got, other)
			}
			p.release <- struct{}{}
			<-done
			b.waitRun(t, runAt(other), "succeeded", func(r schedule.Run) bool { return r.Status == schedule.RunSucceeded })
			if _, calls := p.stats(); calls["fa"] != 1 || calls["fb"] != 1 {
				t.Fatalf("calls = %v; want each schedule once", calls)
			}
		})
	}
}

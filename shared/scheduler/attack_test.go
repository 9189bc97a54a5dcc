package scheduler_test

// Attacks on the hand-off (Tick decides, Run executes). Real emulators for
// the database and the lease store; the Cloud Tasks side is a recording
// Dispatcher (the queue is not what is under test here), and slowness is
// injected in the storage client's transport, on the real GCS emulator.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// recDispatcher records the tasks it is given. block, when set, runs inside
// Dispatch (a slow CreateTask: the gax retries of an UNAVAILABLE answer
// within taskqueue's 15 s budget).
type recDispatcher struct {
	mu    sync.Mutex
	tasks []scheduler.Task
	block func(t scheduler.Task)
}

func (d *recDispatcher) Dispatch(_ context.Context, t scheduler.Task) error {
	d.mu.Lock()
	block := d.block
	d.mu.Unlock()
	if block != nil {
		block(t)
	}
	d.mu.Lock()
	d.tasks = append(d.tasks, t)
	d.mu.Unlock()
	return nil
}

func (d *recDispatcher) all() []scheduler.Task {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]scheduler.Task(nil), d.tasks...)
}

// attackCalls counts calls of the "attack-flaky" builtin per key, and fails
// the calls whose number is listed in attackFail[key].
var (
	attackMu    sync.Mutex
	attackCalls = map[string]*atomic.Int64{}
	attackFail  = map[string]map[int64]bool{}
)

func init() {
	scheduler.RegisterBuiltin("attack-flaky", func(ctx context.Context, args map[string]string) (string, error) {
		attackMu.Lock()
		c := attackCalls[args["key"]]
		if c == nil {
			c = new(atomic.Int64)
			attackCalls[args["key"]] = c
		}
		fail := attackFail[args["key"]]
		attackMu.Unlock()
		n := c.Add(1)
		if fail[n] {
			return "", fmt.Errorf("call %d fails", n)
		}
		return fmt.Sprintf("call %d", n), nil
	})
}

func flakyTarget(t *testing.T, failCalls ...int64) (schedule.Target, *atomic.Int64) {
	key := t.Name()
	c := new(atomic.Int64)
	f := map[int64]bool{}
	for _, n := range failCalls {
		f[n] = true
	}
	attackMu.Lock()
	attackCalls[key], attackFail[key] = c, f
	attackMu.Unlock()
	return schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "attack-flaky", Args: map[string]string{"key": key}}}, c
}

// slowAnswers delays the answer of the next lease upload once armed: the
// write has landed on the (real) GCS emulator, and the holder hears of it
// late, as with a slow network, a GC pause, or the storage library retrying
// an attempt whose answer was lost.
type slowAnswers struct {
	base   http.RoundTripper
	armed  atomic.Bool
	delay  time.Duration
	landed chan struct{}
}

func (s *slowAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/upload/") && s.armed.CompareAndSwap(true, false) {
		close(s.landed)
		time.Sleep(s.delay)
	}
	return resp, err
}

// attackRig is a bundle plus what other engines need to share its bucket.
type attackRig struct {
	*bundle
	bucket string
	d      *recDispatcher
}

// attackSetup is setup (helpers_test.go) with a recording Dispatcher, and
// keeps the bucket name so that other Run instances can share it.
func attackSetup(t *testing.T, d *recDispatcher) *attackRig {
	t.Helper()
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "test-" + t.Name()})
	c := newClock(t0)
	e, err := scheduler.New(scheduler.Config{Store: s, Leases: m, Clock: c, TickLeaseTTL: 10 * time.Second, Tasks: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	return &attackRig{bundle: &bundle{store: s, leases: m, clock: c, eng: e}, bucket: bucket, d: d}
}

// bucketHandle is the rig's bucket through a client of its own, through rt
// when given.
func (r *attackRig) bucketHandle(t *testing.T, rt http.RoundTripper) *storage.BucketHandle {
	t.Helper()
	opts := emutest.GCSServer(t).ClientOptions()
	if rt != nil {
		opts = append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))
	}
	client, err := storage.NewClient(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client.Bucket(r.bucket)
}

// secondEngine is another Run instance on the same database and bucket,
// with its own holder id, lease manager and storage client (through rt).
func (r *attackRig) secondEngine(t *testing.T, holder string, rt http.RoundTripper) *scheduler.Engine {
	t.Helper()
	m := lease.NewManager(r.bucketHandle(t, rt), "leases/", lease.Options{Holder: holder})
	e, err := scheduler.New(scheduler.Config{Store: r.store, Leases: m, Clock: r.clock, TickLeaseTTL: 10 * time.Second, Tasks: r.d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	return e
}

func (b *bundle) run(t *testing.T, id string) schedule.Run {
	t.Helper()
	var r schedule.Run
	if err := b.store.Collection(schedule.RunsCollection).Get(context.Background(), id, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAttackSlowHolderDuplicateDeliverySkipsItsOwnRun: two deliveries of
// the same task (a Cloud Tasks duplicate, or the sweep's salted copy of a
// task that sat in the queue past the reservation). Delivery A acquires the
// job lease, but hears of its write 2 s late. Delivery B meets A's lease,
// finds no run running under it (holderIdle), waits its 750 ms, and then
// applies the overlap policy to the very run A is about to execute: the run
// is recorded "overlap skip: the previous run is still running", A's claim
// then finds it skipped, and the fire time never reaches its target.
// Nothing overlapped: there was no previous run at all.
func TestAttackSlowHolderDuplicateDeliverySkipsItsOwnRun(t *testing.T) {
	d := &recDispatcher{}
	b := attackSetup(t, d)
	target, calls := flakyTarget(t)
	b.addSchedule(t, schedule.Schedule{ID: "dup", Cron: "@hourly", Overlap: schedule.OverlapSkip, Target: target})
	b.clock.Set(t0.Add(time.Hour + 3*time.Second))
	if sum := b.tick(t); sum.Enqueued != 1 {
		t.Fatalf("tick enqueued %d runs, want 1", sum.Enqueued)
	}
	task := d.all()[0]

	slow := &slowAnswers{base: http.DefaultTransport, delay: 2 * time.Second, landed: make(chan struct{})}
	a := b.secondEngine(t, "run-instance-a", slow)
	slow.armed.Store(true)

	var wg sync.WaitGroup
	var errA error
	wg.Add(1)
	go func() { defer wg.Done(); _, errA = a.Execute(context.Background(), task, nil) }()
	select {
	case <-slow.landed:
	case <-time.After(10 * time.Second):
		t.Fatal("A never wrote the job lease")
	}
	outB, errB := b.eng.Execute(context.Background(), task, nil) // the duplicate delivery
	wg.Wait()

	r := b.run(t, task.Runs[0])
	t.Logf("A: err=%v; B: err=%v outcome=%+v; run %s %s (%s); target calls %d", errA, errB, outB, r.ID, r.Status, r.Reason, calls.Load())
	if calls.Load() != 1 || r.Status != schedule.RunSucceeded {
		t.Errorf("fire time executed %d times, run %s (%q); want executed once and succeeded: two deliveries of one task, no previous run, yet the overlap policy skipped it",
			calls.Load(), r.Status, r.Reason)
	}
	if errA == nil && errB == nil && r.Status != schedule.RunSucceeded && r.Status != schedule.RunRunning {
		t.Errorf("both deliveries answered 200 with the run %s: the queue will not deliver it again and the sweep does not look at finished runs", r.Status)
	}
}

// killable is a transport that stops working, as the network of a killed
// process does.
type killable struct {
	base http.RoundTripper
	dead atomic.Bool
}

func (k *killable) RoundTrip(req *http.Request) (*http.Response, error) {
	if k.dead.Load() {
		return nil, errors.New("killed")
	}
	return k.base.RoundTrip(req)
}

// TestAttackDeadHolderBeforeClaimSkipsRun: the Run instance that took the
// job lease for the run dies (OOM, scale-in, Cloud Run's timeout) before it
// claims. Cloud Tasks delivers the task again at once (the request got no
// answer). The redelivery meets the dead holder's still-live lease, sees
// no run under it, waits 750 ms and skips the run. When the lease expires,
// nothing is pending any more: the fire time is lost. It should have stayed
// pending (503) until the lease ended.
func TestAttackDeadHolderBeforeClaimSkipsRun(t *testing.T) {
	for _, overlap := range []schedule.Overlap{schedule.OverlapSkip, schedule.OverlapBufferOne} {
		t.Run(string(overlap), func(t *testing.T) {
			d := &recDispatcher{}
			b := attackSetup(t, d)
			target, calls := flakyTarget(t)
			b.addSchedule(t, schedule.Schedule{ID: "dead", Cron: "@daily", Overlap: overlap, LeaseTTL: schedule.Duration(3 * time.Second), Target: target})
			b.clock.Set(t0.Add(15*time.Hour + 3*time.Second)) // @daily fires at midnight: move to the next one
			next := b.getSchedule(t, "dead").NextRunAt
			b.clock.Set(next.Add(3 * time.Second))
			if sum := b.tick(t); sum.Enqueued != 1 {
				t.Fatalf("tick enqueued %d runs, want 1", sum.Enqueued)
			}
			task := d.all()[0]

			// The first delivery: acquired, then killed before its claim.
			killed := &killable{base: http.DefaultTransport}
			other := lease.NewManager(b.bucketHandle(t, killed), "leases/", lease.Options{Holder: "killed-instance"})
			if _, err := other.Acquire(context.Background(), scheduler.JobLease("dead"), 3*time.Second); err != nil {
				t.Fatal(err)
			}
			killed.dead.Store(true) // SIGKILL: no heartbeat, no release
			// The queue's redelivery.
			out, err := b.eng.Execute(context.Background(), task, nil)
			t.Logf("redelivery: err=%v outcome=%+v", err, out)
			// The lease expires (ttl 3 s + skew 2 s); the queue delivers
			// again if it was told to (503), and ticks sweep meanwhile.
			time.Sleep(6 * time.Second)
			if err != nil {
				out, err = b.eng.Execute(context.Background(), task, nil)
				t.Logf("delivery after the lease expired: err=%v outcome=%+v", err, out)
			}
			for i := 0; i < 3; i++ {
				b.clock.Add(time.Minute)
				b.tick(t)
				for _, tk := range d.all()[1:] {
					_, _ = b.eng.Execute(context.Background(), tk, nil)
				}
			}
			runs := b.runs(t, "dead")
			t.Logf("runs: %v; misfire flag %v; target calls %d", fireTimesOf(runs), b.getSchedule(t, "dead").Misfire, calls.Load())
			if calls.Load() != 1 {
				t.Errorf("the fire time reached its target %d times, want 1: the only holder was dead, nothing overlapped, yet the run was given the %s policy", calls.Load(), overlap)
			}
		})
	}
}

// TestAttackSweepCopyDuringRetryHandOffSkipsCatchup: a catch-up batch
// [r1, r2, r3] is one task. r1 fails and its retry is handed off, while A
// still holds the job lease; CreateTask is slow (the gax retries of an
// UNAVAILABLE answer, up to 15 s). The batch has been going for over a
// minute, so the sweep (no running sibling now: r1 is failed) recovers r2
// and r3 under a salted task; that delivery meets A's lease with nothing
// running under it, waits 750 ms per run, and skips both. A then finds them
// skipped. Two catch-up fire times are lost to an overlap that was A
// handing off a retry.
func TestAttackSweepCopyDuringRetryHandOffSkipsCatchup(t *testing.T) {
	d := &recDispatcher{}
	b := attackSetup(t, d)
	target, calls := flakyTarget(t, 1) // r1 fails once
	b.addSchedule(t, schedule.Schedule{ID: "batch", Cron: "*/10 * * * *", Overlap: schedule.OverlapSkip, Catchup: schedule.CatchupAll,
		Retry: schedule.Retry{MaxAttempts: 2, Backoff: schedule.Duration(time.Second)}, Target: target})
	b.clock.Set(t0.Add(25*time.Minute + 30*time.Second)) // 09:10 and 09:20 missed, ...
	b.clock.Set(t0.Add(30*time.Minute + 3*time.Second))  // ... and 09:30 on time
	sum := b.tick(t)
	tasks := d.all()
	if len(tasks) != 1 || len(tasks[0].Runs) != 3 {
		t.Fatalf("tick: %+v, tasks %+v; want one task of 3 runs", sum, tasks)
	}
	batch := tasks[0]

	inRetry := make(chan struct{})
	resume := make(chan struct{})
	d.mu.Lock()
	d.block = func(tk scheduler.Task) {
		if !tk.At.IsZero() { // the retry's hand-off
			close(inRetry)
			<-resume
		}
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	var errA error
	go func() { defer wg.Done(); _, errA = b.eng.Execute(context.Background(), batch, nil) }()
	select {
	case <-inRetry:
	case <-time.After(20 * time.Second):
		t.Fatal("r1's retry was never handed off")
	}
	d.mu.Lock()
	d.block = nil
	d.mu.Unlock()
	// Over a minute into the batch: a tick's sweep.
	b.clock.Add(70 * time.Second)
	sw := b.tick(t)
	var salted *scheduler.Task
	for _, tk := range d.all() {
		if tk.Name != batch.Name && tk.At.IsZero() {
			tk := tk
			salted = &tk
		}
	}
	if salted == nil {
		close(resume)
		wg.Wait()
		t.Skipf("the sweep recovered nothing (%+v): no copy to deliver", sw)
	}
	// Another Run instance gets the salted copy.
	bEng := b.secondEngine(t, "run-instance-b", nil)
	outB, errB := bEng.Execute(context.Background(), *salted, nil)
	close(resume)
	wg.Wait()
	t.Logf("sweep %+v; salted task %v; B: err=%v outcome=%+v; A: err=%v", sw, salted.Runs, errB, outB, errA)
	runs := b.runs(t, "batch")
	t.Logf("runs: %v", fireTimesOf(runs))
	for _, r := range runs {
		if r.Status == schedule.RunSkipped {
			t.Errorf("run %s (%s) skipped: %q; nothing overlapped it: its own batch's holder was handing off a retry", r.ID, r.Source, r.Reason)
		}
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("target calls %d before the retry is due, want 3 (r1, r2, r3)", got)
	}
}

// TestAttackLostClaimAnswerStrandsRun: the claim (pending → running) lands
// but its answer is lost (a write concern error after the write). The
// claim is not read back, so the target is never called; Execute reads the
// run back as running and answers 200, so the queue never delivers it
// again. The run sits running with nobody executing it until the failover
// sweep marks it failed ("heartbeat stopped"): with the default retry
// policy (one attempt) the fire time never reaches its target.
func TestAttackLostClaimAnswerStrandsRun(t *testing.T) {
	d := &recDispatcher{}
	b := attackSetup(t, d)
	target, calls := flakyTarget(t)
	b.addSchedule(t, schedule.Schedule{ID: "lost", Cron: "@hourly", LeaseTTL: schedule.Duration(3 * time.Second), Target: target})
	b.clock.Set(t0.Add(time.Hour + 3*time.Second))
	b.tick(t)
	task := d.all()[0]
	emutest.FailCommandAfterWrite(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
	out, err := b.eng.Execute(context.Background(), task, nil)
	emutest.FailCommandOff(t, b.store)
	r := b.run(t, task.Runs[0])
	t.Logf("Execute: err=%v outcome=%+v; run %s; target calls %d", err, out, r.Status, calls.Load())
	if err == nil && calls.Load() == 0 {
		t.Errorf("Execute answered 200 (run %s) without calling the target: the claim landed, its answer was lost, and it was never read back", r.Status)
	}
	// The sweep, once the heartbeat is due.
	time.Sleep(6 * time.Second)
	b.clock.Add(10 * time.Second)
	b.tick(t)
	r = b.run(t, task.Runs[0])
	t.Logf("after the sweep: run %s %q; target calls %d", r.Status, r.Error, calls.Load())
	if calls.Load() != 1 {
		t.Errorf("fire time reached its target %d times, want 1 (run now %s: %q)", calls.Load(), r.Status, r.Error)
	}
}

// stepper is a builtin whose calls the test releases one by one: call n
// blocks until hold[n] is closed (when there is one), and reports its start.
type stepper struct {
	fail    map[int64]bool
	calls   atomic.Int64
	hold    map[int64]chan struct{}
	started chan int64
}

var steppers sync.Map // key → *stepper

func init() {
	scheduler.RegisterBuiltin("attack-step", func(ctx context.Context, args map[string]string) (string, error) {
		v, _ := steppers.Load(args["key"])
		s := v.(*stepper)
		n := s.calls.Add(1)
		s.started <- n
		if ch := s.hold[n]; ch != nil {
			select {
			case <-ch:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		if s.fail[n] {
			return "", fmt.Errorf("call %d fails", n)
		}
		return fmt.Sprintf("call %d", n), nil
	})
}

func newStepper(t *testing.T, held ...int64) (schedule.Target, *stepper) {
	s := &stepper{hold: map[int64]chan struct{}{}, started: make(chan int64, 100)}
	for _, n := range held {
		s.hold[n] = make(chan struct{})
	}
	key := t.Name()
	steppers.Store(key, s)
	t.Cleanup(func() {
		for _, ch := range s.hold {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
	return schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "attack-step", Args: map[string]string{"key": key}}}, s
}

func (s *stepper) wait(t *testing.T, n int64) {
	t.Helper()
	select {
	case got := <-s.started:
		if got != n {
			t.Fatalf("call %d started, want %d", got, n)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("call %d never started", n)
	}
}

// TestAttackMisfireHolderMakesSweepBufferCatchup: buffer_one (the default)
// and catch-up "all". The batch [09:03, 09:04, 09:05] is one task; while
// its first run executes, the 09:06 fire comes, is buffered (a genuine
// overlap), and the holder runs it as a misfire right after 09:03, before
// 09:04. While that misfire run holds the job lease, the batch's
// reservation ends and the sweep finds no running run of the batch
// (liveSiblingUntil looks for the batch's createdAt; the misfire run has
// its own), so it re-enqueues 09:04 and 09:05 under a salted task. That
// delivery meets a holder running "another" run (holderOf compares
// createdAt) and buffers both: the two catch-up fire times collapse into
// the misfire flag, whose run carries fireTime 09:06 ($max). 09:04 and
// 09:05 never execute.
func TestAttackMisfireHolderMakesSweepBufferCatchup(t *testing.T) {
	d := &recDispatcher{}
	b := attackSetup(t, d)
	target, st := newStepper(t, 1, 2) // 09:03 and then the misfire run are held
	b.addSchedule(t, schedule.Schedule{ID: "cu", Cron: "* * * * *", Overlap: schedule.OverlapBufferOne, Catchup: schedule.CatchupAll, MaxCatchup: 2, Target: target})
	// 09:01 is nextRunAt; the first tick after an outage, at 09:05:50.
	b.clock.Set(t0.Add(5*time.Minute + 50*time.Second))
	b.tick(t)
	batch := d.all()[0]
	if len(batch.Runs) != 3 {
		t.Fatalf("batch %v, want 3 runs", batch.Runs)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = b.eng.Execute(context.Background(), batch, nil) }()
	st.wait(t, 1) // 09:03 runs

	// 09:06:10: the next fire, a genuine overlap, buffered.
	other := b.secondEngine(t, "run-instance-b", nil)
	b.clock.Set(t0.Add(6*time.Minute + 10*time.Second))
	b.tick(t)
	tasks := d.all()
	if _, err := other.Execute(context.Background(), tasks[len(tasks)-1], nil); err != nil {
		t.Fatalf("09:06 delivery: %v", err)
	}
	close(st.hold[1]) // 09:03 ends; the holder runs the misfire (09:06) next
	st.wait(t, 2)

	// 09:06:55: the batch's reservation (decided at 09:05:50, 30 s) has
	// ended; nothing new is due. The sweep re-enqueues the batch's rest.
	b.clock.Set(t0.Add(6*time.Minute + 55*time.Second))
	n0 := len(d.all())
	sw := b.tick(t)
	var salted []scheduler.Task
	salted = append(salted, d.all()[n0:]...)
	t.Logf("sweep: recovered %d; tasks %+v", sw.Recovered, salted)
	for _, tk := range salted {
		out, err := other.Execute(context.Background(), tk, nil)
		t.Logf("salted delivery: err=%v outcome=%+v", err, out)
	}
	close(st.hold[2])
	wg.Wait()
	b.eng.Wait()
	runs := b.runs(t, "cu")
	t.Logf("runs: %v; executions %d", fireTimesOf(runs), st.calls.Load())
	executedAt := map[time.Time][]string{}
	for _, r := range runs {
		if r.Status == schedule.RunSucceeded {
			executedAt[r.FireTime] = append(executedAt[r.FireTime], r.ID)
		}
	}
	for ft, ids := range executedAt {
		if len(ids) > 1 {
			t.Errorf("fire time %s executed %d times (%v): an http target gets X-Baton-Fire-Time %s twice", ft.Format("15:04"), len(ids), ids, ft.Format(time.RFC3339))
		}
	}
	for _, r := range runs {
		if r.Source == schedule.SourceCatchup || (r.Source == schedule.SourceScheduled && r.FireTime.Equal(t0.Add(5*time.Minute))) {
			if r.Status != schedule.RunSucceeded {
				t.Errorf("batch run %s (%s) ended %s: %q; want it executed: it was queued in its own batch, not overlapping an earlier run", r.ID, r.Source, r.Status, r.Reason)
			}
		}
	}
}

// jobLeaseReadsFail fails every request for a job lease object, as a lease
// store that is down for those reads would; the tick lease still works.
type jobLeaseReadsFail struct{ base http.RoundTripper }

func (j jobLeaseReadsFail) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.String(), "job-") {
		return nil, errors.New("lease store unreachable (test transport)")
	}
	return j.base.RoundTrip(req)
}

// TestFailoverWaitsWhenTheLeaseCannotBeRead: jobAlive took any error from
// the lease store for "not live", so a sweep that could not read a running
// run's job lease failed the run over, and its retry called the target
// while the first executor might still be running it. Unknown now
// postpones the failover.
func TestFailoverWaitsWhenTheLeaseCannotBeRead(t *testing.T) {
	t.Parallel()
	b := attackSetup(t, &recDispatcher{})
	b.addSchedule(t, schedule.Schedule{ID: "j", Cron: "0 * * * *", Retry: schedule.Retry{MaxAttempts: 2, Backoff: schedule.Duration(time.Second)},
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	running := bson.D{{Key: "_id", Value: "j@running"}, {Key: "scheduleId", Value: "j"}, {Key: "fireTime", Value: t0},
		{Key: "source", Value: schedule.SourceScheduled}, {Key: "status", Value: schedule.RunRunning}, {Key: "attempt", Value: 1},
		{Key: "createdAt", Value: t0}, {Key: "heartbeatAt", Value: t0}, {Key: "sweepAt", Value: t0.Add(time.Second)}, {Key: "epoch", Value: int64(3)}}
	if _, err := b.store.Collection(schedule.RunsCollection).InsertIdempotent(context.Background(), running); err != nil {
		t.Fatal(err)
	}
	sweeper := b.secondEngine(t, "sweeper", jobLeaseReadsFail{http.DefaultTransport})
	b.clock.Set(t0.Add(5 * time.Minute))
	sum, err := sweeper.Tick(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 0 || sum.Retried != 0 {
		t.Errorf("sweep with the job lease unreadable: %+v, want no failover", sum)
	}
	if r := b.run(t, "j@running"); r.Status != schedule.RunRunning {
		t.Errorf("run %s, want it left running", r.Status)
	}
}

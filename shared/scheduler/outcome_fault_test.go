package scheduler_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestOutcomeWriteFaultRunsTheTargetOnce: the target answered, and then the
// database failed the write of its outcome once: a refusal, a dropped
// connection, or a write that landed but answered an error. Before, the
// write was not retried, the job lease was released, the sweep failed the
// run over, and its retry called the target a second time. Now the write is
// retried while the lease is held (or recognised as landed), the run is
// recorded succeeded, and the sweep leaves it alone.
func TestOutcomeWriteFaultRunsTheTargetOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(t *testing.T, st *mongostore.Store)
	}{
		{"refused", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommand(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
		{"dropped connection", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandDrop(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
		{"landed, answered an error", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandAfterWrite(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
		// Aborted on every one of the store's attempts: not applied
		// (store.ErrContended, a conflict), yet the lease still holds,
		// so the outcome is written again rather than given up.
		{"Aborted until the store's retries ran out", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandCode(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: mongostore.WriteAttempts}}, 112, "update")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			key, g := newGate(t, 1)
			b.addSchedule(t, schedule.Schedule{ID: "o", Cron: "* * * * *", Retry: schedule.Retry{MaxAttempts: 3, Backoff: schedule.Duration(time.Second)},
				Target: gateTarget(key)})
			done := startBlockedTick(t, b, g, 1)
			tc.arm(t, b.store) // the next runs update is the outcome
			g.open()
			<-done
			emutest.FailCommandOff(t, b.store)
			// Long after: the sweep sees nothing to fail over.
			b.clock.Set(t0.Add(10 * time.Minute))
			if sum := b.tick(t); sum.Failed != 0 || sum.Retried != 0 {
				t.Errorf("sweep after the outcome: %+v, want nothing failed over or retried", sum)
			}
			var first []string
			others := int64(0) // the later fires the 09:10 tick decided
			for _, r := range b.runs(t, "o") {
				if r.FireTime.Equal(t0.Add(time.Minute)) {
					first = append(first, r.ID+" "+string(r.Status))
				} else {
					others++
				}
			}
			if len(first) != 1 || first[0] != "o@20260302T090100Z succeeded" {
				t.Errorf("runs of the 09:01 fire %v, want it recorded succeeded once, with no retry", first)
			}
			if n := g.calls.Load(); n != 1+others {
				t.Errorf("target called %d times for the 09:01 fire and %d later ones, want the 09:01 fire once", n, others)
			}
		})
	}
}

// TestOwedRetryIsRecordedBySweep: a failed run's retry insert fails (a
// refusal, or a dropped connection). Before, the error was logged and
// dropped, and the retry never happened (maxAttempts 3, target tried once).
// The failed run now keeps an owed-retry mark, and the sweep records the
// retry once the executor's reservation is over.
func TestOwedRetryIsRecordedBySweep(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(t *testing.T, st *mongostore.Store)
	}{
		{"refused", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommand(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "insert")
		}},
		{"dropped connection", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandDrop(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "insert")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueueRig(t, true) // paused: Run is called by hand below
			b := setup(t, func(c *scheduler.Config) { c.Tasks = q.queue })
			b.addSchedule(t, schedule.Schedule{ID: "r", Cron: "0 * * * *", Retry: schedule.Retry{MaxAttempts: 3, Backoff: schedule.Duration(time.Second)},
				Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "fail"}}})
			b.clock.Set(t0.Add(time.Hour + time.Second))
			b.tick(t)
			tc.arm(t, b.store)
			out, err := b.eng.Execute(context.Background(), scheduler.Task{ScheduleID: "r", Runs: []string{"r@20260302T100000Z"}}, nil)
			if err != nil || out.Runs[0].Status != schedule.RunFailed {
				t.Fatalf("Execute: %+v %v, want the run failed", out, err)
			}
			emutest.FailCommandOff(t, b.store)
			if got := fireTimesOf(b.runs(t, "r")); len(got) != 1 {
				t.Fatalf("runs %v: the retry insert was to fail", got)
			}
			b.clock.Set(t0.Add(time.Hour + 2*time.Minute))
			if sum := b.tick(t); sum.Retried != 1 {
				t.Errorf("sweep: %+v, want the owed retry recorded", sum)
			}
			want := []string{"10:00 scheduled failed", "10:00 retry pending"}
			if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "r"))); diff != "" {
				t.Errorf("runs (-want,+got):\n%s", diff)
			}
			// Recorded once: the mark is cleared, the next sweep adds nothing.
			b.clock.Set(t0.Add(time.Hour + 3*time.Minute))
			if sum := b.tick(t); sum.Retried != 0 {
				t.Errorf("second sweep: %+v, want no second retry", sum)
			}
		})
	}
}

// TestClaimWhoseAnswerWasLost: the claim (pending → running, fenced) landed
// and its answer was lost. Before, the executor took the error for a
// failed claim and left; the run stayed running with nobody executing it,
// the sweep failed it over, and its target was never called. The claim is
// now read back by its token. A claim that did not land (the connection
// dropped before the write) leaves the run pending, and Execute asks for
// the task again.
func TestClaimWhoseAnswerWasLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arm     func(t *testing.T, st *mongostore.Store)
		retried bool // Execute asks for another delivery
	}{
		{"landed, answered an error", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandAfterWrite(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}, false},
		// Firestore's shape of the lost answer: DeadlineExceeded for a
		// claim that committed. The store does not retry it (the retry
		// would miss its own condition and say "conflict"), and the
		// executor reads the claim back.
		{"landed, answered DeadlineExceeded", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandCodeAfterRun(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, 262, "update")
		}, false},
		// Aborted: not applied; the store retries it and the claim lands.
		{"Aborted, retried", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandCode(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, 112, "update")
		}, false},
		{"dropped connection, not applied", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandDrop(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueueRig(t, true)
			b := setup(t, func(c *scheduler.Config) { c.Tasks = q.queue })
			key, g := newGate(t, 0)
			b.addSchedule(t, schedule.Schedule{ID: "c", Cron: "0 * * * *", Target: gateTarget(key)})
			b.clock.Set(t0.Add(time.Hour + time.Second))
			b.tick(t)
			task := scheduler.Task{ScheduleID: "c", Runs: []string{"c@20260302T100000Z"}}
			tc.arm(t, b.store) // the next runs update is the claim
			_, err := b.eng.Execute(context.Background(), task, nil)
			emutest.FailCommandOff(t, b.store)
			if got := errors.Is(err, scheduler.ErrRetryTask); got != tc.retried {
				t.Fatalf("Execute: %v, want a request for redelivery %v", err, tc.retried)
			}
			if tc.retried {
				if _, err := b.eng.Execute(context.Background(), task, nil); err != nil {
					t.Fatalf("redelivery: %v", err)
				}
			}
			if diff := cmp.Diff([]string{"10:00 scheduled succeeded"}, fireTimesOf(b.runs(t, "c"))); diff != "" {
				t.Errorf("runs (-want,+got):\n%s", diff)
			}
			if n := g.calls.Load(); n != 1 {
				t.Errorf("target called %d times, want once", n)
			}
		})
	}
}

// TestStrandedMisfireIsRun: a buffer_one fire is buffered behind a running
// run whose holder then dies, so nobody checks the flag before releasing.
// Before, failover ignored the flag and the buffered fire waited for the
// schedule's next fire (an hour here; forever for a paused or yearly one).
// The sweep now takes the free lease, records the misfire run and runs it.
func TestStrandedMisfireIsRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "h", Cron: "0 * * * *", Overlap: schedule.OverlapBufferOne, Target: gateTarget(key)})
	// A holder (as if in another process) running an earlier run.
	l, err := b.leases.Acquire(ctx, scheduler.JobLease("h"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	running := bson.D{{Key: "_id", Value: "h@earlier"}, {Key: "scheduleId", Value: "h"}, {Key: "fireTime", Value: t0},
		{Key: "source", Value: schedule.SourceScheduled}, {Key: "status", Value: schedule.RunRunning}, {Key: "attempt", Value: 1},
		{Key: "createdAt", Value: t0}, {Key: "epoch", Value: l.Epoch()}}
	if _, err := b.store.Collection(schedule.RunsCollection).InsertIdempotent(ctx, running); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(time.Hour + time.Second))
	if sum := b.tick(t); sum.Misfired != 1 {
		t.Fatalf("10:00 tick: %+v, want the fire buffered", sum)
	}
	// The holder dies: its lease ends with nobody checking the flag.
	if err := b.leases.Break(ctx, scheduler.JobLease("h")); err != nil {
		t.Fatal(err)
	}
	if s := b.getSchedule(t, "h"); !s.Misfire {
		t.Fatal("the flag is not set")
	}
	b.clock.Set(t0.Add(time.Hour + 5*time.Minute)) // no fire due until 11:00
	if sum := b.tick(t); sum.Recovered != 1 || sum.Succeeded != 1 {
		t.Errorf("sweep: %+v, want the stranded misfire recorded and run", sum)
	}
	var got []schedule.RunStatus
	for _, r := range b.runs(t, "h") {
		if r.Source == schedule.SourceMisfire {
			got = append(got, r.Status)
		}
	}
	if diff := cmp.Diff([]schedule.RunStatus{schedule.RunSucceeded}, got); diff != "" || g.calls.Load() != 1 {
		t.Errorf("misfire runs (-want,+got):\n%s\ncalls %d, want 1", diff, g.calls.Load())
	}
	if s := b.getSchedule(t, "h"); s.Misfire {
		t.Error("flag still set after the misfire ran")
	}
}

// TestMisfireRunsNameTheirOwnWindowsFire: the misfire run's fire time is
// the latest fire buffered since the flag was last cleared. It used to be
// the latest ever ($max over the schedule's life), so an older fire
// buffered after a misfire had run (behind a retry of an earlier fire, say)
// made a second misfire run with the first one's fire time, and that fire
// time reached the target twice.
func TestMisfireRunsNameTheirOwnWindowsFire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "h", Cron: "*/30 * * * *", Overlap: schedule.OverlapBufferOne, Target: gateTarget(key)})
	runs := b.store.Collection(schedule.RunsCollection)
	// hold takes the job lease as a holder in another process that runs
	// the fire at t0 (earlier than anything buffered below).
	hold := func(id string) {
		t.Helper()
		l, err := b.leases.Acquire(ctx, scheduler.JobLease("h"), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		running := bson.D{{Key: "_id", Value: id}, {Key: "scheduleId", Value: "h"}, {Key: "fireTime", Value: t0},
			{Key: "source", Value: schedule.SourceRetry}, {Key: "status", Value: schedule.RunRunning}, {Key: "attempt", Value: 2},
			{Key: "createdAt", Value: t0}, {Key: "epoch", Value: l.Epoch()}}
		if _, err := runs.InsertIdempotent(ctx, running); err != nil {
			t.Fatal(err)
		}
	}
	// die ends the holder with nobody checking the flag.
	die := func(id string) {
		t.Helper()
		if err := b.leases.Break(ctx, scheduler.JobLease("h")); err != nil {
			t.Fatal(err)
		}
		if err := runs.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: schedule.RunSucceeded}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Window 1: the 10:00 fire is buffered, and its misfire run goes.
	hold("h@holder1")
	b.clock.Set(t0.Add(time.Hour + time.Second))
	if sum := b.tick(t); sum.Misfired != 1 {
		t.Fatalf("10:00 tick: %+v, want the fire buffered", sum)
	}
	die("h@holder1")
	b.clock.Set(t0.Add(time.Hour + 5*time.Minute))
	b.tick(t)
	// Window 2: the 09:30 fire, decided long ago and delivered late, meets
	// another holder running the earlier fire, and is buffered.
	hold("h@holder2")
	late := &schedule.Run{ID: schedule.RunID("h", t0.Add(30*time.Minute), schedule.SourceScheduled, 1), ScheduleID: "h",
		FireTime: t0.Add(30 * time.Minute), Source: schedule.SourceScheduled, Status: schedule.RunPending, Attempt: 1, CreatedAt: t0.Add(30 * time.Minute)}
	if _, err := runs.InsertIdempotent(ctx, late); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Execute(ctx, scheduler.Task{ScheduleID: "h", Runs: []string{late.ID}}, nil); err != nil {
		t.Fatalf("execute the late fire: %v", err)
	}
	die("h@holder2")
	b.clock.Set(t0.Add(time.Hour + 10*time.Minute))
	b.tick(t)
	// The 09:30 fire came after the 10:00 misfire run had started: it is
	// folded into it (the order rule), neither buffered again under
	// 10:00's fire time nor run as a misfire of its own.
	var got []string
	for _, r := range b.runs(t, "h") {
		if r.Source == schedule.SourceMisfire {
			got = append(got, r.FireTime.Format("15:04")+" "+string(r.Status))
		}
		if r.ID == late.ID && (r.Status != schedule.RunSkipped || !strings.Contains(r.Reason, scheduler.ReasonSuperseded)) {
			t.Errorf("late 09:30 fire: %s %q, want skipped as superseded", r.Status, r.Reason)
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"10:00 succeeded"}, got); diff != "" || g.calls.Load() != 1 {
		t.Errorf("misfire runs (-want,+got):\n%s\ntarget calls %d, want 1", diff, g.calls.Load())
	}
}

// TestWaitingRetryRunsBeforeTheHolderReleases: a due retry that meets the
// job lease held is run by the holder before it releases. Left to its own
// deliveries, a retry of a schedule whose runs keep the lease held (the
// chaos test's busy skip and buffer_one schedules) met it every time and
// waited for minutes.
func TestWaitingRetryRunsBeforeTheHolderReleases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	key, g := newGate(t, 1)
	b.addSchedule(t, schedule.Schedule{ID: "w", Cron: "0 * * * *", Overlap: schedule.OverlapSkip, Target: gateTarget(key),
		Retry: schedule.Retry{MaxAttempts: 2}})
	retry := &schedule.Run{ID: schedule.RunID("w", t0, schedule.SourceScheduled, 1) + "-a2", ScheduleID: "w", FireTime: t0,
		Source: schedule.SourceRetry, Status: schedule.RunPending, Attempt: 2, CreatedAt: t0}
	if _, err := b.store.Collection(schedule.RunsCollection).InsertIdempotent(ctx, retry); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(time.Hour + time.Second))
	ticked := make(chan struct{})
	go func() { defer close(ticked); b.tick(t) }() // inline: waits for its run
	g.waitStarted(t)
	// The retry's task comes while the 10:00 run holds the lease.
	if _, err := b.eng.Execute(ctx, scheduler.Task{ScheduleID: "w", Runs: []string{retry.ID}}, nil); err != nil && !errors.Is(err, scheduler.ErrRetryTask) {
		t.Fatalf("execute the retry: %v", err)
	}
	g.open()
	<-ticked
	var got schedule.Run
	if err := b.store.Collection(schedule.RunsCollection).Get(ctx, retry.ID, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != schedule.RunSucceeded || g.calls.Load() != 2 {
		t.Errorf("retry %s is %s after the holder released, target calls %d: want it run by the holder", got.ID, got.Status, g.calls.Load())
	}
}

// TestRunInvocationKeepsToItsBudget: one Run invocation (Execute) starts no
// run it has no time to finish: here the misfire buffered while its first
// run ran is left to the sweep. Before, the invocation ran it back to back
// (and the next, and a whole batch), outliving Cloud Tasks' dispatch
// deadline with the job lease held; ended mid-target, the run was failed
// over and, with retries, its target called again.
func TestRunInvocationKeepsToItsBudget(t *testing.T) {
	t.Parallel()
	// A builtin run counts as a minute; a 30 s budget fits the first only.
	b := setup(t, func(c *scheduler.Config) { c.RunBudget = 30 * time.Second })
	ctx := context.Background()
	key, g := newGate(t, 1)
	b.addSchedule(t, schedule.Schedule{ID: "bud", Cron: "0 * * * *", Overlap: schedule.OverlapBufferOne, Target: gateTarget(key)})
	runs := b.store.Collection(schedule.RunsCollection)
	pending := func(at time.Time) string {
		r := &schedule.Run{ID: schedule.RunID("bud", at, schedule.SourceScheduled, 1), ScheduleID: "bud", FireTime: at,
			Source: schedule.SourceScheduled, Status: schedule.RunPending, Attempt: 1, CreatedAt: at}
		if _, err := runs.InsertIdempotent(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	first := pending(t0)
	var out *scheduler.Outcome
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if out, err = b.eng.Execute(ctx, scheduler.Task{ScheduleID: "bud", Runs: []string{first}}, nil); err != nil {
			t.Errorf("execute: %v", err)
		}
	}()
	g.waitStarted(t)
	// The next fire comes while the first runs: buffered.
	if _, err := b.eng.Execute(ctx, scheduler.Task{ScheduleID: "bud", Runs: []string{pending(t0.Add(time.Hour))}}, nil); err != nil {
		t.Fatalf("execute the overlapping fire: %v", err)
	}
	g.open()
	<-done
	if out == nil || out.Executed != 1 || g.calls.Load() != 1 {
		t.Fatalf("the first invocation: %+v, target calls %d; want one run, the misfire left for later", out, g.calls.Load())
	}
	if s := b.getSchedule(t, "bud"); !s.Misfire {
		t.Fatal("the misfire flag is down, but no misfire run ran")
	}
	b.clock.Set(t0.Add(time.Hour + 5*time.Minute))
	b.tick(t) // the sweep's stranded-misfire step
	b.eng.Wait()
	if g.calls.Load() != 2 {
		t.Errorf("target calls %d after the sweep, want the misfire run too", g.calls.Load())
	}
}

// TestSiblingWaitsBehindItsBatchsRetry: a catch-up batch's run that meets
// the job lease held by the retry of an earlier run of the same batch (the
// retry's task took the lease between two runs of the batch) waits behind
// it, as behind the sibling itself. Before, the retry's own createdAt made
// it "another run", and skip recorded the batch's run skipped for an
// overlap that was its own batch.
func TestSiblingWaitsBehindItsBatchsRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "sib", Cron: "*/10 * * * *", Overlap: schedule.OverlapSkip, Target: gateTarget(key)})
	runs := b.store.Collection(schedule.RunsCollection)
	decided := t0.Add(30*time.Minute + 3*time.Second) // the tick that decided the batch
	l, err := b.leases.Acquire(ctx, scheduler.JobLease("sib"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The retry of the batch's 09:10 run holds the lease and runs.
	retry := bson.D{{Key: "_id", Value: "sib@20260302T091000Z-a2"}, {Key: "scheduleId", Value: "sib"}, {Key: "fireTime", Value: t0.Add(10 * time.Minute)},
		{Key: "source", Value: schedule.SourceRetry}, {Key: "status", Value: schedule.RunRunning}, {Key: "attempt", Value: 2},
		{Key: "createdAt", Value: decided.Add(20 * time.Second)}, {Key: "batchAt", Value: decided}, {Key: "epoch", Value: l.Epoch()}}
	if _, err := runs.InsertIdempotent(ctx, retry); err != nil {
		t.Fatal(err)
	}
	next := &schedule.Run{ID: schedule.RunID("sib", t0.Add(20*time.Minute), schedule.SourceScheduled, 1), ScheduleID: "sib",
		FireTime: t0.Add(20 * time.Minute), Source: schedule.SourceCatchup, Status: schedule.RunPending, Attempt: 1, CreatedAt: decided}
	if _, err := runs.InsertIdempotent(ctx, next); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Execute(ctx, scheduler.Task{ScheduleID: "sib", Runs: []string{next.ID}}, nil); err != nil && !errors.Is(err, scheduler.ErrRetryTask) {
		t.Fatalf("execute: %v", err)
	}
	var got schedule.Run
	if err := runs.Get(ctx, next.ID, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != schedule.RunPending || g.calls.Load() != 0 {
		t.Errorf("the batch's 09:20 run is %s (%q) while its batch's retry holds the lease; want it pending behind it", got.Status, got.Reason)
	}
}

package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baton-cron/baton/emulator/tasks"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/taskqueue"
)

// queueRig is the Cloud Tasks emulator with one queue, paused when the test
// only counts what was enqueued, whose tasks go to a handler that counts
// them.
type queueRig struct {
	tasks *tasks.Server
	queue *taskqueue.Queue
	got   atomic.Int64
}

const testQueue = "projects/test/locations/here/queues/runs"

func newQueueRig(t *testing.T, paused bool) *queueRig {
	t.Helper()
	ctx := context.Background()
	r := &queueRig{}
	var err error
	if r.tasks, err = tasks.Start(ctx, tasks.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.tasks.Close() })
	if _, err := r.tasks.CreateQueue(ctx, &cloudtaskspb.Queue{Name: testQueue,
		RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 3, MinBackoff: durationpb.New(100 * time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	if paused {
		c, err := r.tasks.Client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: testQueue}); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.got.Add(1)
	}))
	t.Cleanup(srv.Close)
	if r.queue, err = taskqueue.Open(ctx, taskqueue.Config{Queue: testQueue, URL: srv.URL + "/Run"}, r.tasks.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.queue.Close() })
	return r
}

// listTasks returns the queue's tasks (those not yet delivered).
func (r *queueRig) listTasks(t *testing.T) []*cloudtaskspb.Task {
	t.Helper()
	ctx := context.Background()
	c, err := r.tasks.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []*cloudtaskspb.Task
	it := c.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: testQueue})
	for {
		task, err := it.Next()
		if err != nil {
			break
		}
		out = append(out, task)
	}
	return out
}

// TestTickHandsOffAndNeverExecutes: with a Dispatcher, Tick enqueues
// tasks and executes nothing, so its time cannot depend on a target's; at
// TaskRuns 1 it is one task per schedule, and a duplicated tick enqueues
// nothing new (the names collide). page_test.go has the shared tasks.
func TestTickHandsOffAndNeverExecutes(t *testing.T) {
	t.Parallel()
	q := newQueueRig(t, true) // paused: the tasks stay to be counted
	b := setup(t, func(c *scheduler.Config) { c.Tasks = q.queue; c.TaskRuns = 1 })
	key, g := newGate(t, 1<<30) // would block for ever if Tick executed it
	b.addSchedule(t, schedule.Schedule{ID: "a", Cron: "* * * * *", Target: gateTarget(key)})
	b.addSchedule(t, schedule.Schedule{ID: "b", Cron: "* * * * *", Overlap: schedule.OverlapAllow, Target: gateTarget(key)})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	sum := b.tick(t)
	if sum.Decided != 2 || sum.Enqueued != 2 || sum.Fired != 0 || sum.Errors != 0 {
		t.Errorf("tick: %+v, want 2 decided, 2 enqueued, none fired", sum)
	}
	if n := g.calls.Load(); n != 0 {
		t.Errorf("Tick executed the target %d times", n)
	}
	names := map[string]bool{}
	for _, task := range q.listTasks(t) {
		names[task.GetName()] = true
	}
	want := map[string]bool{
		testQueue + "/tasks/" + scheduler.TaskName([]string{"a@20260302T090100Z"}, ""): true,
		testQueue + "/tasks/" + scheduler.TaskName([]string{"b@20260302T090100Z"}, ""): true,
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tasks (-want,+got):\n%s", diff)
	}
	// The same decisions handed off again (an earlier tick died before
	// advancing nextRunAt, say) are ALREADY_EXISTS, which is success.
	for _, id := range []string{"a", "b"} {
		ids := []string{id + "@20260302T090100Z"}
		if err := q.queue.Dispatch(context.Background(), scheduler.Task{Name: scheduler.TaskName(ids, ""), ScheduleID: id, Runs: ids}); err != nil {
			t.Errorf("second dispatch of %s: %v, want success", id, err)
		}
	}
	if n := len(q.listTasks(t)); n != 2 {
		t.Errorf("%d tasks after the repeat, want 2", n)
	}
}

// TestSweepReEnqueuesUnderANewName: when the hand-off fails (the queue is
// down), the run stays pending and due at once, and the next sweep (the
// same tick's, then the next tick's: not the one after the deciding tick's
// reservation) hands it off again, under a name salted with its
// reservation, so that a task that did exist under the first name (a lost
// answer) cannot hide it.
func TestSweepReEnqueuesUnderANewName(t *testing.T) {
	t.Parallel()
	q := newQueueRig(t, true)
	broken, err := taskqueue.Open(context.Background(), taskqueue.Config{Queue: "projects/test/locations/here/queues/missing", URL: "http://127.0.0.1:1/Run"}, q.tasks.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broken.Close() })
	var d atomic.Pointer[taskqueue.Queue]
	d.Store(broken)
	b := setup(t, func(c *scheduler.Config) {
		c.Tasks = dispatchFunc(func(ctx context.Context, task scheduler.Task) error { return d.Load().Dispatch(ctx, task) })
	})
	b.addSchedule(t, schedule.Schedule{ID: "a", Cron: "0 * * * *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(time.Hour + time.Second))
	// The tick's own sweep finds the run due and tries again: the queue is
	// still down.
	if sum := b.tick(t); sum.Decided != 1 || sum.Enqueued != 0 || sum.Recovered != 1 || sum.Errors != 2 {
		t.Fatalf("tick with the queue down: %+v, want 1 decided, 0 enqueued, 1 recovered, 2 errors", sum)
	}
	d.Store(q.queue)
	b.clock.Set(t0.Add(time.Hour + 3*time.Second))
	if sum := b.tick(t); sum.Recovered != 1 || sum.Enqueued != 1 {
		t.Fatalf("next tick, well within the deciding tick's reservation: %+v, want the run recovered and enqueued", sum)
	}
	ts := q.listTasks(t)
	if len(ts) != 1 || ts[0].GetName() == testQueue+"/tasks/"+scheduler.TaskName([]string{"a@20260302T100000Z"}, "") {
		t.Errorf("tasks %v, want one, not under the tick's name", ts)
	}
}

// dispatchFunc adapts a function to scheduler.Dispatcher.
type dispatchFunc func(context.Context, scheduler.Task) error

func (f dispatchFunc) Dispatch(ctx context.Context, t scheduler.Task) error { return f(ctx, t) }

// TestRetryGetsItsOwnTaskAfterTheBackoff: a failed run's retry is handed
// off by the executor itself, due after the backoff, not left to a tick's
// sweep.
func TestRetryGetsItsOwnTaskAfterTheBackoff(t *testing.T) {
	t.Parallel()
	q := newQueueRig(t, true)
	b := setup(t, func(c *scheduler.Config) { c.Tasks = q.queue })
	// The queue runs on the wall clock, so the decisions do too here: a
	// task due in the past is due now.
	b.clock.Set(time.Now().UTC())
	s := b.addSchedule(t, schedule.Schedule{ID: "f", Cron: "* * * * *", Retry: schedule.Retry{MaxAttempts: 2, Backoff: schedule.Duration(40 * time.Second)},
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "fail"}}})
	b.clock.Set(s.NextRunAt.Add(time.Second))
	b.tick(t)
	id := schedule.RunID("f", s.NextRunAt, schedule.SourceScheduled, 1)
	out, err := b.eng.Execute(context.Background(), scheduler.Task{ScheduleID: "f", Runs: []string{id}}, nil)
	if err != nil || out.Executed != 1 || out.Runs[0].Status != schedule.RunFailed {
		t.Fatalf("Execute: %+v %v, want the run executed and failed", out, err)
	}
	retryTask := testQueue + "/tasks/" + scheduler.TaskName([]string{id + "-a2"}, "")
	var found *cloudtaskspb.Task
	for _, task := range q.listTasks(t) {
		if task.GetName() == retryTask {
			found = task
		}
	}
	if found == nil {
		t.Fatalf("no task for the retry; tasks: %v", q.listTasks(t))
	}
	if got, want := found.GetScheduleTime().AsTime(), b.clock.Now().Add(40*time.Second); got.Sub(want).Abs() > time.Millisecond {
		t.Errorf("retry task due %s, want %s (the backoff)", got, want)
	}
	// The sweep keeps off the retry until its task had a reservation's
	// time to deliver it.
	b.clock.Set(b.clock.Now().Add(45 * time.Second))
	if sum := b.tick(t); sum.Recovered != 0 {
		t.Errorf("the sweep took the retry its task is due to deliver: %+v", sum)
	}
}

// TestDuplicateDeliveryWaitsForAnIdleHolder: a second delivery of a task
// whose first delivery has taken the job lease but not yet claimed the run
// meets a lease held by a holder that runs nothing. It must not take that
// for an overlap: with overlap skip the run would be recorded skipped, the
// first delivery's claim would fail, and the fire would never run. It
// waits, and runs the fire once the holder lets go. (The test holds the
// lease itself, as a holder between acquire and claim does.)
func TestDuplicateDeliveryWaitsForAnIdleHolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "s", Cron: "0 * * * *", Overlap: schedule.OverlapSkip, Target: gateTarget(key)})
	b.clock.Set(t0.Add(time.Hour + time.Second))
	q := newQueueRig(t, true)
	b.eng = mustEngine(t, b, q.queue)
	b.tick(t)
	ctx := context.Background()
	l, err := b.leases.Acquire(ctx, scheduler.JobLease("s"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond) // within the idle-holder waits
		_ = l.Release(ctx)
	}()
	out, err := b.eng.Execute(ctx, scheduler.Task{ScheduleID: "s", Runs: []string{"s@20260302T100000Z"}}, nil)
	if err != nil || out.Runs[0].Status != schedule.RunSucceeded || g.calls.Load() != 1 {
		t.Errorf("Execute: %+v %v, calls %d; want the run executed once after the idle holder let go", out, err, g.calls.Load())
	}
}

// TestRedeliveryWaitsBehindItsBatch: a catch-up batch is one task, executed
// oldest first. A redelivery of it while the first delivery still runs the
// first run meets the job lease held by a run of the same tick: the later
// runs stay pending (answer: deliver again), not skipped as overlaps, and
// the first delivery runs them.
func TestRedeliveryWaitsBehindItsBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, g := newGate(t, 1)
	b.addSchedule(t, schedule.Schedule{ID: "c", Cron: "* * * * *", Overlap: schedule.OverlapSkip, Catchup: schedule.CatchupAll, Target: gateTarget(key)})
	q := newQueueRig(t, true)
	b.eng = mustEngine(t, b, q.queue)
	b.clock.Set(t0.Add(3*time.Minute + time.Second)) // 09:01 missed (older than the grace); 09:02, 09:03 on time
	if sum := b.tick(t); sum.Decided != 3 || sum.Enqueued != 3 {
		t.Fatalf("tick: %+v, want 3 runs in one task", sum)
	}
	task := scheduler.Task{ScheduleID: "c", Runs: []string{"c@20260302T090100Z", "c@20260302T090200Z", "c@20260302T090300Z"}}
	first := make(chan error, 1)
	go func() { _, err := b.eng.Execute(context.Background(), task, nil); first <- err }()
	g.waitStarted(t)
	out, err := b.eng.Execute(context.Background(), task, nil)
	if !errors.Is(err, scheduler.ErrRetryTask) {
		t.Errorf("redelivery: %v, want ErrRetryTask (runs left pending behind the batch)", err)
	}
	want := []scheduler.RunState{
		{ID: "c@20260302T090100Z", Status: schedule.RunRunning, Note: "not pending: already claimed or finished"},
		{ID: "c@20260302T090200Z", Status: schedule.RunPending},
		{ID: "c@20260302T090300Z", Status: schedule.RunPending},
	}
	if diff := cmp.Diff(want, out.Runs); diff != "" {
		t.Errorf("redelivery's runs (-want,+got):\n%s", diff)
	}
	g.open()
	if err := <-first; err != nil {
		t.Errorf("first delivery: %v", err)
	}
	if diff := cmp.Diff([]string{"09:01 catchup succeeded", "09:02 scheduled succeeded", "09:03 scheduled succeeded"}, fireTimesOf(b.runs(t, "c"))); diff != "" {
		t.Errorf("runs (-want,+got):\n%s", diff)
	}
}

func mustEngine(t *testing.T, b *bundle, d scheduler.Dispatcher) *scheduler.Engine {
	t.Helper()
	e, err := scheduler.New(scheduler.Config{Store: b.store, Leases: b.leases, Clock: b.clock, TickLeaseTTL: 10 * time.Second, Tasks: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Wait)
	return e
}

// TestRecoveryDoesNotRunAPausedSchedule: a run decided before its schedule
// was paused, whose task was lost, is recorded skipped with the reason when
// the sweep finds it, not executed after the pause.
func TestRecoveryDoesNotRunAPausedSchedule(t *testing.T) {
	t.Parallel()
	down := dispatchFunc(func(context.Context, scheduler.Task) error { return errors.New("queue down") })
	b := setup(t, func(c *scheduler.Config) { c.Tasks = down })
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "p", Cron: "0 * * * *", Target: gateTarget(key)})
	b.clock.Set(t0.Add(time.Hour + time.Second))
	if sum := b.tick(t); sum.Decided != 1 || sum.Enqueued != 0 {
		t.Fatalf("tick: %+v", sum)
	}
	if err := b.store.Collection(schedule.SchedulesCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "p"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "enabled", Value: false}}}}); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(time.Hour + 3*time.Minute))
	b.tick(t)
	runs := b.runs(t, "p")
	if len(runs) != 1 || runs[0].Status != schedule.RunSkipped || !strings.Contains(runs[0].Reason, "paused") || g.calls.Load() != 0 {
		t.Errorf("runs %+v, calls %d; want the run skipped because the schedule was paused", runs, g.calls.Load())
	}
}

// TestRunDoesNotExecuteAPausedSchedule: a task delivered after its
// schedule was paused records its run skipped with the reason; a manual
// trigger of a paused schedule still runs.
func TestRunDoesNotExecuteAPausedSchedule(t *testing.T) {
	t.Parallel()
	q := newQueueRig(t, true)
	b := setup(t, func(c *scheduler.Config) { c.Tasks = q.queue })
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "p", Cron: "0 * * * *", Target: gateTarget(key)})
	b.clock.Set(t0.Add(time.Hour + time.Second))
	b.tick(t)
	if err := b.store.Collection(schedule.SchedulesCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "p"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "enabled", Value: false}}}}); err != nil {
		t.Fatal(err)
	}
	out, err := b.eng.Execute(context.Background(), scheduler.Task{ScheduleID: "p", Runs: []string{"p@20260302T100000Z"}}, nil)
	if err != nil || out.Runs[0].Status != schedule.RunSkipped || g.calls.Load() != 0 {
		t.Errorf("Execute: %+v %v, calls %d; want the run skipped, not executed", out, err, g.calls.Load())
	}
	run, err := b.eng.Trigger(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	out, err = b.eng.Execute(context.Background(), scheduler.Task{ScheduleID: "p", Runs: []string{run.ID}}, nil)
	if err != nil || out.Runs[0].Status != schedule.RunSucceeded || g.calls.Load() != 1 {
		t.Errorf("manual run of a paused schedule: %+v %v, calls %d; want it executed", out, err, g.calls.Load())
	}
}

// TestBigBatchIsChainedChunks: a catch-up batch longer than MaxTaskRuns is
// split into tasks chained with After, each under Run's body limit; a chunk
// delivered before the one it follows is done waits (ErrRetryTask).
func TestBigBatchIsChainedChunks(t *testing.T) {
	t.Parallel()
	rec := &recDispatcher{}
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec })
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "big", Cron: "* * * * *", Catchup: schedule.CatchupAll, MaxCatchup: 120,
		CatchupWindow: schedule.Duration(24 * time.Hour), Target: gateTarget(key)})
	b.clock.Set(t0.Add(121*time.Minute + time.Second))
	if sum := b.tick(t); sum.Enqueued <= scheduler.MaxTaskRuns {
		t.Fatalf("tick: %+v, want a batch longer than one task", sum)
	}
	got := rec.all()
	if len(got) != 2 {
		t.Fatalf("%d tasks, want 2 chunks", len(got))
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Runs[0] < got[j].Runs[0] })
	for i, task := range got {
		body, _ := json.Marshal(task)
		if len(task.Runs) > scheduler.MaxTaskRuns || len(body) > scheduler.MaxTaskBody {
			t.Errorf("chunk %d: %d runs, %d bytes", i, len(task.Runs), len(body))
		}
		if want := ""; i > 0 {
			want = got[i-1].Runs[len(got[i-1].Runs)-1]
			if task.After != want {
				t.Errorf("chunk %d follows %q, want %q", i, task.After, want)
			}
		} else if task.After != want {
			t.Errorf("first chunk follows %q", task.After)
		}
	}
	if _, err := b.eng.Execute(context.Background(), got[1], nil); !errors.Is(err, scheduler.ErrRetryTask) || g.calls.Load() != 0 {
		t.Errorf("chunk 2 before chunk 1: %v, calls %d; want it to wait", err, g.calls.Load())
	}
	for i, task := range got {
		if _, err := b.eng.Execute(context.Background(), task, nil); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if n := g.calls.Load(); n != int64(len(got[0].Runs)+len(got[1].Runs)) {
		t.Errorf("calls %d", n)
	}
}

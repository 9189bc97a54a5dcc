package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestPageTasks is the packing: tasks delivered now that wait for nothing
// share pages of at most max runs; a retry's (At), a chained chunk
// (After) and a full task keep their own; a task alone stays as it was;
// the same tasks in another order make the same pages.
func TestPageTasks(t *testing.T) {
	t.Parallel()
	task := func(name string, runs int) scheduler.Task {
		tk := scheduler.Task{Name: name, ScheduleID: "s-" + name}
		for i := range runs {
			tk.Runs = append(tk.Runs, fmt.Sprintf("%s@%d", name, i))
		}
		return tk
	}
	later := task("later", 1)
	later.At = time.Unix(1, 0)
	chained := task("chained", 1)
	chained.After = "x@1"
	in := []scheduler.Task{task("d", 1), later, task("b", 2), chained, task("full", 3), task("a", 1), task("c", 2)}
	shape := func(out []scheduler.Task) []string {
		var s []string
		for _, tk := range out {
			if len(tk.Page) == 0 {
				s = append(s, tk.Name)
				continue
			}
			var names []string
			for _, p := range tk.Page {
				if p.Name != "" {
					t.Errorf("page entry %s keeps a name", p.ScheduleID)
				}
				names = append(names, p.ScheduleID)
			}
			s = append(s, tk.Name+"="+strings.Join(names, "+"))
		}
		return s
	}
	got := shape(scheduler.PageTasks(in, 3))
	// a, b (3 runs) fill a page; c and d (3) the next.
	ab := scheduler.TaskName([]string{"a", "b"}, "page")
	cd := scheduler.TaskName([]string{"c", "d"}, "page")
	want := []string{"later", "chained", "full", ab + "=s-a+s-b", cd + "=s-c+s-d"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages (-want,+got):\n%s", diff)
	}
	reversed := make([]scheduler.Task, len(in))
	for i, tk := range in {
		reversed[len(in)-1-i] = tk
	}
	// The tasks that stay alone keep their order; the pages are the same.
	if diff := cmp.Diff(want[3:], shape(scheduler.PageTasks(reversed, 3))[3:]); diff != "" {
		t.Errorf("the same tasks in another order make other pages (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d", "later", "b"}, shape(scheduler.PageTasks(in[:3], 1))); diff != "" {
		t.Errorf("max 1 (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a"}, shape(scheduler.PageTasks([]scheduler.Task{task("a", 1)}, 100))); diff != "" {
		t.Errorf("a task alone (-want,+got):\n%s", diff)
	}
}

// queuedTasks decodes the bodies of the queue's tasks, each named as the
// queue names it.
func queuedTasks(t *testing.T, q *queueRig) []scheduler.Task {
	t.Helper()
	ctx := context.Background()
	c, err := q.tasks.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []scheduler.Task
	it := c.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: testQueue, ResponseView: cloudtaskspb.Task_FULL})
	for {
		task, err := it.Next()
		if err != nil {
			break
		}
		var tk scheduler.Task
		if err := json.Unmarshal(task.GetHttpRequest().GetBody(), &tk); err != nil {
			t.Fatalf("task %s: %v", task.GetName(), err)
		}
		tk.Name = task.GetName()[strings.LastIndex(task.GetName(), "/")+1:]
		out = append(out, tk)
	}
	return out
}

// TestTickSharesOneTaskAcrossSchedules: the runs one tick decides for
// several schedules (buffer_one, allow, skip) go out as one task, which a
// repeated hand-off does not create twice; delivered twice at once and
// then again, it executes each run once.
func TestTickSharesOneTaskAcrossSchedules(t *testing.T) {
	t.Parallel()
	q := newQueueRig(t, true)
	b := setup(t, func(c *scheduler.Config) { c.Tasks = q.queue })
	gates := map[string]*gate{}
	for _, s := range []schedule.Schedule{
		{ID: "a", Cron: "* * * * *"},
		{ID: "b", Cron: "* * * * *", Overlap: schedule.OverlapAllow},
		{ID: "c", Cron: "* * * * *", Overlap: schedule.OverlapSkip},
	} {
		key, g := newGate(t, 0)
		gates[s.ID] = g
		s.Target = gateTarget(key)
		b.addSchedule(t, s)
	}
	b.clock.Set(t0.Add(time.Minute + time.Second))
	if sum := b.tick(t); sum.Decided != 3 || sum.Enqueued != 3 || sum.Errors != 0 {
		t.Fatalf("tick: %+v, want 3 decided and enqueued", sum)
	}
	tasks := queuedTasks(t, q)
	if len(tasks) != 1 || len(tasks[0].Page) != 3 {
		t.Fatalf("tasks %+v, want one page of three", tasks)
	}
	page := tasks[0]
	if err := q.queue.Dispatch(context.Background(), page); err != nil || len(queuedTasks(t, q)) != 1 {
		t.Errorf("the page handed off again: %v; want it to be the same task", err)
	}
	var wg sync.WaitGroup
	outs := make([]*scheduler.Outcome, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i], errs[i] = b.eng.Execute(context.Background(), page, nil) }()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Errorf("delivery %d: %v", i, errs[i])
		}
	}
	if n := outs[0].Executed + outs[1].Executed; n != 3 {
		t.Errorf("the two deliveries executed %d runs, want 3: %+v %+v", n, outs[0], outs[1])
	}
	out, err := b.eng.Execute(context.Background(), page, nil)
	if err != nil || out.Executed != 0 || len(out.Page) != 3 {
		t.Errorf("third delivery: %+v, %v; want nothing executed", out, err)
	}
	for id, g := range gates {
		runs := b.runs(t, id)
		if g.calls.Load() != 1 || len(runs) != 1 || runs[0].Status != schedule.RunSucceeded {
			t.Errorf("schedule %s: %d calls, runs %v; want one succeeded run", id, g.calls.Load(), fireTimesOf(runs))
		}
	}
}

// TestPageRetriesOnlyWhatIsPending: a page with an entry that must wait
// (a chained chunk delivered before the chunk it follows) answers
// ErrRetryTask, having executed its other entry; delivered again once
// the wait is over, it executes the waiting entry and not the other
// twice.
func TestPageRetriesOnlyWhatIsPending(t *testing.T) {
	t.Parallel()
	rec := &recDispatcher{}
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec; c.TaskRuns = 1 })
	bigKey, big := newGate(t, 0)
	oneKey, one := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "big", Cron: "* * * * *", Catchup: schedule.CatchupAll, MaxCatchup: 120,
		CatchupWindow: schedule.Duration(24 * time.Hour), Target: gateTarget(bigKey)})
	b.addSchedule(t, schedule.Schedule{ID: "one", Cron: "0 * * * *", Target: gateTarget(oneKey)})
	b.clock.Set(t0.Add(121*time.Minute + time.Second))
	b.tick(t)
	got := rec.all()
	var first, second, single scheduler.Task
	for _, task := range got {
		switch {
		case task.ScheduleID == "one":
			single = task
		case task.After == "":
			first = task
		default:
			second = task
		}
	}
	if len(got) != 3 || len(single.Runs) != 1 || len(first.Runs) != scheduler.MaxTaskRuns || second.After == "" {
		t.Fatalf("tasks %d (one %v, first %d runs, second after %q); want a single run and two chained chunks", len(got), single.Runs, len(first.Runs), second.After)
	}
	page := scheduler.Task{Page: []scheduler.Task{second, single}}
	out, err := b.eng.Execute(context.Background(), page, nil)
	if !errors.Is(err, scheduler.ErrRetryTask) || out == nil || out.Executed != 1 || big.calls.Load() != 0 || one.calls.Load() != 1 {
		t.Fatalf("page before the chunk it waits for: %+v, %v, calls big %d one %d; want ErrRetryTask with the single run executed",
			out, err, big.calls.Load(), one.calls.Load())
	}
	if _, err := b.eng.Execute(context.Background(), first, nil); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	out, err = b.eng.Execute(context.Background(), page, nil)
	if err != nil || out.Executed != len(second.Runs) || one.calls.Load() != 1 {
		t.Errorf("page again: %+v, %v, calls one %d; want the chunk executed and the single run not again", out, err, one.calls.Load())
	}
	if n := big.calls.Load(); n != int64(len(first.Runs)+len(second.Runs)) {
		t.Errorf("big called %d times, want %d", n, len(first.Runs)+len(second.Runs))
	}
}

// TestPartitionSharesTasksAcrossShards: a partition's decider shards
// decide their schedules separately, and their runs still share one task.
func TestPartitionSharesTasksAcrossShards(t *testing.T) {
	t.Parallel()
	rec := &recDispatcher{}
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec })
	shards := map[int]bool{}
	for i := range 12 {
		s := b.addSchedule(t, schedule.Schedule{ID: fmt.Sprintf("p%d", i), Cron: "* * * * *",
			Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
		shards[schedule.DeciderShardOf(s.ID, schedule.DeciderShards())] = true
	}
	if len(shards) < 2 {
		t.Fatalf("the schedules fell in %d decider shard; the test needs several", len(shards))
	}
	fire := t0.Add(time.Minute)
	b.clock.Set(fire.Add(time.Second))
	sum, err := b.eng.TickPartition(context.Background(), fire, 0, 1)
	if err != nil || sum.Enqueued != 12 {
		t.Fatalf("partition: %+v, %v; want 12 runs enqueued", sum, err)
	}
	got := rec.all()
	if len(got) != 1 || len(got[0].RunIDs()) != 12 {
		t.Errorf("%d tasks for 12 runs in %d shards, want one", len(got), len(shards))
	}
}

// TestPageSlotsBoundTheEntries: an engine executes at most PageSlots
// page entries at once, across its page tasks; the rest wait for a slot
// and then run.
func TestPageSlotsBoundTheEntries(t *testing.T) {
	t.Parallel()
	rec := &recDispatcher{}
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec; c.PageSlots = 2 })
	key, g := newGate(t, 3) // every call waits until the gate opens
	for _, id := range []string{"x", "y", "z"} {
		b.addSchedule(t, schedule.Schedule{ID: id, Cron: "* * * * *", Overlap: schedule.OverlapAllow, Target: gateTarget(key)})
	}
	b.clock.Set(t0.Add(time.Minute + time.Second))
	b.tick(t)
	got := rec.all()
	if len(got) != 1 || len(got[0].Page) != 3 {
		t.Fatalf("tasks %+v, want one page of three", got)
	}
	done := make(chan error, 1)
	go func() { _, err := b.eng.Execute(context.Background(), got[0], nil); done <- err }()
	g.waitStarted(t)
	g.waitStarted(t)
	select {
	case n := <-g.started:
		t.Errorf("call %d started with both slots taken", n)
	case <-time.After(500 * time.Millisecond):
	}
	g.open()
	if err := <-done; err != nil || g.calls.Load() != 3 {
		t.Errorf("page: %v, %d calls; want all three executed once the slots freed", err, g.calls.Load())
	}
}

// TestAnswerNeedsNoReadBack: a task's answer says each run's status, and a
// run still pending makes it worth delivering again. A run this delivery
// claimed is not pending any more, so its status is what the delivery
// wrote, without reading the run back: an allow run's delivery reads the
// run document once (to find it pending), and its answer says succeeded,
// as the stored run does. A second delivery reads it once too, and says
// what it read.
func TestAnswerNeedsNoReadBack(t *testing.T) {
	t.Parallel()
	rec := &recDispatcher{}
	b := setup(t, func(c *scheduler.Config) { c.Tasks = rec })
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "a", Cron: "* * * * *", Overlap: schedule.OverlapAllow, Target: gateTarget(key)})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	b.tick(t)
	tasks := rec.all()
	if len(tasks) != 1 {
		t.Fatalf("tasks %+v, want one", tasks)
	}
	op := schedule.RunsCollection + ".find"
	for i, want := range []int{1, 0} {
		before := b.store.Meter().Op(op)
		out, err := b.eng.Execute(context.Background(), tasks[0], nil)
		reads := b.store.Meter().Op(op) - before
		if err != nil || out.Executed != want {
			t.Fatalf("delivery %d: %+v, %v; want %d executed", i+1, out, err, want)
		}
		states := out.Runs
		if len(out.Page) == 1 {
			states = out.Page[0].Runs
		}
		if len(states) != 1 || states[0].Status != schedule.RunSucceeded {
			t.Errorf("delivery %d answered %+v; want the run succeeded", i+1, states)
		}
		if reads != 1 {
			t.Errorf("delivery %d read the runs %d times; want once", i+1, reads)
		}
	}
	if runs := b.runs(t, "a"); g.calls.Load() != 1 || len(runs) != 1 || runs[0].Status != schedule.RunSucceeded {
		t.Errorf("%d calls, runs %v; want one succeeded run", g.calls.Load(), fireTimesOf(runs))
	}
}

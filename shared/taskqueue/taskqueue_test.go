package taskqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/iterator"

	"github.com/baton-cron/baton/emulator/tasks"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/taskqueue"
)

// pausedQueues starts the Cloud Tasks emulator with n paused queues, so
// that every task created stays listed where it landed.
func pausedQueues(t *testing.T, n int) (*tasks.Server, []string) {
	t.Helper()
	ctx := context.Background()
	srv, err := tasks.Start(ctx, tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var names []string
	for i := range n {
		name := fmt.Sprintf("projects/p/locations/l/queues/baton-runs-%d", i)
		if _, err := srv.CreateQueue(ctx, &cloudtaskspb.Queue{Name: name}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return srv, names
}

// listed returns the schedule of every task on each queue.
func listed(t *testing.T, srv *tasks.Server, queues []string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[string][]string{}
	for _, q := range queues {
		it := c.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: q, ResponseView: cloudtaskspb.Task_FULL})
		for {
			task, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			body := string(task.GetHttpRequest().GetBody())
			i := strings.Index(body, `"scheduleId":"`)
			rest := body[i+len(`"scheduleId":"`):]
			out[q] = append(out[q], rest[:strings.IndexByte(rest, '"')])
		}
	}
	return out
}

// TestSchedulesSpreadOverQueuesAndStayInOne is the enqueuer's side of
// tasks_queue_count: over three queues, every task of one schedule (its
// decided runs and a retry) lands in one queue, the one QueueIndex names,
// a repeated hand-off is still deduplicated there, and every queue takes
// a share.
func TestSchedulesSpreadOverQueuesAndStayInOne(t *testing.T) {
	t.Parallel()
	srv, queues := pausedQueues(t, 3)
	ctx := context.Background()
	q, err := taskqueue.Open(ctx, taskqueue.Config{Queues: queues, URL: "http://run.invalid/Run"}, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const schedules = 30
	for i := range schedules {
		id := fmt.Sprintf("sched-%03d", i)
		for _, runs := range [][]string{{id + "@1"}, {id + "@2"}, {id + "@1"}} { // the third repeats the first
			if err := q.Dispatch(ctx, scheduler.Task{ScheduleID: id, Runs: runs}); err != nil {
				t.Fatal(err)
			}
		}
	}
	byQueue := listed(t, srv, queues)
	seen := map[string]string{}
	total := 0
	for qn, ids := range byQueue {
		total += len(ids)
		for _, id := range ids {
			if prev, ok := seen[id]; ok && prev != qn {
				t.Errorf("schedule %s has tasks on %s and %s; want one queue", id, prev, qn)
			}
			seen[id] = qn
			if want := q.QueueFor(id); want != qn {
				t.Errorf("schedule %s's task is on %s; QueueFor says %s", id, qn, want)
			}
		}
	}
	if total != 2*schedules {
		t.Errorf("%d tasks listed; want %d (two distinct hand-offs per schedule, the repeat deduplicated)", total, 2*schedules)
	}
	for _, qn := range queues {
		if len(byQueue[qn]) == 0 {
			t.Errorf("queue %s got no task of %d schedules: the hash does not spread", qn, schedules)
		}
	}
}

// TestOneQueueConfigIsUnchanged: Queue alone, as before Queues existed,
// puts every task there.
func TestOneQueueConfigIsUnchanged(t *testing.T) {
	t.Parallel()
	srv, queues := pausedQueues(t, 1)
	ctx := context.Background()
	q, err := taskqueue.Open(ctx, taskqueue.Config{Queue: queues[0], URL: "http://run.invalid/Run"}, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for i := range 5 {
		if err := q.Dispatch(ctx, scheduler.Task{ScheduleID: fmt.Sprint("s", i), Runs: []string{fmt.Sprint("r", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(listed(t, srv, queues)[queues[0]]); n != 5 {
		t.Errorf("%d tasks on the one queue; want 5", n)
	}
}

// TestQueuesConfigRefusals: every listed queue is checked, and a queue
// listed twice is a typo that would double its share.
func TestQueuesConfigRefusals(t *testing.T) {
	t.Parallel()
	good := "projects/p/locations/l/queues/a"
	for name, cfg := range map[string]taskqueue.Config{
		"bad second":   {Queues: []string{good, "queues/b"}, URL: "http://x/Run"},
		"listed twice": {Queues: []string{good, good}, URL: "http://x/Run"},
	} {
		if err := cfg.Check(); !errors.Is(err, taskqueue.ErrConfig) {
			t.Errorf("%s: Check = %v; want ErrConfig", name, err)
		}
	}
}

// TestQueueIndexIsStable pins the hash (FNV-1a 32, mod n; the values were
// computed apart from Go's hash/fnv): a change would move every schedule to
// another queue at an upgrade.
func TestQueueIndexIsStable(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]int{"a": 1, "nightly-report": 0, "sched-001": 2} {
		if got := taskqueue.QueueIndex(id, 3); got != want {
			t.Errorf("QueueIndex(%q, 3) = %d; want %d", id, got, want)
		}
	}
	if got := taskqueue.QueueIndex("anything", 1); got != 0 {
		t.Errorf("QueueIndex with one queue = %d; want 0", got)
	}
}

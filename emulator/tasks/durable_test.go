package tasks_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baton-cron/baton/emulator/tasks"
)

// TestDurableBacklogSurvivesKill stops an emulator with a backlog queued
// and attempts in flight, without draining it (Close cancels what is in
// flight, as a killed process does), starts a new one on the same Dir, and
// checks that every task is delivered, and that only a task whose attempt
// was in flight at the kill (its success never recorded) reaches the
// target a second time: Cloud Tasks' at-least-once, no more.
func TestDurableBacklogSurvivesKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var mu sync.Mutex
	calls := map[string]int{} // task id → requests the target got
	release := make(chan struct{})
	var once sync.Once
	tg := newTarget(t, func(n int, w http.ResponseWriter, r *http.Request) int {
		id := r.Header.Get(tasks.HeaderTaskName)
		mu.Lock()
		calls[id]++
		mu.Unlock()
		if n > 8 {
			// From the ninth request on, the target hangs until the kill:
			// those attempts are in flight when the server dies.
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return http.StatusOK
	})
	defer once.Do(func() { close(release) })

	start := func() (*tasks.Server, *bundle) {
		srv, err := tasks.Start(ctx, tasks.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		c, err := srv.Client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(); _ = srv.Close() })
		return srv, &bundle{srv: srv, client: c, ctx: ctx}
	}

	srv1, b1 := start()
	q := b1.queue(t, "durable",
		&cloudtaskspb.RateLimits{MaxConcurrentDispatches: 4, MaxDispatchesPerSecond: 500},
		&cloudtaskspb.RetryConfig{MaxAttempts: 10, MinBackoff: durationpb.New(10 * time.Millisecond)})
	const n = 40
	for i := range n {
		b1.create(t, q, httpTask(q, fmt.Sprintf("t%02d", i), tg.srv.URL))
	}
	// Eight succeed; four more hang in flight; the rest wait in the queue.
	b1.wait(t, 8)
	for {
		mu.Lock()
		inflight := len(calls) - 8
		mu.Unlock()
		if inflight >= 4 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the attempts after the eighth never started")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := srv1.Close(); err != nil {
		t.Fatal(err)
	}
	first := srv1.Attempts()
	once.Do(func() { close(release) })
	done := map[string]bool{}
	for _, a := range first {
		if a.OK() {
			done[a.Task[strings.LastIndex(a.Task, "/")+1:]] = true
		}
	}
	mu.Lock()
	before := map[string]int{}
	for id, c := range calls {
		before[id] = c
	}
	mu.Unlock()

	// A new server on the same dir: the queue, its configuration and every
	// unfinished task are back.
	srv2, b2 := start()
	got, err := b2.client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: q})
	if err != nil {
		t.Fatalf("GetQueue after the restart: %v", err)
	}
	if got.GetRateLimits().GetMaxConcurrentDispatches() != 4 || got.GetRetryConfig().GetMaxAttempts() != 10 {
		t.Errorf("queue after the restart: %v", got)
	}
	left := n - len(done)
	as, err := srv2.WaitAttempts(ctx, left)
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	for _, a := range as {
		if !a.OK() {
			t.Errorf("attempt after the restart failed: %+v", a)
		}
		id := a.Task[strings.LastIndex(a.Task, "/")+1:]
		if done[id] {
			t.Errorf("task %s succeeded before the kill and was delivered again", id)
		}
		done[id] = true
	}
	if len(done) != n {
		t.Errorf("%d of %d tasks delivered", len(done), n)
	}
	mu.Lock()
	for id, c := range calls {
		if c > 1 && before[id] == 0 {
			t.Errorf("task %s reached the target %d times, all after the restart", id, c)
		}
		if c > 2 {
			t.Errorf("task %s reached the target %d times", id, c)
		}
	}
	twice := 0
	for _, c := range calls {
		if c == 2 {
			twice++
		}
	}
	mu.Unlock()
	if twice > 4 {
		t.Errorf("%d tasks delivered twice; only the 4 in flight at the kill may be", twice)
	}
	t.Logf("%d tasks: %d done before the kill, %d delivered twice (in flight at the kill)", n, n-left, twice)

	// Names stay taken across the restart: a task that succeeded before
	// the kill is still deduplicated.
	_, err = b2.client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: httpTask(q, "t00", tg.srv.URL)})
	wantCode(t, err, codes.AlreadyExists, "CreateTask of a name that succeeded before the restart")
}

// TestDurableQueueStateSurvivesRestart: a paused queue stays paused, with
// its tasks, across a clean restart, and a deleted queue's name stays
// refused.
func TestDurableQueueStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, tasks.Options{Dir: dir})
	tg := newTarget(t, always(http.StatusOK))
	q := b.queue(t, "paused", nil, nil)
	gone := b.queue(t, "gone", nil, nil)
	if _, err := b.client.PauseQueue(b.ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	b.create(t, q, httpTask(q, "waits", tg.srv.URL))
	if err := b.client.DeleteQueue(b.ctx, &cloudtaskspb.DeleteQueueRequest{Name: gone}); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.Shutdown(b.ctx); err != nil {
		t.Fatal(err)
	}

	b2 := setup(t, tasks.Options{Dir: dir})
	got, err := b2.client.GetQueue(b2.ctx, &cloudtaskspb.GetQueueRequest{Name: q})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != cloudtaskspb.Queue_PAUSED {
		t.Errorf("state after the restart: %v, want PAUSED", got.State)
	}
	if _, err := b2.client.GetTask(b2.ctx, &cloudtaskspb.GetTaskRequest{Name: q + "/tasks/waits"}); err != nil {
		t.Errorf("the paused queue's task after the restart: %v", err)
	}
	_, err = b2.client.CreateQueue(b2.ctx, &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{Name: gone}})
	wantCode(t, err, codes.FailedPrecondition, "CreateQueue of a name deleted before the restart")
	if _, err := b2.client.ResumeQueue(b2.ctx, &cloudtaskspb.ResumeQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	b2.wait(t, 1)
	if len(tg.requests()) != 1 {
		t.Errorf("target got %d requests, want 1", len(tg.requests()))
	}
}

package tests

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestAttackCatchupBatchTooBigForRun: Tick puts a schedule's whole catch-up
// batch in one task (MaxTaskRuns = 2000 allows maxCatchup 1000 plus the
// on-time runs), but Run reads at most 16 KiB of body. With catch-up "all"
// and a maxCatchup of 500 (half the allowed 1000), after an outage the task
// body is ~17 KB: every delivery is refused with 413, the queue retries it
// until max_attempts, and none of the decided runs executes through its
// task. They wait for the sweep (after the reservation), which re-enqueues
// them a page (100) at a time, in sweepAt order.
func TestAttackCatchupBatchTooBigForRun(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	r := newHandOffRig(t, start, nil, nil)
	key := t.Name()
	s := schedule.Schedule{ID: "nightly-export", Cron: "* * * * *", Catchup: schedule.CatchupAll, MaxCatchup: 500,
		CatchupWindow: schedule.Duration(24 * time.Hour),
		Target:        schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "test-count", Args: map[string]string{"key": key}}}}
	if err := s.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
		t.Fatal(err)
	}
	s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = start.Add(time.Minute), true, 1, start, start
	if _, err := r.st.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	// An outage of 500 minutes ends; the first tick decides the batch.
	r.set(start.Add(501*time.Minute + 3*time.Second))
	code, sum := r.tick(t, start.Add(501*time.Minute))
	if code != 200 {
		t.Fatalf("tick: %d", code)
	}
	t.Logf("tick: decided %d, caught up %d, enqueued %d, errors %d", sum.Decided, sum.CaughtUp, sum.Enqueued, sum.Errors)
	if sum.Enqueued < 400 {
		t.Fatalf("enqueued %d runs, want the batch", sum.Enqueued)
	}
	// Give the queue a few seconds of deliveries (the rig retries every
	// 200 ms to 2 s).
	deadline := time.Now().Add(8 * time.Second)
	var statuses []string
	for time.Now().Before(deadline) {
		statuses = statuses[:0]
		for _, a := range r.tasks.Attempts() {
			statuses = append(statuses, fmt.Sprintf("#%d %d", a.Number, a.Status))
		}
		v, _ := tickCalls.LoadOrStore(key, new(atomic.Int64))
		if v.(*atomic.Int64).Load() > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	v, _ := tickCalls.LoadOrStore(key, new(atomic.Int64))
	executed := v.(*atomic.Int64).Load()
	pending, _ := r.st.Collection(schedule.RunsCollection).Count(context.Background(), bson.D{{Key: "scheduleId", Value: "nightly-export"}, {Key: "status", Value: schedule.RunPending}})
	t.Logf("deliveries of the batch task: %s; executed %d; pending %d", strings.Join(statuses, ", "), executed, pending)
	if executed == 0 {
		t.Errorf("the tick's task for a %d-run catch-up batch executed nothing in 8 s: Run refuses its body (%s); the runs wait for the sweep", sum.Enqueued, strings.Join(statuses, ", "))
	}
}

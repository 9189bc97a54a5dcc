package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/store"
)

// gpuPreempt: a running preemptible job is marked Preempting only once,
// only after its minimum run time and below the preemption bound; a
// marked job's heartbeat and failed completion (UnlessPreempting) miss,
// and RequeuePreempted queues it with its attempts unchanged and one more
// preemption, once.
func (s *suite) gpuPreempt(t *testing.T) {
	_, q := s.gpuRig(t)
	ctx := t.Context()
	if err := q.EnsureSlots(ctx, freeSlot("s0")); err != nil {
		t.Fatal(err)
	}
	job := queuedJob("v", 1, gpuT0)
	job.Preemptible = true
	enqueue(t, q, job)
	_, job = dispatch(t, q, "s0", "h", gpuT0)
	h := gpumodel.Hold{Slot: job.Slot, Epoch: job.Epoch, SecretHash: "h"}
	started := gpuT0.Add(time.Second)
	running, err := q.Heartbeat(ctx, job.ID, h, started, started.Add(gpuLease))
	if err != nil {
		t.Fatal(err)
	}
	list, err := q.RunningPreemptible(ctx, 10)
	if err != nil || len(list) != 1 || list[0].ID != "v" {
		t.Fatalf("running preemptible = %v, %v; want v", list, err)
	}
	if err := q.MarkPreempting(ctx, running, started.Add(-time.Millisecond), 3); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("mark before the minimum run time: %v, want ErrConflict", err)
	}
	if err := q.MarkPreempting(ctx, running, started, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("mark at the preemption bound: %v, want ErrConflict", err)
	}
	if err := q.MarkPreempting(ctx, running, started, 3); err != nil {
		t.Fatalf("mark: %v", err)
	}
	if err := q.MarkPreempting(ctx, running, started, 3); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second mark: %v, want ErrConflict", err)
	}
	if _, err := q.Heartbeat(ctx, job.ID, h, started, started.Add(gpuLease)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("heartbeat of a marked job: %v, want ErrConflict", err)
	}
	o := gpumodel.Outcome{Status: gpumodel.StatusFailed, ExitCode: -1, UnlessPreempting: true}
	if _, err := q.Complete(ctx, job.ID, h, o, started); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("failed completion of a marked job: %v, want ErrConflict", err)
	}
	marked := getJob(t, q, job.ID)
	after, err := q.RequeuePreempted(ctx, marked, h, "preempted")
	if err != nil {
		t.Fatalf("requeue preempted: %v", err)
	}
	if after.Status != gpumodel.StatusQueued || after.Attempts != 0 || after.Preemptions != 1 || after.Preempting || after.Slot != "" {
		t.Fatalf("after requeue: %+v; want queued, attempts 0, preemptions 1, no mark, no fence", after)
	}
	if _, err := q.RequeuePreempted(ctx, marked, h, "preempted"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second requeue: %v, want ErrConflict", err)
	}
}

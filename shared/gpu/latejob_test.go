package gpu_test

import (
	"sync"
	"testing"

	"github.com/baton-cron/baton/shared/gpu"
)

// lateEnqueue makes the next empty fill meet a job enqueued while its slot
// is still held: that enqueue's own Dispatch finds no free slot and gives
// up, so only a second look after the free can start the job.
func lateEnqueue(b *bundle, id string) {
	var once sync.Once
	gpu.SetEmptyFillHook(b.d, func() {
		once.Do(func() { b.enqueue(gpu.EnqueueRequest{ID: id, Payload: "true"}) })
	})
}

// TestJobEnqueuedWhileASlotIsFreedIsDispatched: a Dispatch that finds the
// queue empty must not leave a job that arrived before it freed the slot
// queued behind a free slot until the next sweep (it flaked TestCancel).
func TestJobEnqueuedWhileASlotIsFreedIsDispatched(t *testing.T) {
	b := setup(t, setupOpts{workers: 1})
	lateEnqueue(b, "late")
	if _, err := b.d.Dispatch(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := b.job("late"); j.Status == gpu.StatusQueued {
		t.Fatalf("job late is still queued behind a free slot after Dispatch returned")
	}
	b.waitStatus("late", gpu.StatusSucceeded)
}

// TestJobEnqueuedDuringAHandOffIsDispatched: the same window at a
// completion, whose hand-off re-claims the slot, finds nothing queued and
// frees it.
func TestJobEnqueuedDuringAHandOffIsDispatched(t *testing.T) {
	b := setup(t, setupOpts{workers: 1})
	b.enqueue(gpu.EnqueueRequest{ID: "first", Payload: b.gate("go")})
	b.waitStatus("first", gpu.StatusRunning)
	lateEnqueue(b, "late")
	b.release("go")
	b.waitStatus("first", gpu.StatusSucceeded)
	b.waitStatus("late", gpu.StatusSucceeded)
}

package gpu_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
)

// TestZombieOnTheSameSlotIsFencedByEpoch: a job's worker goes silent, its
// lease expires, and the sweep dispatches the job again to the same slot
// (the pool has one), at a new epoch. The old attempt's holder then wakes
// and calls back. Its slot is the one the job is held on, so only the
// epoch tells it from the live attempt: its heartbeat and its completion
// must be refused, and the live attempt's outcome must be the job's.
// (TestCrashRequeuesExactlyOnce has the zombie on another slot, where the
// slot alone refuses it.)
func TestZombieOnTheSameSlotIsFencedByEpoch(t *testing.T) {
	// The worker's front accepts every POST /run and reports it; the test
	// plays both attempts' holders through the dispatcher's callbacks.
	runs := make(chan gpu.RunRequest, 4)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req gpu.RunRequest
		if r.URL.Path != "/run" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		runs <- req
		w.WriteHeader(http.StatusAccepted)
	}))
	defer front.Close()
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	next := func(what string) gpu.RunRequest {
		t.Helper()
		select {
		case r := <-runs:
			return r
		case <-time.After(30 * time.Second):
			t.Fatalf("no POST /run for %s", what)
			return gpu.RunRequest{}
		}
	}

	b.enqueue(gpu.EnqueueRequest{ID: "j", Payload: "true"})
	first := next("the first attempt")
	if _, err := b.d.Heartbeat(b.ctx, "j", first.Fence()); err != nil {
		t.Fatalf("first attempt's heartbeat: %v", err)
	}
	// Its holder goes silent past the lease; the sweep takes the job back
	// and dispatches it again to the only slot.
	b.clock.Advance(b.d.LeaseTTL() + time.Second)
	if requeued, _, err := b.d.Sweep(b.ctx); err != nil || requeued != 1 {
		t.Fatalf("sweep: requeued %d, err %v; want 1", requeued, err)
	}
	second := next("the second attempt")
	if second.Slot != first.Slot || second.Epoch <= first.Epoch {
		t.Fatalf("second attempt on %s@%d after %s@%d; the test needs the same slot at a newer epoch", second.Slot, second.Epoch, first.Slot, first.Epoch)
	}
	if _, err := b.d.Heartbeat(b.ctx, "j", second.Fence()); err != nil {
		t.Fatalf("second attempt's heartbeat: %v", err)
	}

	// The first attempt's holder wakes.
	if _, err := b.d.Heartbeat(b.ctx, "j", first.Fence()); !errors.Is(err, gpu.ErrStaleFence) {
		t.Errorf("stale heartbeat on the same slot: err %v, want ErrStaleFence", err)
	}
	if _, err := b.d.Complete(b.ctx, "j", gpu.CompleteRequest{Fence: first.Fence(), ExitCode: 7, Error: "the stale attempt's outcome"}); !errors.Is(err, gpu.ErrStaleFence) {
		t.Errorf("stale completion on the same slot: err %v, want ErrStaleFence", err)
	}
	if j := b.job("j"); j.Status != gpu.StatusRunning || j.Epoch != second.Epoch {
		t.Fatalf("after the stale callbacks: %s at epoch %d (error %q); want it still running under epoch %d",
			j.Status, j.Epoch, j.Error, second.Epoch)
	}
	if _, err := b.d.Complete(b.ctx, "j", gpu.CompleteRequest{Fence: second.Fence(), ExitCode: 0}); err != nil {
		t.Fatalf("live completion: %v", err)
	}
	if j := b.job("j"); j.Status != gpu.StatusSucceeded || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Errorf("job after the live completion: %s (error %q); want succeeded, exit 0", j.Status, j.Error)
	}
}

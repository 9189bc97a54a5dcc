package gpu_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
)

// TestLiveHeartbeatTakesBackADeadWorkersJob: two jobs run on two slots and
// the worker of one goes silent. No tick comes (Sweep is never called);
// the other worker's next heartbeat after the silent one's lease has run
// out takes that job back and dispatches it again, to the freed slot, not
// to the slot whose job is still running: the running job's slot was
// leased for its whole run when it was linked, and its heartbeats never
// rewrite it.
func TestLiveHeartbeatTakesBackADeadWorkersJob(t *testing.T) {
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
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=2"})
	next := func(what string) gpu.RunRequest {
		t.Helper()
		select {
		case r := <-runs:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no POST /run for %s", what)
			return gpu.RunRequest{}
		}
	}
	b.enqueue(gpu.EnqueueRequest{ID: "dies", Payload: "true"})
	dying := next("the job whose worker dies")
	b.enqueue(gpu.EnqueueRequest{ID: "lives", Payload: "true"})
	living := next("the job whose worker lives")
	for _, r := range []gpu.RunRequest{dying, living} {
		if _, err := b.d.Heartbeat(b.ctx, r.JobID, r.Fence()); err != nil {
			t.Fatalf("heartbeat %s: %v", r.JobID, err)
		}
	}
	slotLease := func(id string) time.Duration {
		t.Helper()
		views, err := b.d.Slots(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			if v.ID == id {
				return time.Duration(v.LeaseLeft * float64(time.Second))
			}
		}
		t.Fatalf("no slot %s in %+v", id, views)
		return 0
	}
	// The living job's slot is held for the run (its 1h timeout), far
	// past any job lease.
	if left := slotLease(living.Slot); left < time.Hour {
		t.Fatalf("slot %s holding a running job has %s of lease left; want its whole run (> 1h)", living.Slot, left)
	}

	// The dying job's worker is silent past its lease; the living one
	// beats. That beat, not a tick, requeues the dead worker's job.
	b.clock.Advance(b.d.LeaseTTL() + time.Second)
	if _, err := b.d.Heartbeat(b.ctx, living.JobID, living.Fence()); err != nil {
		t.Fatalf("living heartbeat: %v", err)
	}
	again := next("the dead worker's job, again")
	if again.JobID != dying.JobID || again.Slot != dying.Slot || again.Epoch <= dying.Epoch || again.Attempt != 2 {
		t.Fatalf("after the living beat: POST /run %s attempt %d on %s@%d; want %s attempt 2 on the freed slot %s at an epoch above %d",
			again.JobID, again.Attempt, again.Slot, again.Epoch, dying.JobID, dying.Slot, dying.Epoch)
	}
	if j := b.job(living.JobID); j.Status != gpu.StatusRunning || j.Slot != living.Slot || j.Epoch != living.Epoch {
		t.Errorf("living job after the take-back: %s on %s@%d; want still running on %s@%d", j.Status, j.Slot, j.Epoch, living.Slot, living.Epoch)
	}
	if left := slotLease(living.Slot); left < time.Hour-2*b.d.LeaseTTL() {
		t.Errorf("the living job's slot has %s of lease left after its heartbeats; want its run lease untouched", left)
	}
}

// TestLiveHeartbeatWaitsForALeaseDueWithinABeat: the dead worker's lease
// runs out a second after a live beat arrives, and no other beat follows
// (the next would come a beat period later). That beat holds its answer
// until the lease has run out and takes the job back then, so the job is
// not left waiting up to a whole beat period for the next one.
func TestLiveHeartbeatWaitsForALeaseDueWithinABeat(t *testing.T) {
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
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=2"})
	next := func(what string, within time.Duration) gpu.RunRequest {
		t.Helper()
		select {
		case r := <-runs:
			return r
		case <-time.After(within):
			t.Fatalf("no POST /run for %s within %s", what, within)
			return gpu.RunRequest{}
		}
	}
	b.enqueue(gpu.EnqueueRequest{ID: "dies", Payload: "true"})
	dying := next("the job whose worker dies", 10*time.Second)
	b.enqueue(gpu.EnqueueRequest{ID: "lives", Payload: "true"})
	living := next("the job whose worker lives", 10*time.Second)
	for _, r := range []gpu.RunRequest{dying, living} {
		if _, err := b.d.Heartbeat(b.ctx, r.JobID, r.Fence()); err != nil {
			t.Fatalf("heartbeat %s: %v", r.JobID, err)
		}
	}
	// Half a second before the dying job's lease runs out (the harness has
	// no clock skew): within the hold's reach, a fifth of the lease.
	b.clock.Advance(b.d.LeaseTTL() - 500*time.Millisecond)
	start := time.Now()
	if _, err := b.d.Heartbeat(b.ctx, living.JobID, living.Fence()); err != nil {
		t.Fatalf("living heartbeat: %v", err)
	}
	held := time.Since(start)
	again := next("the dead worker's job, taken back by the held beat", 100*time.Millisecond)
	if again.JobID != dying.JobID || again.Attempt != 2 {
		t.Fatalf("POST /run %s attempt %d; want %s attempt 2", again.JobID, again.Attempt, dying.JobID)
	}
	if held < 400*time.Millisecond {
		t.Errorf("the beat was answered after %s, before the lease it took back had run out (0.5 s)", held)
	}
	if held > 2*b.d.LeaseTTL()/5 {
		t.Errorf("the beat was held %s, past its budget of 2/5 of the lease (%s)", held, 2*b.d.LeaseTTL()/5)
	}
}

// TestIdleSweepWritesNoSlot: with nothing queued, the tick's sweep leaves
// the slots alone: no epoch moves, so it made no write, and no reader saw
// a slot being claimed. It fails if Sweep dispatches an empty queue.
func TestIdleSweepWritesNoSlot(t *testing.T) {
	b := setup(t, setupOpts{workers: 2})
	before, err := b.d.Slots(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := b.d.Sweep(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, err := b.d.Slots(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if after[i].Epoch != before[i].Epoch || after[i].State != "free" {
			t.Errorf("slot %s: epoch %d → %d, state %s; want the epoch unchanged and free", after[i].ID, before[i].Epoch, after[i].Epoch, after[i].State)
		}
	}
	// And the sweep still dispatches what is queued (by a dispatcher
	// without a pool, so only the sweep can send it).
	j, _, err := queueOnly(t, b).Enqueue(b.ctx, gpu.EnqueueRequest{Payload: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.d.Sweep(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(j.ID, gpu.StatusSucceeded)
}

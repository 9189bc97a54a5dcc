package gpu_test

import (
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
)

// pastMinRun moves the clock beyond the minimum run time and waits until
// the running job id has heartbeated since (so its lease counts from the
// new time and no sweep takes it back), then sweeps, as a tick would.
func (b *bundle) pastMinRun(id string, d time.Duration) {
	b.t.Helper()
	b.clock.Advance(d)
	after := b.clock.Now()
	b.waitFor("a heartbeat after the clock moved", func() bool {
		j := b.job(id)
		return j.HeartbeatAt != nil && j.HeartbeatAt.After(after)
	})
	if _, _, err := b.d.Sweep(b.ctx); err != nil {
		b.t.Fatal(err)
	}
}

// TestPreemption: a preemptible low-priority job is preempted by a
// high-priority one, requeued with no attempt used, and finishes later;
// once it has been preempted MaxPreemptions times, it is not preempted
// again.
func TestPreemption(t *testing.T) {
	rec := &recorder{}
	b := setup(t, setupOpts{workers: 1, worker: withOrder(rec), preemptMinRun: time.Minute, maxPreemptions: 1})
	low := b.enqueue(gpu.EnqueueRequest{Payload: b.gate("low"), Priority: 1, Preemptible: true})
	b.waitStatus(low.ID, gpu.StatusRunning)
	high := b.enqueue(gpu.EnqueueRequest{Payload: "exit 0", Priority: 10})
	b.pastMinRun(low.ID, 2*time.Minute)

	b.waitStatus(high.ID, gpu.StatusSucceeded)
	got := b.waitStatus(low.ID, gpu.StatusRunning)
	if got.Attempts != 0 || got.Preemptions != 1 || got.Preempting {
		t.Fatalf("after preemption: attempts %d, preemptions %d, preempting %v; want 0, 1, false", got.Attempts, got.Preemptions, got.Preempting)
	}

	// The bound: a second urgent job waits for the low one.
	high2 := b.enqueue(gpu.EnqueueRequest{Payload: "exit 0", Priority: 10})
	b.pastMinRun(low.ID, 2*time.Minute)
	if j := b.job(low.ID); j.Status != gpu.StatusRunning || j.Preempting || j.Preemptions != 1 {
		t.Fatalf("preempted beyond the bound: %+v", j)
	}
	if j := b.job(high2.ID); j.Status != gpu.StatusQueued {
		t.Fatalf("second high job is %s, want queued behind the low one", j.Status)
	}
	b.release("low")
	done := b.waitStatus(low.ID, gpu.StatusSucceeded)
	if done.Attempts != 0 || done.Preemptions != 1 {
		t.Fatalf("finished with attempts %d, preemptions %d; want 0, 1", done.Attempts, done.Preemptions)
	}
	b.waitStatus(high2.ID, gpu.StatusSucceeded)
	want := []string{low.ID, high.ID, low.ID, high2.ID}
	if got := rec.list(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("start order %v, want %v", got, want)
	}
}

// TestNotPreemptible: a job enqueued without preemptible runs to its end
// however urgent the job waiting behind it.
func TestNotPreemptible(t *testing.T) {
	b := setup(t, setupOpts{workers: 1, preemptMinRun: time.Minute})
	low := b.enqueue(gpu.EnqueueRequest{Payload: b.gate("low"), Priority: 0})
	b.waitStatus(low.ID, gpu.StatusRunning)
	high := b.enqueue(gpu.EnqueueRequest{Payload: "exit 0", Priority: gpu.MaxPriority})
	b.pastMinRun(low.ID, 2*time.Minute)
	if j := b.job(low.ID); j.Status != gpu.StatusRunning || j.Preempting {
		t.Fatalf("non-preemptible job was preempted: %+v", j)
	}
	b.release("low")
	b.waitStatus(low.ID, gpu.StatusSucceeded)
	b.waitStatus(high.ID, gpu.StatusSucceeded)
}

// TestPreemptMinRun: a preemptible job is not preempted before it has
// run PreemptMinRun, and is once it has.
func TestPreemptMinRun(t *testing.T) {
	b := setup(t, setupOpts{workers: 1, preemptMinRun: time.Minute})
	low := b.enqueue(gpu.EnqueueRequest{Payload: b.gate("low"), Priority: 1, Preemptible: true})
	b.waitStatus(low.ID, gpu.StatusRunning)
	high := b.enqueue(gpu.EnqueueRequest{Payload: "exit 0", Priority: 10})
	b.pastMinRun(low.ID, 30*time.Second)
	if j := b.job(low.ID); j.Status != gpu.StatusRunning || j.Preempting {
		t.Fatalf("preempted before the minimum run time: %+v", j)
	}
	if j := b.job(high.ID); j.Status != gpu.StatusQueued {
		t.Fatalf("high job is %s, want queued", j.Status)
	}
	b.pastMinRun(low.ID, 31*time.Second)
	b.waitStatus(high.ID, gpu.StatusSucceeded)
	if j := b.job(low.ID); j.Preemptions != 1 || j.Attempts != 0 {
		t.Fatalf("after the minimum run time: preemptions %d, attempts %d; want 1, 0", j.Preemptions, j.Attempts)
	}
	b.release("low")
	b.waitStatus(low.ID, gpu.StatusSucceeded)
}

// TestPreemptionFaults: the next write to gpu_jobs after the clock passes
// the minimum run time (the sweep's mark, or a heartbeat or completion
// racing it) fails once: refused, dropped, or landed with an error
// answer. Sweeps go on as ticks would; the low job is still preempted at
// most once, uses no attempt, and both jobs finish.
func TestPreemptionFaults(t *testing.T) {
	faults := jobWriteFaults("findAndModify")
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			b := setup(t, setupOpts{workers: 1, preemptMinRun: time.Minute})
			low := b.enqueue(gpu.EnqueueRequest{Payload: b.gate("low"), Priority: 1, Preemptible: true})
			b.waitStatus(low.ID, gpu.StatusRunning)
			high := b.enqueue(gpu.EnqueueRequest{Payload: "exit 0", Priority: 10})
			b.clock.Advance(2 * time.Minute)
			after := b.clock.Now()
			b.waitFor("a heartbeat after the clock moved", func() bool {
				j := b.job(low.ID)
				return j.HeartbeatAt != nil && j.HeartbeatAt.After(after)
			})
			fault(t, b.st)
			b.waitFor("the high job to finish", func() bool {
				_, _, _ = b.d.Sweep(b.ctx) // a failed sweep is the next tick's
				return b.job(high.ID).Status == gpu.StatusSucceeded
			})
			b.release("low")
			b.waitFor("the low job to finish", func() bool {
				_, _, _ = b.d.Sweep(b.ctx)
				return b.job(low.ID).Status == gpu.StatusSucceeded
			})
			if j := b.job(low.ID); j.Attempts != 0 || j.Preemptions != 1 {
				t.Fatalf("low job: attempts %d, preemptions %d; want 0, 1", j.Attempts, j.Preemptions)
			}
		})
	}
}

// TestPreemptionByUsage: preemption across tenants goes by the usage a
// free slot goes by. Tenant h used the one slot for ten minutes; then v's
// preemptible job runs and h queues an urgent one. h holds no slot (the
// old rule, running slots against the share, would preempt v), but h is
// ahead of v by usage, so v's job is not preempted and h's waits.
func TestPreemptionByUsage(t *testing.T) {
	b := setup(t, setupOpts{workers: 1, preemptMinRun: time.Minute})
	heavy := b.enqueue(gpu.EnqueueRequest{Tenant: "h", Payload: b.gate("heavy")})
	b.waitStatus(heavy.ID, gpu.StatusRunning)
	b.clock.Advance(10 * time.Minute)
	b.release("heavy")
	b.waitStatus(heavy.ID, gpu.StatusSucceeded)

	low := b.enqueue(gpu.EnqueueRequest{Tenant: "v", Payload: b.gate("low"), Priority: 1, Preemptible: true})
	b.waitStatus(low.ID, gpu.StatusRunning)
	high := b.enqueue(gpu.EnqueueRequest{Tenant: "h", Payload: "exit 0", Priority: 10})
	b.pastMinRun(low.ID, 2*time.Minute)
	if j := b.job(low.ID); j.Status != gpu.StatusRunning || j.Preempting {
		t.Errorf("v's job is %s (preempting %v) for h's urgent one; want it running: h is ahead by usage (600 slot-seconds against 120)", j.Status, j.Preempting)
	}
	b.release("low")
	b.waitStatus(low.ID, gpu.StatusSucceeded)
	b.waitStatus(high.ID, gpu.StatusSucceeded)
}

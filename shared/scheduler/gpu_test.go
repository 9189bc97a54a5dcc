package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// fakeGPU stands in for shared/gpu's dispatcher, which has its own tests
// (and tests/local_gpu_test.go runs the two together over real workers):
// the scheduler's side of the contract is what it hands over and what it
// reads back, and this double lets a test end a job with any status and
// lose an enqueue's answer at will.
type fakeGPU struct {
	mu     sync.Mutex
	runs   []string // "runID payload" per EnqueueRun call
	jobs   map[string]*schedule.GPUJobState
	sweeps int
	// failEnqueue fails that many EnqueueRun calls without queuing;
	// loseEnqueue queues the job and then fails that many calls.
	failEnqueue, loseEnqueue int
	invalid                  bool
}

func newFakeGPU() *fakeGPU { return &fakeGPU{jobs: map[string]*schedule.GPUJobState{}} }

func (f *fakeGPU) EnqueueRun(_ context.Context, runID string, t schedule.GPUTarget) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, runID+" "+t.Payload)
	if f.invalid {
		return "", fmt.Errorf("fake gpu: payload too big: %w", schedule.ErrInvalidGPUTarget)
	}
	if f.failEnqueue > 0 {
		f.failEnqueue--
		return "", errors.New("fake gpu: connection refused")
	}
	id := schedule.GPUJobID(runID)
	if f.jobs[id] == nil {
		f.jobs[id] = &schedule.GPUJobState{Status: "queued"}
	}
	if f.loseEnqueue > 0 {
		f.loseEnqueue--
		return "", errors.New("fake gpu: answer lost")
	}
	return id, nil
}

func (f *fakeGPU) Sweep(context.Context) (int, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweeps++
	return 2, 1, nil
}

func (f *fakeGPU) RunJob(_ context.Context, id string) (schedule.GPUJobState, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.jobs[id]
	if !ok {
		return schedule.GPUJobState{}, false, nil
	}
	return *st, true, nil
}

// end ends job id with status and, when exit >= 0, that exit code.
func (f *fakeGPU) end(t *testing.T, id, status string, exit int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.jobs[id]
	if st == nil {
		t.Fatalf("no gpu job %s (have %v)", id, f.jobs)
	}
	st.Status = status
	if exit >= 0 {
		st.ExitCode = &exit
	}
	st.Output = "gs://bucket/outputs/" + id + "/"
}

func (f *fakeGPU) jobCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.jobs)
}

// gpuBundle is a bundle with a fake GPU pool, polled on every sweep.
func gpuBundle(t *testing.T) (*bundle, *fakeGPU) {
	g := newFakeGPU()
	b := setup(t, func(c *scheduler.Config) { c.GPU = g; c.GPUPoll = time.Second })
	return b, g
}

var gpuTarget = schedule.Target{Type: schedule.TargetGPU, GPU: &schedule.GPUTarget{Payload: "train"}}

// tickAt moves the clock to t and ticks.
func (b *bundle) tickAt(t *testing.T, at time.Time) *scheduler.Summary {
	t.Helper()
	b.clock.Set(at)
	return b.tick(t)
}

func TestGPUTarget(t *testing.T) {
	const run1 = "gpu@20260302T090100Z"
	t.Run("hands the run to the pool and finishes it from the job", func(t *testing.T) {
		b, g := gpuBundle(t)
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget})
		sum := b.tickAt(t, t0.Add(time.Minute+time.Second))
		if len(g.runs) != 1 || g.runs[0] != run1+" train" || g.sweeps != 1 {
			t.Errorf("dispatcher saw runs %v and %d sweeps", g.runs, g.sweeps)
		}
		if sum.GPURequeued != 2 || sum.GPUDead != 1 {
			t.Errorf("summary gpu requeued %d dead %d, want 2 and 1", sum.GPURequeued, sum.GPUDead)
		}
		r := b.runs(t, "gpu")[0]
		if r.Status != schedule.RunRunning || r.GPUJob != "run-"+run1 || r.Output != "gpu job run-"+run1 {
			t.Fatalf("while the job is queued: run %+v, want running with its job", r)
		}
		// Still queued: the sweep looks and leaves it running.
		b.tickAt(t, t0.Add(time.Minute+5*time.Second))
		if r := b.runs(t, "gpu")[0]; r.Status != schedule.RunRunning {
			t.Fatalf("job queued, run %+v", r)
		}
		g.end(t, "run-"+run1, "succeeded", 0)
		b.tickAt(t, t0.Add(time.Minute+10*time.Second))
		r = b.runs(t, "gpu")[0]
		if r.Status != schedule.RunSucceeded || r.ExitCode == nil || *r.ExitCode != 0 || !strings.Contains(r.Output, "exit 0 gs://") {
			t.Errorf("after the job succeeded: run %+v", r)
		}
	})
	t.Run("a job that exits 3 fails the run with its exit code and is retried", func(t *testing.T) {
		b, g := gpuBundle(t)
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "0 12 * * *", Target: gpuTarget,
			Retry: schedule.Retry{MaxAttempts: 2, Backoff: schedule.Duration(time.Second)}})
		noon := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
		b.tickAt(t, noon.Add(time.Second))
		first := "gpu@20260302T120000Z"
		g.end(t, "run-"+first, "failed", 3)
		b.tickAt(t, noon.Add(5*time.Second))
		runs := b.runs(t, "gpu")
		if len(runs) != 2 {
			t.Fatalf("runs %v, want the failed run and its retry", fireTimesOf(runs))
		}
		if r := runs[0]; r.Status != schedule.RunFailed || r.ExitCode == nil || *r.ExitCode != 3 || !strings.Contains(r.Error, "exited 3") {
			t.Errorf("failed run %+v, want failed with exit code 3", r)
		}
		// The retry is due after its backoff; the sweep recovers it (no
		// execution plane here) and it gets its own job.
		b.tickAt(t, noon.Add(2*time.Minute))
		b.eng.Wait()
		if g.jobCount() != 2 {
			t.Fatalf("gpu jobs %v, want one per attempt", g.runs)
		}
		g.end(t, "run-"+first+"-a2", "succeeded", 0)
		b.tickAt(t, noon.Add(2*time.Minute+5*time.Second))
		runs = b.runs(t, "gpu")
		if runs[1].Status != schedule.RunSucceeded || runs[1].Attempt != 2 {
			t.Errorf("retry %+v, want attempt 2 succeeded", runs[1])
		}
		if !runs[1].BatchAt.Equal(runs[0].CreatedAt) {
			t.Errorf("retry's batchAt %s, want its first attempt's createdAt %s", runs[1].BatchAt, runs[0].CreatedAt)
		}
	})
	t.Run("a cancelled job fails the run without a retry", func(t *testing.T) {
		b, g := gpuBundle(t)
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget, Retry: schedule.Retry{MaxAttempts: 3}})
		b.tickAt(t, t0.Add(time.Minute+time.Second))
		g.end(t, "run-"+run1, "cancelled", -1)
		b.tickAt(t, t0.Add(time.Minute+5*time.Second))
		runs := b.runs(t, "gpu")
		if len(runs) != 1 || runs[0].Status != schedule.RunFailed || !strings.Contains(runs[0].Error, "cancelled") {
			t.Errorf("runs %+v, want one failed run that says cancelled", runs)
		}
	})
	t.Run("a lost enqueue answer makes one job", func(t *testing.T) {
		b, g := gpuBundle(t)
		g.loseEnqueue = 1
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget, Retry: schedule.Retry{MaxAttempts: 3}})
		b.tickAt(t, t0.Add(time.Minute+time.Second))
		if g.jobCount() != 1 || len(g.runs) != 2 {
			t.Fatalf("enqueue calls %v, jobs %d: want the call repeated and one job", g.runs, g.jobCount())
		}
		if r := b.runs(t, "gpu")[0]; r.Status != schedule.RunRunning {
			t.Fatalf("run %+v, want running on its one job", r)
		}
	})
	t.Run("a job never queued is queued by the sweep once the executor is gone", func(t *testing.T) {
		b, g := gpuBundle(t)
		g.failEnqueue = 3 // every try of the executor
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget, LeaseTTL: schedule.Duration(3 * time.Second)})
		b.tickAt(t, t0.Add(time.Minute+time.Second))
		if g.jobCount() != 0 {
			t.Fatalf("jobs %d, want none yet", g.jobCount())
		}
		if r := b.runs(t, "gpu")[0]; r.Status != schedule.RunRunning || r.GPUJob == "" {
			t.Fatalf("run %+v, want running with its job id", r)
		}
		// Past the claim's sweepAt (lease 3s + skew); the job lease was
		// released by the executor, so the sweep queues the job.
		b.tickAt(t, t0.Add(time.Minute+30*time.Second))
		if g.jobCount() != 1 {
			t.Fatalf("jobs %d after the sweep, want 1 (calls %v)", g.jobCount(), g.runs)
		}
		g.end(t, "run-"+run1, "failed", 2)
		b.tickAt(t, t0.Add(time.Minute+35*time.Second))
		if r := b.runs(t, "gpu")[0]; r.Status != schedule.RunFailed || r.ExitCode == nil || *r.ExitCode != 2 {
			t.Errorf("run %+v, want failed with exit 2", r)
		}
	})
	t.Run("a target the pool refuses fails the run at once", func(t *testing.T) {
		b, g := gpuBundle(t)
		g.invalid = true
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget})
		b.tickAt(t, t0.Add(time.Minute+time.Second))
		if r := b.runs(t, "gpu")[0]; r.Status != schedule.RunFailed || !strings.Contains(r.Error, "refuses") || len(g.runs) != 1 {
			t.Errorf("run %+v after %d enqueue calls, want failed after one", r, len(g.runs))
		}
	})
	t.Run("without a dispatcher the run fails clearly", func(t *testing.T) {
		b := setup(t)
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget})
		b.tickAt(t, t0.Add(time.Minute+time.Second))
		if runs := b.runs(t, "gpu"); runs[0].Status != schedule.RunFailed || !strings.Contains(runs[0].Error, "BATON_GPU_POOL") {
			t.Errorf("run %+v", runs[0])
		}
	})
}

// TestGPUOverlap: the job of a gpu-target run is the previous run still
// running, although nobody holds the job lease while it is in the pool.
func TestGPUOverlap(t *testing.T) {
	const run1 = "gpu@20260302T090100Z"
	t.Run("skip", func(t *testing.T) {
		b, g := gpuBundle(t)
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget, Overlap: schedule.OverlapSkip})
		b.tickAt(t, t0.Add(time.Minute+time.Second))
		b.tickAt(t, t0.Add(2*time.Minute+time.Second))
		runs := b.runs(t, "gpu")
		if len(runs) != 2 || runs[1].Status != schedule.RunSkipped || !strings.Contains(runs[1].Reason, "gpu job run-"+run1) {
			t.Fatalf("runs %+v, want the second fire skipped for the first one's job", runs)
		}
		if g.jobCount() != 1 {
			t.Errorf("jobs %d, want 1", g.jobCount())
		}
	})
	t.Run("buffer_one runs the buffered fire after the job ends", func(t *testing.T) {
		b, g := gpuBundle(t)
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget, Overlap: schedule.OverlapBufferOne})
		b.tickAt(t, t0.Add(time.Minute+time.Second))
		b.tickAt(t, t0.Add(2*time.Minute+time.Second))
		if s := b.getSchedule(t, "gpu"); !s.Misfire {
			t.Fatalf("misfire flag not set while the first job runs: runs %v", fireTimesOf(b.runs(t, "gpu")))
		}
		if g.jobCount() != 1 {
			t.Fatalf("jobs %d while the first runs, want 1", g.jobCount())
		}
		g.end(t, "run-"+run1, "succeeded", 0)
		b.tickAt(t, t0.Add(2*time.Minute+10*time.Second))
		b.eng.Wait()
		if g.jobCount() != 2 {
			t.Fatalf("jobs %d after the first ended, want the misfire's too (runs %v)", g.jobCount(), fireTimesOf(b.runs(t, "gpu")))
		}
		var misfire *schedule.Run
		for _, r := range b.runs(t, "gpu") {
			if r.Source == schedule.SourceMisfire {
				misfire = &r
			}
		}
		if misfire == nil || misfire.Status != schedule.RunRunning {
			t.Errorf("misfire run %+v, want running on its own job", misfire)
		}
	})
	t.Run("allow runs every fire at once", func(t *testing.T) {
		b, g := gpuBundle(t)
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: gpuTarget, Overlap: schedule.OverlapAllow})
		b.tickAt(t, t0.Add(time.Minute+time.Second))
		b.tickAt(t, t0.Add(2*time.Minute+time.Second))
		if g.jobCount() != 2 {
			t.Errorf("jobs %d, want 2", g.jobCount())
		}
	})
}

package scheduler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// fakeGPU stands in for shared/gpu's dispatcher, which has its own tests:
// the scheduler's side of the contract is only what it hands over.
type fakeGPU struct {
	mu     sync.Mutex
	runs   []string
	sweeps int
}

func (f *fakeGPU) EnqueueRun(_ context.Context, runID string, t schedule.GPUTarget) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, runID+" "+t.Payload)
	return "job-" + runID, nil
}

func (f *fakeGPU) Sweep(context.Context) (int, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweeps++
	return 2, 1, nil
}

func TestGPUTarget(t *testing.T) {
	target := schedule.Target{Type: schedule.TargetGPU, GPU: &schedule.GPUTarget{Payload: "train"}}
	t.Run("hands the run to the dispatcher and sweeps it", func(t *testing.T) {
		g := &fakeGPU{}
		b := setup(t, func(c *scheduler.Config) { c.GPU = g })
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: target})
		b.clock.Set(t0.Add(time.Minute + time.Second))
		sum := b.tick(t)
		if len(g.runs) != 1 || g.runs[0] != "gpu@20260302T090100Z train" || g.sweeps != 1 {
			t.Errorf("dispatcher saw runs %v and %d sweeps", g.runs, g.sweeps)
		}
		if sum.GPURequeued != 2 || sum.GPUDead != 1 {
			t.Errorf("summary gpu requeued %d dead %d, want 2 and 1", sum.GPURequeued, sum.GPUDead)
		}
		if runs := b.runs(t, "gpu"); runs[0].Status != schedule.RunSucceeded || runs[0].Output != "gpu job job-gpu@20260302T090100Z" {
			t.Errorf("run %+v", runs[0])
		}
	})
	t.Run("without a dispatcher the run fails clearly", func(t *testing.T) {
		b := setup(t)
		b.addSchedule(t, schedule.Schedule{ID: "gpu", Cron: "* * * * *", Target: target})
		b.clock.Set(t0.Add(time.Minute + time.Second))
		b.tick(t)
		if runs := b.runs(t, "gpu"); runs[0].Status != schedule.RunFailed || !strings.Contains(runs[0].Error, "BATON_GPU_POOL") {
			t.Errorf("run %+v", runs[0])
		}
	})
}

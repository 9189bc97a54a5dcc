package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestGPUTargetRunReflectsItsJob runs a gpu-target schedule end to end on
// `baton local`'s stack: Tick hands the run to Run through the Cloud Tasks
// emulator, Run enqueues the job on the GPU pool (a real worker process
// running the payload with sh), and the sweep finishes the run from the
// job. A payload that exits 3 leaves the run failed with exit code 3, its
// retry gets a job of its own, and while a job is in the pool its run says
// running.
func TestGPUTargetRunReflectsItsJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: 2 * time.Second, GPUWorkers: 1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	body := map[string]any{
		"id": "train", "cron": "@yearly",
		"target": map[string]any{"type": "gpu", "gpu": map[string]any{"payload": "sleep 2; echo giving up >&2; exit 3", "maxAttempts": 1}},
		"retry":  map[string]any{"maxAttempts": 2, "backoff": "1s"},
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	var first schedule.Run
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/train:trigger", nil, &first); code != http.StatusOK {
		t.Fatalf("trigger: %d", code)
	}

	type page struct{ Runs []schedule.Run }
	sawRunning := false
	var runs []schedule.Run
	for {
		if ctx.Err() != nil {
			t.Fatalf("runs did not settle: %+v", runs)
		}
		var p page
		if code := api(t, s.URL, s.Token, "GET", "/Schedules/schedules/train/runs", nil, &p); code != http.StatusOK {
			t.Fatalf("list runs: %d", code)
		}
		runs = p.Runs
		done := len(runs) == 2
		for _, r := range runs {
			if r.Status == schedule.RunRunning && r.GPUJob != "" {
				sawRunning = true
			}
			if r.Status != schedule.RunFailed || r.ExitCode == nil {
				done = false
			}
		}
		if done {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !sawRunning {
		t.Errorf("never saw a run running while its job was in the pool: %+v", runs)
	}
	jobs := map[string]bool{}
	for _, r := range runs {
		if *r.ExitCode != 3 || !strings.Contains(r.Error, "exited 3") || r.GPUJob != schedule.GPUJobID(r.ID) {
			t.Errorf("run %s: status %s exit %d error %q job %q, want failed with exit code 3 on its own job", r.ID, r.Status, *r.ExitCode, r.Error, r.GPUJob)
		}
		jobs[r.GPUJob] = true
		var job struct {
			Status   string
			ExitCode *int
		}
		if code := api(t, s.URL, s.Token, "GET", "/GPU/gpu/jobs/"+r.GPUJob, nil, &job); code != http.StatusOK || job.Status != "failed" || job.ExitCode == nil || *job.ExitCode != 3 {
			t.Errorf("gpu job %s: %d %+v, want failed with exit 3", r.GPUJob, code, job)
		}
	}
	if len(jobs) != 2 {
		t.Errorf("jobs %v, want one per attempt", jobs)
	}
}

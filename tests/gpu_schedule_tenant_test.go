package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestGPUScheduleTenantTypePreemptible drives a gpu-target schedule with a
// tenant, a gpuType and preemptible through `baton local`'s stack: the
// Schedules function, which knows the pool (BATON_GPU_POOL), refuses a
// gpuType the pool lacks and a malformed tenant with a 400 naming the field
// and stores nothing; a schedule with a type the pool has is accepted, and
// its triggered run's job (Tick → Cloud Tasks → Run → the GPU queue) carries
// all three fields. The pool's one worker is a closed port, so the job
// stays queued: the fields are what is checked, not the run's outcome.
func TestGPUScheduleTenantTypePreemptible(t *testing.T) {
	t.Setenv(config.EnvGPUPool, "http://127.0.0.1:1=1@nvidia-l4")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: 2 * time.Second})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	gpuSchedule := func(id string, gpu map[string]any) map[string]any {
		gpu["payload"] = "true"
		return map[string]any{"id": id, "cron": "@yearly", "target": map[string]any{"type": "gpu", "gpu": gpu}}
	}
	for i, tc := range []struct {
		name  string
		gpu   map[string]any
		field string
	}{
		{"type the pool lacks", map[string]any{"gpuType": "nvidia-h100"}, "target.gpu.gpuType"},
		{"tenant with =", map[string]any{"tenant": "a=b"}, "target.gpu.tenant"},
		{"tenant too long", map[string]any{"tenant": strings.Repeat("t", 64)}, "target.gpu.tenant"},
	} {
		// Each case its own id, so one wrongly stored does not fail the next.
		id := fmt.Sprintf("refused-%d", i)
		var e struct {
			Error struct{ Field, Message string } `json:"error"`
		}
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", gpuSchedule(id, tc.gpu), &e); code != http.StatusBadRequest || e.Error.Field != tc.field {
			t.Errorf("%s: HTTP %d naming %q (%s); want 400 naming %s", tc.name, code, e.Error.Field, e.Error.Message, tc.field)
		}
		if code := api(t, s.URL, s.Token, "GET", "/Schedules/schedules/"+id, nil, nil); code != http.StatusNotFound {
			t.Errorf("%s: GET the refused schedule: HTTP %d; want 404 (nothing written)", tc.name, code)
		}
	}

	body := gpuSchedule("train", map[string]any{"tenant": "research", "gpuType": "nvidia-l4", "preemptible": true})
	var created schedule.Schedule
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, &created); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if g := created.Target.GPU; g == nil || g.Tenant != "research" || g.GPUType != "nvidia-l4" || !g.Preemptible {
		t.Fatalf("created gpu target %+v; want tenant research, gpuType nvidia-l4, preemptible", created.Target.GPU)
	}
	// The console's schedule page shows them too.
	res, err := http.Get(s.URL + "/console/schedules/train")
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "tenant research, type nvidia-l4, preemptible") {
		t.Errorf("console schedule page: HTTP %d, lacks %q:\n%s", res.StatusCode, "tenant research, type nvidia-l4, preemptible", page)
	}
	var run schedule.Run
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/train:trigger", nil, &run); code != http.StatusOK {
		t.Fatalf("trigger: %d", code)
	}
	jobID := schedule.GPUJobID(run.ID)
	var job struct {
		Status, Tenant, GPUType string
		Preemptible             bool
	}
	for {
		if ctx.Err() != nil {
			t.Fatalf("the run's job %s was never enqueued", jobID)
		}
		if api(t, s.URL, s.Token, "GET", "/GPU/gpu/jobs/"+jobID, nil, &job) == http.StatusOK {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if job.Tenant != "research" || job.GPUType != "nvidia-l4" || !job.Preemptible {
		t.Errorf("run's job %s: %+v; want tenant research, gpuType nvidia-l4, preemptible (the schedule's gpu target)", jobID, job)
	}
}

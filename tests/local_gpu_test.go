package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
)

// TestLocalGPUPool enqueues jobs through the GPU function of the local stack,
// as `baton gpu enqueue` would, and waits for the local workers (real
// processes on the CPU) to run them and report back through the API.
func TestLocalGPUPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1, GPUWorkers: 2})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	do := func(method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, s.URL+"/GPU"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}

	type job struct {
		ID, Status, Stdout, Output, Worker string
		ExitCode                           *int
	}
	var ids []string
	for i := 0; i < 4; i++ {
		var j job
		code := do("POST", "/gpu/jobs", `{"payload":"echo hello from $BATON_JOB_ID; sleep 0.2"}`, &j)
		if code/100 != 2 || j.ID == "" {
			t.Fatalf("enqueue: HTTP %d, job %+v", code, j)
		}
		ids = append(ids, j.ID)
	}
	workers := map[string]bool{}
	for _, id := range ids {
		var j job
		for j.Status != "succeeded" {
			if ctx.Err() != nil {
				t.Fatalf("job %s did not succeed: last state %+v", id, j)
			}
			if j.Status == "failed" || j.Status == "dead" {
				t.Fatalf("job %s ended %s: %+v", id, j.Status, j)
			}
			time.Sleep(50 * time.Millisecond)
			if code := do("GET", "/gpu/jobs/"+id, "", &j); code != 200 {
				t.Fatalf("get %s: HTTP %d", id, code)
			}
		}
		if want := "hello from " + id; !strings.Contains(j.Stdout, want) {
			t.Errorf("job %s stdout = %q, want it to contain %q", id, j.Stdout, want)
		}
		if j.ExitCode == nil || *j.ExitCode != 0 || !strings.HasPrefix(j.Output, "gs://") {
			t.Errorf("job %s: exitCode %v output %q, want 0 and a gs:// location", id, j.ExitCode, j.Output)
		}
		workers[j.Worker] = true
	}
	if len(workers) != 2 {
		t.Errorf("jobs ran on %d workers (%v), want both local workers used", len(workers), workers)
	}
}

package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
)

// TestForgedGPUCompletionRefused: a job's slot and epoch (its fence) are
// public in GET /gpu/jobs/{id}, and every worker in the cloud may call the
// GPUCallback function, so code running in one job could post another job's
// :complete with that fence and a made-up outcome. Before the dispatch
// secret, that marked the running job succeeded with "forged" stdout and
// took its slot away. Now the forgery is refused (403, or 409 if the fence
// moved), the job keeps running, and the outcome recorded is the one its
// own worker reports.
func TestForgedGPUCompletionRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1, GPUWorkers: 1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	do := func(method, path, body string, header http.Header, out any) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, s.URL+path, strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
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
		ID, Status, Stdout, Slot string
		Epoch                    int64
		ExitCode                 *int
	}
	get := func(id string) job {
		t.Helper()
		var j job
		if code := do("GET", "/GPU/gpu/jobs/"+id, "", nil, &j); code != http.StatusOK {
			t.Fatalf("get %s: HTTP %d", id, code)
		}
		return j
	}
	waitStatus := func(id, status string) job {
		t.Helper()
		for {
			j := get(id)
			if j.Status == status {
				return j
			}
			if ctx.Err() != nil {
				t.Fatalf("job %s never became %s: last state %+v", id, status, j)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}

	// The victim prints its real output at once and then waits for the
	// gate, so the forgery lands while it runs.
	gate := filepath.Join(t.TempDir(), "go")
	payload := fmt.Sprintf("echo real output; while [ ! -e %q ]; do sleep 0.02; done", gate)
	body, _ := json.Marshal(map[string]string{"id": "victim", "payload": payload})
	if code := do("POST", "/GPU/gpu/jobs", string(body), nil, nil); code != http.StatusCreated {
		t.Fatalf("enqueue victim: HTTP %d", code)
	}
	running := waitStatus("victim", "running")
	if running.Slot == "" || running.Epoch < 1 {
		t.Fatalf("running job shows no fence: %+v", running)
	}

	// The forger knows everything GET shows, but not the secret. It posts
	// to GPUCallback, the function workers may invoke; the operators' GPU
	// function does not serve callbacks at all.
	forged := fmt.Sprintf(`{"slot":%q,"epoch":%d,"exitCode":0,"stdout":"forged"}`, running.Slot, running.Epoch)
	if code := do("POST", "/GPU/gpu/jobs/victim:complete", forged, nil, nil); code != http.StatusMisdirectedRequest {
		t.Errorf(":complete on the operators' GPU function: HTTP %d, want 421 (callbacks are GPUCallback's)", code)
	}
	if code := do("POST", "/GPUCallback/gpu/jobs/victim:complete", forged, nil, nil); code != http.StatusForbidden && code != http.StatusConflict {
		t.Errorf("forged :complete without the secret: HTTP %d, want 403 or 409", code)
	}
	guess := http.Header{"Baton-Dispatch-Secret": {"guessed"}}
	if code := do("POST", "/GPUCallback/gpu/jobs/victim:complete", forged, guess, nil); code != http.StatusForbidden && code != http.StatusConflict {
		t.Errorf("forged :complete with a guessed secret: HTTP %d, want 403 or 409", code)
	}
	beat := fmt.Sprintf(`{"slot":%q,"epoch":%d}`, running.Slot, running.Epoch)
	if code := do("POST", "/GPUCallback/gpu/jobs/victim:heartbeat", beat, guess, nil); code != http.StatusForbidden && code != http.StatusConflict {
		t.Errorf("forged :heartbeat with a guessed secret: HTTP %d, want 403 or 409", code)
	}
	if j := get("victim"); j.Status != "running" || j.Stdout != "" {
		t.Errorf("after the forgeries the victim is %s with stdout %q, want still running with no outcome", j.Status, j.Stdout)
	}

	// A second job runs on the one worker only after the victim's real
	// completion has been handled, so once it succeeded the victim's
	// recorded outcome is final.
	if code := do("POST", "/GPU/gpu/jobs", `{"id":"after","payload":"true"}`, nil, nil); code != http.StatusCreated {
		t.Fatalf("enqueue after: HTTP %d", code)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitStatus("after", "succeeded")
	j := get("victim")
	if j.Status != "succeeded" || j.Stdout != "real output\n" || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Errorf("victim's recorded outcome: %s, exitCode %v, stdout %q; want succeeded, 0, the worker's own %q",
			j.Status, j.ExitCode, j.Stdout, "real output\n")
	}
}

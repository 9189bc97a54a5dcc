package functions_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/gpu"
)

// TestGPULogsEndToEnd runs real jobs on the local stack's GPU workers and
// reads what they printed back through GET /gpu/jobs/{id}/logs: a failed
// job's stderr and stdout, the attempt it came from, and the errors of a
// bad stream or attempt, an unknown job, a job whose output is not written
// yet, and the worker-callback function refusing the route.
func TestGPULogsEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1, GPUWorkers: 1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	get := func(path string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}
	enqueue := func(payload string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"payload": payload, "maxAttempts": 1})
		req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/GPU/gpu/jobs", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+s.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var j gpu.Job
		if err := json.NewDecoder(res.Body).Decode(&j); err != nil || j.ID == "" {
			t.Fatalf("enqueue: %d %v %+v", res.StatusCode, err, j)
		}
		return j.ID
	}

	slow := enqueue("sleep 3") // holds the one worker while it is checked below
	id := enqueue("echo out-$BATON_JOB_ATTEMPT; echo boom >&2; exit 1")

	// While the slow job runs its objects do not exist: 404 saying why.
	for {
		code, _, body := get("/GPU/gpu/jobs/" + slow)
		if code != 200 {
			t.Fatalf("get %s: %d %s", slow, code, body)
		}
		if strings.Contains(body, `"status":"running"`) || strings.Contains(body, `"status":"dispatched"`) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job %s never started: %s", slow, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, _, body := get("/GPU/gpu/jobs/" + slow + "/logs?stream=stderr")
	if code != http.StatusNotFound || !strings.Contains(body, "job "+slow+" has no stderr for attempt 1 yet: a worker writes it when the command ends") {
		t.Errorf("logs of a running job: %d %s, want 404 saying it is not written yet", code, body)
	}

	var job gpu.Job
	for !gpu.Terminal(job.Status) {
		if ctx.Err() != nil {
			t.Fatalf("job %s never finished: %+v", id, job)
		}
		time.Sleep(50 * time.Millisecond)
		_, _, body := get("/GPU/gpu/jobs/" + id)
		_ = json.Unmarshal([]byte(body), &job)
	}
	if job.Status != gpu.StatusFailed {
		t.Fatalf("job %s ended %s, want failed: %+v", id, job.Status, job)
	}

	for _, tc := range []struct{ query, want string }{
		{"?stream=stderr", "boom\n"},
		{"?stream=stdout", "out-1\n"},
		{"", "out-1\n"}, // stdout by default
		{"?stream=stderr&attempt=1", "boom\n"},
	} {
		code, h, body := get("/GPU/gpu/jobs/" + id + "/logs" + tc.query)
		if code != 200 || body != tc.want {
			t.Errorf("logs%s: %d %q, want 200 %q", tc.query, code, body, tc.want)
		}
		if ct := h.Get("Content-Type"); ct != "text/plain; charset=utf-8" || h.Get(gpu.LogAttemptHeader) != "1" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("logs%s headers: %v", tc.query, h)
		}
	}

	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/GPU/gpu/jobs/" + id + "/logs?stream=both", 400, `"field":"stream"`},
		{"/GPU/gpu/jobs/" + id + "/logs?attempt=0", 400, `"field":"attempt"`},
		{"/GPU/gpu/jobs/" + id + "/logs?attempt=x", 400, `"field":"attempt"`},
		{"/GPU/gpu/jobs/" + id + "/logs?stream=stderr&attempt=2", 404, "job " + id + " has no stderr for attempt 2 yet"},
		{"/GPU/gpu/jobs/no-such-job/logs", 404, `no GPU job \"no-such-job\"`},
		{"/GPU/gpu/jobs/..%2Foutputs/logs", 404, "no route"},
		{"/GPU/gpu/jobs/" + id + ":cancel/logs", 400, `"field":"id"`},
		{"/GPUCallback/gpu/jobs/" + id + "/logs", http.StatusMisdirectedRequest, "wrong_function"},
		{"/GPU/gpu/jobs/" + id + "/stdout", 404, "no route"},
	} {
		code, _, body := get(tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %s, want %d containing %s", tc.path, code, body, tc.code, tc.want)
		}
	}
}

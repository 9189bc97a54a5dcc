package functions

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
)

// TestGPURouteSplit: the operators' GPU function refuses the workers'
// callbacks and GPUCallback refuses everything else, each with a JSON 421
// wrong_function naming the function to call (not 404, which a worker
// would take for a stale fence), so an invoker grant on one of them
// reaches only its own routes. Both are mounted on one mux here, as
// `baton local` serves them.
func TestGPURouteSplit(t *testing.T) {
	mux, err := Mux(&Deps{Store: emutest.Store(t), Token: "tok", GPUPool: "http://127.0.0.1:1=1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error.Code, e.Error.Message
	}
	if code, _, _ := do("POST", "/GPU/gpu/jobs", `{"id":"j1","payload":"echo hi"}`); code != http.StatusCreated {
		t.Fatalf("enqueue on GPU: HTTP %d, want 201", code)
	}
	fence := `{"slot":"s0","epoch":1}`
	for _, tc := range []struct {
		method, path, body string
		want               int
		wantCode           string
		wantFn             string // the function the refusal names
	}{
		// The operators' function: callbacks are not here.
		{"POST", "/GPU/gpu/jobs/j1:heartbeat", fence, http.StatusMisdirectedRequest, gpu.CodeWrongFunction, "GPUCallback function"},
		{"POST", "/GPU/gpu/jobs/j1:complete", fence, http.StatusMisdirectedRequest, gpu.CodeWrongFunction, "GPUCallback function"},
		{"GET", "/GPU/gpu/jobs/j1", "", http.StatusOK, "", ""},
		{"GET", "/GPU/gpu/pool", "", http.StatusOK, "", ""},
		// The callback function: only callbacks. A callback reaches the
		// dispatcher (409: the job is not held under this fence), and the
		// operator routes are not here.
		{"POST", "/GPUCallback/gpu/jobs/j1:heartbeat", fence, http.StatusConflict, "", ""},
		{"POST", "/GPUCallback/gpu/jobs/j1:complete", fence, http.StatusConflict, "", ""},
		{"POST", "/GPUCallback/gpu/jobs", `{"payload":"echo hi"}`, http.StatusMisdirectedRequest, gpu.CodeWrongFunction, "call the GPU function"},
		{"GET", "/GPUCallback/gpu/jobs", "", http.StatusMisdirectedRequest, gpu.CodeWrongFunction, "call the GPU function"},
		{"GET", "/GPUCallback/gpu/jobs/j1", "", http.StatusMisdirectedRequest, gpu.CodeWrongFunction, "call the GPU function"},
		{"POST", "/GPUCallback/gpu/jobs/j1:cancel", "", http.StatusMisdirectedRequest, gpu.CodeWrongFunction, "call the GPU function"},
		{"GET", "/GPUCallback/gpu/pool", "", http.StatusMisdirectedRequest, gpu.CodeWrongFunction, "call the GPU function"},
	} {
		code, ecode, msg := do(tc.method, tc.path, tc.body)
		if code != tc.want || (tc.wantCode != "" && ecode != tc.wantCode) || !strings.Contains(msg, tc.wantFn) {
			t.Errorf("%s %s: HTTP %d (error code %q, message %q), want %d %q naming %q", tc.method, tc.path, code, ecode, msg, tc.want, tc.wantCode, tc.wantFn)
		}
	}
}

// TestMisdirectedWorkerKeepsItsJob: a real worker whose BATON_CONTROL_URL
// is the operators' GPU function (a URL still ending in /GPU, or an old
// worker revision during the upgrade) gets 421 to its heartbeats. It must
// keep running the job, not kill it at its first heartbeat as it does for
// a stale fence, and the job stays held by its slot.
func TestMisdirectedWorkerKeepsItsJob(t *testing.T) {
	var handler atomic.Value
	var beats atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ":heartbeat") {
			beats.Add(1)
		}
		handler.Load().(http.Handler).ServeHTTP(w, r)
	}))
	defer srv.Close()
	gate := filepath.Join(t.TempDir(), "go")
	ws := worker.New(worker.Config{Command: []string{"sh"}, ControlURL: srv.URL + "/GPU", Token: "tok",
		HeartbeatInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	wsrv := httptest.NewServer(ws)
	defer wsrv.Close()
	defer func() {
		// Opens the gate so the worker's command ends and the server can
		// close; a failure would show as that close hanging.
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Errorf("open the gate: %v", err)
		}
	}()
	mux, err := Mux(&Deps{Store: emutest.Store(t), Token: "tok", GPUPool: wsrv.URL + "=1"})
	if err != nil {
		t.Fatal(err)
	}
	handler.Store(mux)

	req, _ := http.NewRequest("POST", srv.URL+"/GPU/gpu/jobs", strings.NewReader(`{"id":"m1","payload":"while [ ! -e `+gate+` ]; do sleep 0.02; done"}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("enqueue: HTTP %d", resp.StatusCode)
	}
	deadline := time.Now().Add(30 * time.Second)
	for beats.Load() < 5 && ws.Stats().Stale == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for heartbeats (%d so far; stats %+v)", beats.Load(), ws.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := ws.Stats(); st.Stale != 0 || st.Runs != 1 || !ws.Busy() {
		t.Fatalf("after %d heartbeats to /GPU: stats %+v, busy %v; want the job still running, nothing stale", beats.Load(), st, ws.Busy())
	}
	req, _ = http.NewRequest("GET", srv.URL+"/GPU/gpu/jobs/m1", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var j gpu.Job
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		t.Fatal(err)
	}
	if j.Status != gpu.StatusDispatched || j.Slot != wsrv.URL+"#0" {
		t.Errorf("job %s on %q, want it still dispatched to %s#0", j.Status, j.Slot, wsrv.URL)
	}
}

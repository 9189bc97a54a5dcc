package worker_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
)

// syncBuffer is a bytes.Buffer the worker's goroutines may log to while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMisdirectedCallbacksKeepTheJob: a worker whose BATON_CONTROL_URL
// names the operators' GPU function (gpu.OperatorRoutes, on the Mongo
// emulator) gets 421 wrong_function to every callback. That says nothing
// about the job, so the worker keeps the command running past many
// heartbeats, logs an ERROR naming BATON_CONTROL_URL, and retries its
// completion instead of dropping it as stale.
func TestMisdirectedCallbacksKeepTheJob(t *testing.T) {
	pool, err := gpu.ParsePool("http://127.0.0.1:1=1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := gpu.New(gpu.Config{Store: emutest.Store(t), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	ops := gpu.NewRoutesHandler(d, gpu.OperatorRoutes)
	var beats, completes atomic.Int64
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, ":heartbeat"):
			beats.Add(1)
		case strings.HasSuffix(r.URL.Path, ":complete"):
			completes.Add(1)
		}
		ops.ServeHTTP(w, r)
	}))
	t.Cleanup(cp.Close)

	var logs syncBuffer
	ws := worker.New(worker.Config{Command: []string{"sh"}, ControlURL: cp.URL, HeartbeatInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	srv := httptest.NewServer(ws)
	t.Cleanup(srv.Close)
	gate := filepath.Join(t.TempDir(), "go")
	job := `{"jobId":"j1","attempt":1,"slot":"s#0","epoch":1,"lease":"20s","payload":"while [ ! -e ` + gate + ` ]; do sleep 0.02; done"}`
	if got := post(t, srv.URL, "", job); got != http.StatusAccepted {
		t.Fatalf("run: %d, want 202", got)
	}
	waitUntil(t, "five refused heartbeats", func() bool { return beats.Load() >= 5 || ws.Stats().Stale > 0 })
	if ws.Stats().Stale > 0 || !ws.Busy() {
		t.Fatalf("the command was stopped after %d heartbeats sent to the operators' routes; a misdirected callback is not a stale fence (stats %+v)", beats.Load(), ws.Stats())
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the completion retried", func() bool { return completes.Load() >= 2 || ws.Stats().Stale > 0 })
	if st := ws.Stats(); st.Stale != 0 || st.Killed != 0 {
		t.Errorf("stats %+v: want nothing stale or killed", st)
	}
	out := logs.String()
	if !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, config.EnvControlURL) || !strings.Contains(out, gpu.CodeWrongFunction) {
		t.Errorf("want an ERROR naming %s and the answer's code %s; log:\n%.2000s", config.EnvControlURL, gpu.CodeWrongFunction, out)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

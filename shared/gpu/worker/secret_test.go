package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
)

// TestCallbacksCarryTheDispatchSecret: the worker sends the secret it got
// with POST /run back on every heartbeat and on the completion, in
// gpu.SecretHeader and not in the body (bodies, with stdout, are what gets
// logged). The command does not see it: code in a job must not be able to
// act as the worker. The control plane is an httptest stand-in that
// records each callback.
func TestCallbacksCarryTheDispatchSecret(t *testing.T) {
	const secret = "s3cr3t-for-this-dispatch-only"
	type seen struct{ action, header, body string }
	var (
		mu    sync.Mutex
		calls []seen
		done  = make(chan struct{})
	)
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		action := r.URL.Path[strings.LastIndex(r.URL.Path, ":")+1:]
		mu.Lock()
		calls = append(calls, seen{action, r.Header.Get(gpu.SecretHeader), string(b)})
		mu.Unlock()
		w.Write([]byte(`{}`))
		if action == "complete" {
			close(done)
		}
	}))
	t.Cleanup(cp.Close)
	ws := worker.New(worker.Config{Command: []string{"sh"}, ControlURL: cp.URL, Logger: quiet, HeartbeatInterval: 50 * time.Millisecond})
	srv := httptest.NewServer(ws)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ws.Shutdown(ctx)
	})
	// The payload prints its environment, which ends up in the
	// completion's stdout: the secret must not be in it.
	req := gpu.RunRequest{JobID: "j1", Attempt: 1, Slot: "s#0", Epoch: 1, Payload: "sleep 1.3; env", Secret: secret}
	body, _ := json.Marshal(req)
	if got := post(t, srv.URL, "", string(body)); got != http.StatusAccepted {
		t.Fatalf("run: %d, want 202", got)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no completion reported")
	}
	mu.Lock()
	defer mu.Unlock()
	var beats int
	for _, c := range calls {
		if c.action == "heartbeat" {
			beats++
		}
		if c.header != secret {
			t.Errorf("%s sent %s %q, want the dispatch's secret", c.action, gpu.SecretHeader, c.header)
		}
		if strings.Contains(c.body, secret) {
			t.Errorf("%s body carries the secret (the command's environment, or the request): %s", c.action, c.body)
		}
	}
	if beats == 0 || calls[len(calls)-1].action != "complete" {
		t.Errorf("callbacks %v, want heartbeats and then the completion", calls)
	}
}

package worker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
)

// TestStopsWhenLeaseCannotBeRenewed: a control plane that accepts no
// heartbeat (here it answers 503 to every one) lets the job's lease run
// out, after which the sweep may give the job to another slot. The worker
// must stop its command by then and report it interrupted (requeued), not
// keep running it to the end: that would run the job on two slots at once.
// The control plane is an httptest stand-in (the edge under test is the
// worker's side of the protocol).
func TestStopsWhenLeaseCannotBeRenewed(t *testing.T) {
	completes := make(chan gpu.CompleteRequest, 1)
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, ":heartbeat"):
			http.Error(w, `{"error":{"code":"unavailable","message":"down"}}`, http.StatusServiceUnavailable)
		case strings.HasSuffix(r.URL.Path, ":complete"):
			var c gpu.CompleteRequest
			_ = json.NewDecoder(r.Body).Decode(&c)
			completes <- c
			w.Write([]byte(`{}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(cp.Close)
	ws := worker.New(worker.Config{Command: []string{"sh"}, ControlURL: cp.URL})
	srv := httptest.NewServer(ws)
	t.Cleanup(srv.Close)
	// The command would outlive its lease (600ms) many times over.
	job := `{"jobId":"j1","attempt":1,"slot":"s#0","epoch":1,"lease":"600ms","payload":"sleep 8"}`
	if got := post(t, srv.URL, "", job); got != http.StatusAccepted {
		t.Fatalf("run: %d, want 202", got)
	}
	var c gpu.CompleteRequest
	select {
	case c = <-completes:
	case <-time.After(30 * time.Second):
		t.Fatal("no completion reported")
	}
	if !c.Interrupted || c.ExitCode != -1 {
		t.Errorf("completion (-want,+got): -interrupted=true exit=-1 +interrupted=%v exit=%d (%s)", c.Interrupted, c.ExitCode, c.Error)
	}
	if s := ws.Stats(); s.Killed != 1 {
		t.Errorf("stats %+v, want the command killed", s)
	}
}

package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestStopsWhenLeaseCannotBeRenewed: a control plane that accepts no
// heartbeat (here it answers 503 to every one) lets the job's lease run
// out, after which the sweep may give the job to another slot. The worker
// must stop its command by then and report it interrupted (requeued), not
// keep running it to the end: that would run the job on two slots at once.
// The control plane is an httptest stand-in (the edge under test is the
// worker's side of the protocol).
func TestStopsWhenLeaseCannotBeRenewed(t *testing.T) {
	cp, completes := heartbeatsRefused(t)
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

// heartbeatsRefused is an httptest stand-in for the control plane that
// answers 503 to every heartbeat and passes each completion on.
func heartbeatsRefused(t *testing.T) (*httptest.Server, <-chan gpu.CompleteRequest) {
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
	return cp, completes
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// controlPlane is an httptest stand-in for the GPU API that answers each
// heartbeat with beat(n) (n counts them from 1) and records, in order,
// every heartbeat's answer and the completion.
type controlPlane struct {
	*httptest.Server
	mu        sync.Mutex
	events    []string // "heartbeat 200", "heartbeat 503", …, "complete"
	completes chan gpu.CompleteRequest
}

func newControlPlane(t *testing.T, beat func(n int) int) *controlPlane {
	cp := &controlPlane{completes: make(chan gpu.CompleteRequest, 1)}
	var beats int
	cp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, ":heartbeat"):
			cp.mu.Lock()
			beats++
			n := beats
			cp.mu.Unlock()
			status := beat(n)
			cp.note(fmt.Sprintf("heartbeat %d", status))
			if status != http.StatusOK {
				http.Error(w, `{"error":{"code":"unavailable","message":"down"}}`, status)
				return
			}
			w.Write([]byte(`{}`))
		case strings.HasSuffix(r.URL.Path, ":complete"):
			var c gpu.CompleteRequest
			_ = json.NewDecoder(r.Body).Decode(&c)
			cp.note("complete")
			select {
			case cp.completes <- c:
			default: // a repeat; the first is what the test reads
			}
			w.Write([]byte(`{}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(cp.Close)
	return cp
}

func (cp *controlPlane) note(e string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.events = append(cp.events, e)
}

func (cp *controlPlane) list() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]string(nil), cp.events...)
}

// completion waits for the worker's :complete; the deadline only stops a
// hung test.
func (cp *controlPlane) completion(t *testing.T) gpu.CompleteRequest {
	t.Helper()
	select {
	case c := <-cp.completes:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no completion reported")
		return gpu.CompleteRequest{}
	}
}

// runJob posts a job (sleep 20, far longer than any lease here) with the
// given lease and, unless zero, the claim's lease expiry.
func runJob(t *testing.T, ws *worker.Server, lease time.Duration, leaseUntil time.Time) {
	t.Helper()
	srv := httptest.NewServer(ws)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ws.Shutdown(ctx)
	})
	req := gpu.RunRequest{JobID: "j1", Attempt: 1, Slot: "s#0", Epoch: 1, Payload: "sleep 20",
		Lease: schedule.Duration(lease), LeaseUntil: leaseUntil}
	body, _ := json.Marshal(req)
	if got := post(t, srv.URL, "", string(body)); got != http.StatusAccepted {
		t.Fatalf("run: %d, want 202", got)
	}
}

// TestSelfFenceCountsFromTheClaim: the job's lease starts when the
// dispatcher claims it, before POST /run (which can take RunTimeout), so
// the worker's self-fence must count from the claim's lease expiry that
// the request carries, not from its receipt. Here the lease is 3 s but
// only 400 ms of it is left at receipt, and no heartbeat is ever accepted.
// A clock started at receipt would let the command run 2.7 s, past the
// first heartbeat (sent 1 s in); counted from the claim, the command is
// stopped for the lost lease before any heartbeat goes out.
func TestSelfFenceCountsFromTheClaim(t *testing.T) {
	cp := newControlPlane(t, func(int) int { return http.StatusServiceUnavailable })
	ws := worker.New(worker.Config{Command: []string{"sh"}, ControlURL: cp.URL, Logger: quiet})
	runJob(t, ws, 3*time.Second, time.Now().Add(400*time.Millisecond))
	c := cp.completion(t)
	if !c.Interrupted || !strings.Contains(c.Error, "no heartbeat was accepted") {
		t.Errorf("completion: interrupted=%v error=%q, want interrupted for the lost lease", c.Interrupted, c.Error)
	}
	if diff := cmp.Diff([]string{"complete"}, cp.list()); diff != "" {
		t.Errorf("control plane saw (-want,+got), want the command stopped before its first heartbeat:\n%s", diff)
	}
}

// TestSelfFenceCountsFromTheHeartbeatsSendTime: an accepted heartbeat
// extends the lease from when the dispatcher received it, so the worker's
// new deadline counts from when it sent the beat, not from the answer,
// which may be slow. Here the first beat (sent 200 ms in) is answered
// only 3 s later; every later one is refused. Counted from the send, the
// 4 s lease (3.6 s with the margin) runs out about 600 ms after the
// answer, a few 200 ms beats later; counted from the answer, it would run
// out 3.6 s after it, some 18 beats later.
func TestSelfFenceCountsFromTheHeartbeatsSendTime(t *testing.T) {
	cp := newControlPlane(t, func(n int) int {
		if n == 1 {
			time.Sleep(3 * time.Second)
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	ws := worker.New(worker.Config{Command: []string{"sh"}, ControlURL: cp.URL, Logger: quiet, HeartbeatInterval: 200 * time.Millisecond})
	runJob(t, ws, 4*time.Second, time.Now().Add(4*time.Second))
	c := cp.completion(t)
	if !c.Interrupted || !strings.Contains(c.Error, "no heartbeat was accepted") {
		t.Errorf("completion: interrupted=%v error=%q, want interrupted for the lost lease", c.Interrupted, c.Error)
	}
	events := cp.list()
	if len(events) < 2 || events[0] != "heartbeat 200" || events[len(events)-1] != "complete" {
		t.Fatalf("control plane saw %q, want the accepted heartbeat first and the completion last", events)
	}
	// Generous: a few beats are expected, 18 would mean the answer's time.
	if refused := len(events) - 2; refused > 8 {
		t.Errorf("%d refused heartbeats after the accepted one, want a few: the self-fence counted from the answer, not the send", refused)
	}
}

// TestSelfFenceGivesNoGrace: the stop grace (SIGTERM, then SIGKILL after
// StopGrace) is for cancels and preemptions. A stop because the lease is
// running out must kill the whole process group at once: a command that
// ignores SIGTERM would otherwise go on past the lease, while the sweep
// gives the job to another slot. The command here ignores SIGTERM and
// would leave a marker 4 s after it starts; StopGrace is far longer.
func TestSelfFenceGivesNoGrace(t *testing.T) {
	cp, completes := heartbeatsRefused(t)
	ws := worker.New(worker.Config{Command: []string{"sh"}, ControlURL: cp.URL, StopGrace: time.Minute})
	srv := httptest.NewServer(ws)
	t.Cleanup(srv.Close)
	marker := t.TempDir() + "/survived"
	// The subshell would outlive sh itself (which exec's WaitDelay kills
	// 2 s after the stop): only a kill of the whole group stops it.
	payload := fmt.Sprintf("trap '' TERM; (sleep 4; touch %s) & wait", marker)
	body, _ := json.Marshal(map[string]any{"jobId": "j1", "attempt": 1, "slot": "s#0", "epoch": 1, "lease": "600ms", "payload": payload})
	if got := post(t, srv.URL, "", string(body)); got != http.StatusAccepted {
		t.Fatalf("run: %d, want 202", got)
	}
	select {
	case c := <-completes:
		if !c.Interrupted {
			t.Fatalf("completion %+v, want interrupted", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no completion reported")
	}
	time.Sleep(5 * time.Second) // past when the marker would be written
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command's process group outlived the self-fencing stop: it got the grace")
	}
}

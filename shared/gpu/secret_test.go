package gpu_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
)

// recordingWorker is a test double at the network edge in the place of a
// worker: it keeps each POST /run (so the test can act as the worker, with
// the secret, or as a forger, without it) and answers 202, or 503 while
// refuse is set.
func recordingWorker(t *testing.T) (*httptest.Server, chan gpu.RunRequest, *atomic.Bool) {
	t.Helper()
	runs := make(chan gpu.RunRequest, 8)
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req gpu.RunRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		if refuse.Load() {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		runs <- req
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	return srv, runs, &refuse
}

func nextRun(t *testing.T, runs chan gpu.RunRequest) gpu.RunRequest {
	t.Helper()
	select {
	case req := <-runs:
		return req
	case <-time.After(30 * time.Second):
		t.Fatal("no POST /run reached the worker")
		return gpu.RunRequest{}
	}
}

// callAs is call with a dispatch secret in gpu.SecretHeader ("" sends
// none, as a worker that predates secrets does).
func (b *bundle) callAs(secret, method, path, body string) (apiAnswer, []byte) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.api.URL+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if secret != "" {
		req.Header.Set(gpu.SecretHeader, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code, Field string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return apiAnswer{Status: resp.StatusCode, Code: e.Error.Code, Field: e.Error.Field}, raw
}

// TestCallbackNeedsTheDispatchSecret: the fence is public (GET shows it),
// so a heartbeat or completion that names it but not the secret sent with
// POST /run is refused with 403 and changes nothing: not the job, and not
// the slot, which a completion would otherwise hand to the next job while
// the real one still runs. The worker's own callbacks, with the secret,
// work; a completion repeated without it after the job finished is refused
// too rather than answered with the outcome.
func TestCallbackNeedsTheDispatchSecret(t *testing.T) {
	front, runs, _ := recordingWorker(t)
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	b.enqueue(gpu.EnqueueRequest{ID: "held", Payload: "true"})
	run := nextRun(t, runs)
	if run.JobID != "held" || len(run.Secret) < 43 {
		t.Fatalf("POST /run: job %q secret %q, want held with a 32-byte base64url secret", run.JobID, run.Secret)
	}
	b.enqueue(gpu.EnqueueRequest{ID: "next", Payload: "true"})

	for _, secret := range []string{"", "wrong", run.Secret + "x"} {
		f := gpu.Fence{Slot: run.Slot, Epoch: run.Epoch, Secret: secret}
		if _, err := b.d.Heartbeat(b.ctx, "held", f); !errors.Is(err, gpu.ErrForbidden) {
			t.Errorf("heartbeat with secret %q: err=%v, want ErrForbidden", secret, err)
		}
		if _, err := b.d.Complete(b.ctx, "held", gpu.CompleteRequest{Fence: f, ExitCode: 0, Stdout: "forged"}); !errors.Is(err, gpu.ErrForbidden) {
			t.Errorf("complete with secret %q: err=%v, want ErrForbidden", secret, err)
		}
	}
	fence := `{"slot":"` + run.Slot + `","epoch":` + itoa(run.Epoch)
	for _, secret := range []string{"", "wrong"} {
		want := apiAnswer{Status: http.StatusForbidden, Code: gpu.CodePermissionDenied}
		if got, raw := b.callAs(secret, "POST", "/gpu/jobs/held:heartbeat", fence+`}`); got != want {
			t.Errorf("HTTP heartbeat with secret %q: %+v %s, want %+v", secret, got, raw, want)
		}
		if got, raw := b.callAs(secret, "POST", "/gpu/jobs/held:complete", fence+`,"exitCode":0,"stdout":"forged"}`); got != want {
			t.Errorf("HTTP complete with secret %q: %+v %s, want %+v", secret, got, raw, want)
		}
	}
	// A stale fence is still 409, secret or not: the worker must stop.
	if got, _ := b.callAs(run.Secret, "POST", "/gpu/jobs/held:heartbeat", `{"slot":"`+run.Slot+`","epoch":99}`); got.Status != http.StatusConflict {
		t.Errorf("heartbeat with a stale epoch and the secret: %d, want 409", got.Status)
	}

	if j := b.job("held"); j.Status != gpu.StatusDispatched || j.Stdout != "" || j.ExitCode != nil {
		t.Errorf("after the forgeries: %s exit %v stdout %q, want dispatched with no outcome", j.Status, j.ExitCode, j.Stdout)
	}
	slots, err := b.d.Slots(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || slots[0].JobID != "held" || slots[0].Epoch != run.Epoch {
		t.Errorf("slot after the forgeries: %+v, want it still holding held at epoch %d", slots, run.Epoch)
	}
	if j := b.job("next"); j.Status != gpu.StatusQueued {
		t.Errorf("next is %s, want queued: a forged completion handed the busy slot on", j.Status)
	}

	// The worker itself, with the secret.
	if j, err := b.d.Heartbeat(b.ctx, "held", run.Fence()); err != nil || j.Status != gpu.StatusRunning {
		t.Fatalf("heartbeat with the secret: %s, %v; want running", j.Status, err)
	}
	if got, raw := b.callAs(run.Secret, "POST", "/gpu/jobs/held:complete", fence+`,"exitCode":0,"stdout":"real"}`); got.Status != http.StatusOK {
		t.Fatalf("HTTP complete with the secret: %+v %s", got, raw)
	}
	if j := b.job("held"); j.Status != gpu.StatusSucceeded || j.Stdout != "real" {
		t.Errorf("held: %s stdout %q, want succeeded with the worker's stdout", j.Status, j.Stdout)
	}
	next := nextRun(t, runs)
	if next.JobID != "next" || next.Secret == "" || next.Secret == run.Secret {
		t.Errorf("hand-off: job %q, secret equal to the last one: %v; want next with a fresh secret", next.JobID, next.Secret == run.Secret)
	}
	// A repeat with the secret is accepted (a lost answer); without it,
	// refused.
	if _, err := b.d.Complete(b.ctx, "held", gpu.CompleteRequest{Fence: run.Fence()}); err != nil {
		t.Errorf("repeated completion with the secret: %v", err)
	}
	if _, err := b.d.Complete(b.ctx, "held", gpu.CompleteRequest{Fence: gpu.Fence{Slot: run.Slot, Epoch: run.Epoch}}); !errors.Is(err, gpu.ErrForbidden) {
		t.Errorf("repeated completion without the secret: err=%v, want ErrForbidden", err)
	}
}

// TestSecretIsNeverShown: neither the secret nor its hash leaves the
// server, nor a field for them: not in a marshalled Job, and not in any
// answer of the API (read, list, pool, or a callback's answer).
func TestSecretIsNeverShown(t *testing.T) {
	front, runs, _ := recordingWorker(t)
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	b.enqueue(gpu.EnqueueRequest{ID: "held", Payload: "true"})
	run := nextRun(t, runs)
	j := b.job("held")
	if j.SecretHash == "" || j.SecretHash == run.Secret {
		t.Fatalf("stored secretHash %q: want the hash, not empty and not the secret", j.SecretHash)
	}
	hash := j.SecretHash
	leaks := func(what string, raw []byte) {
		t.Helper()
		s := string(raw)
		if strings.Contains(s, run.Secret) || strings.Contains(s, hash) || strings.Contains(strings.ToLower(s), `"secret`) {
			t.Errorf("%s shows the secret or its hash: %s", what, raw)
		}
	}
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	leaks("json.Marshal(Job)", raw)
	fence := `{"slot":"` + run.Slot + `","epoch":` + itoa(run.Epoch) + `}`
	for _, c := range []struct{ secret, method, path, body string }{
		{"", "GET", "/gpu/jobs/held", ""},
		{"", "GET", "/gpu/jobs", ""},
		{"", "GET", "/gpu/jobs?status=dispatched", ""},
		{"", "GET", "/gpu/pool", ""},
		{"", "POST", "/gpu/jobs/held:heartbeat", fence},
		{run.Secret, "POST", "/gpu/jobs/held:heartbeat", fence},
	} {
		ans, raw := b.callAs(c.secret, c.method, c.path, c.body)
		if ans.Status/100 != 2 && ans.Status != http.StatusForbidden {
			t.Errorf("%s %s: %d %s", c.method, c.path, ans.Status, raw)
		}
		leaks(c.method+" "+c.path, raw)
	}
}

// TestRequeueClearsTheSecret: the secret belongs to one dispatch. When the
// job is taken back (a lost lease, a refusal) its hash goes with the
// fence, the next dispatch gets a new one, and the old worker's secret is
// worth nothing under the new fence.
func TestRequeueClearsTheSecret(t *testing.T) {
	front, runs, refuse := recordingWorker(t)
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	b.enqueue(gpu.EnqueueRequest{ID: "lost", Payload: "true", MaxAttempts: 2})
	first := nextRun(t, runs)

	// The lease runs out; the sweep requeues the job, and the worker
	// refuses the new dispatch, which gives it back unharmed.
	refuse.Store(true)
	b.clock.Advance(time.Minute)
	if _, _, err := b.d.Sweep(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := b.job("lost"); j.Status != gpu.StatusQueued || j.SecretHash != "" || j.Slot != "" {
		t.Errorf("requeued: %s slot %q secretHash %q, want queued with neither", j.Status, j.Slot, j.SecretHash)
	}

	refuse.Store(false)
	b.dispatchAfterBackoff()
	second := nextRun(t, runs)
	if second.Secret == first.Secret {
		t.Fatal("the second dispatch reused the first one's secret")
	}
	stale := gpu.Fence{Slot: second.Slot, Epoch: second.Epoch, Secret: first.Secret}
	if _, err := b.d.Heartbeat(b.ctx, "lost", stale); !errors.Is(err, gpu.ErrForbidden) {
		t.Errorf("the first worker's secret under the new fence: err=%v, want ErrForbidden", err)
	}
	if _, err := b.d.Heartbeat(b.ctx, "lost", first.Fence()); !errors.Is(err, gpu.ErrStaleFence) {
		t.Errorf("the first worker's own fence: err=%v, want ErrStaleFence", err)
	}

	// The lease runs out again: the job is dead, and keeps no hash.
	b.clock.Advance(time.Minute)
	if _, _, err := b.d.Sweep(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := b.job("lost"); j.Status != gpu.StatusDead || j.SecretHash != "" {
		t.Errorf("dead: %s secretHash %q, want dead with none", j.Status, j.SecretHash)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

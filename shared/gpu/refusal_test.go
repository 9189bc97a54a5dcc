package gpu_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
)

// refusingWorker is a test double at the network edge: an httptest server
// in the place of a worker that answers every POST /run with status and
// body, as a misconfigured service (IAM, a wrong URL) or a busy one would.
// onRun, when set, runs before the answer, with the count of /runs so far.
func refusingWorker(t *testing.T, status int, body string, onRun func(n int64)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/run" {
			http.NotFound(w, r)
			return
		}
		n := runs.Add(1)
		if onRun != nil {
			onRun(n)
		}
		http.Error(w, body, status)
	}))
	t.Cleanup(srv.Close)
	return srv, &runs
}

// dispatchAfterBackoff lets the refusing slot's backoff pass (on the
// test's clock) and dispatches again, as the next sweep would.
func (b *bundle) dispatchAfterBackoff() {
	b.t.Helper()
	b.clock.Advance(time.Second)
	if _, err := b.d.Dispatch(b.ctx); err != nil {
		b.t.Fatal(err)
	}
}

// TestPermanentRefusalUsesAnAttempt: a worker that answers 403 to every
// /run will never run the job, so each refusal uses an attempt and, with
// maxAttempts 2, the job ends dead after two sends with the worker's
// answer as its error, instead of being requeued forever. The slot is
// given back (after its backoff), not left holding the job.
func TestPermanentRefusalUsesAnAttempt(t *testing.T) {
	long := "access denied by policy " + strings.Repeat("x", 2000)
	front, runs := refusingWorker(t, http.StatusForbidden, long, nil)
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	b.enqueue(gpu.EnqueueRequest{ID: "forbidden", Payload: "true", MaxAttempts: 2})
	b.dispatchAfterBackoff()
	b.dispatchAfterBackoff() // the job is dead: nothing is sent

	j := b.job("forbidden")
	if n := runs.Load(); n != 2 || j.Status != gpu.StatusDead || j.Attempts != 2 {
		t.Fatalf("after %d sends: status=%s attempts=%d error=%.80q, want dead after 2 sends with 2 attempts", n, j.Status, j.Attempts, j.Error)
	}
	if want := "worker refused: 403 Forbidden: access denied by policy"; !strings.HasPrefix(j.Error, want) || len(j.Error) > 512 {
		t.Errorf("error (%d bytes) = %.100q…, want it to start %q and be bounded", len(j.Error), j.Error, want)
	}
	slots, err := b.d.Slots(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || slots[0].JobID != "" || (slots[0].State != "free" && slots[0].State != "backoff") {
		t.Errorf("slot after the refusals: %+v, want it free (or backing off) and holding no job", slots)
	}
}

// TestTransientRefusalUsesNoAttempt: 429 (a busy instance) is worth
// retrying, so however often the worker answers it, the job stays queued
// with no attempt used, past its maxAttempts.
func TestTransientRefusalUsesNoAttempt(t *testing.T) {
	front, runs := refusingWorker(t, http.StatusTooManyRequests, "busy", nil)
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	b.enqueue(gpu.EnqueueRequest{ID: "busy", Payload: "true", MaxAttempts: 2})
	for range 3 {
		b.dispatchAfterBackoff()
	}
	if j := b.job("busy"); runs.Load() != 4 || j.Status != gpu.StatusQueued || j.Attempts != 0 {
		t.Errorf("after %d sends: status=%s attempts=%d, want 4 sends and still queued with 0 attempts", runs.Load(), j.Status, j.Attempts)
	}
}

// TestPermanentRefusalIsFenced: the attempt a refusal uses is written only
// while the job is still dispatched under the refused send's fence and
// attempts. Here, while the first /run waits for its answer, the job's
// lease is swept (attempts 1) and the sweep's own dispatch is refused
// (attempts 2). The first 403 then arrives late: it must change nothing,
// neither use a third attempt nor write back its stale count.
func TestPermanentRefusalIsFenced(t *testing.T) {
	var b *bundle
	front, runs := refusingWorker(t, http.StatusForbidden, "no", func(n int64) {
		if n != 1 {
			return
		}
		b.clock.Advance(b.d.LeaseTTL() + time.Second)
		if _, _, err := b.d.Sweep(b.ctx); err != nil {
			t.Error(err)
		}
	})
	b = setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	b.enqueue(gpu.EnqueueRequest{ID: "raced", Payload: "true", MaxAttempts: 5})
	if j := b.job("raced"); runs.Load() != 2 || j.Status != gpu.StatusQueued || j.Attempts != 2 {
		t.Errorf("after %d sends: status=%s attempts=%d error=%q, want queued with 2 attempts (the sweep's and the second refusal's)", runs.Load(), j.Status, j.Attempts, j.Error)
	}
}

// TestRefusalChargesNoUsage: a worker that takes ten seconds (on the
// test's clock) to refuse a job never ran it, so the job's tenant is
// charged no fair-share usage for the slot's time; a slow or broken
// worker must not push its tenant back in the queue. Permanent and
// transient refusals alike.
func TestRefusalChargesNoUsage(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var b *bundle
			front, runs := refusingWorker(t, status, "no", func(int64) { b.clock.Advance(10 * time.Second) })
			b = setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
			b.enqueue(gpu.EnqueueRequest{ID: "slow-refusal", Tenant: "r", Payload: "true", MaxAttempts: 3}) // sent at once
			if runs.Load() != 1 {
				t.Fatalf("%d sends, want 1", runs.Load())
			}
			if got := usageOf(t, b, "r"); got != 0 {
				t.Errorf("usage %.3f slot-seconds after a refusal; want 0", got)
			}
		})
	}
}

package gpu_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestHeartbeatUnderContentionIsNotAStaleFence: a worker's heartbeat whose
// every attempt meets Firestore's Aborted (112) was not applied, and its
// fence still holds. The worker must hear "retry" (Aborted, 503), not a
// stale fence, which would make it stop a job it still owns; once the
// contention passes, the next beat lands.
func TestHeartbeatUnderContentionIsNotAStaleFence(t *testing.T) {
	front, runs, _ := recordingWorker(t)
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	b.enqueue(gpu.EnqueueRequest{ID: "held", Payload: "true"})
	run := nextRun(t, runs)
	f := gpu.Fence{Slot: run.Slot, Epoch: run.Epoch, Secret: run.Secret}

	emutest.FailCommandCode(t, b.st, mongostore.GPUJobsCollection, "alwaysOn", 112, "findAndModify")
	_, err := b.d.Heartbeat(b.ctx, "held", f)
	if err == nil || errors.Is(err, gpu.ErrStaleFence) || errors.Is(err, store.ErrStaleFence) {
		t.Fatalf("heartbeat under endless 112s = %v; want a retryable error, not a stale fence", err)
	}
	if !errors.Is(err, store.ErrContended) || errcode.Code(err) != errcode.Aborted {
		t.Errorf("heartbeat under endless 112s = %v (code %v); want ErrContended, Aborted", err, errcode.Code(err))
	}
	body := `{"slot":"` + run.Slot + `","epoch":` + itoa(run.Epoch) + `}`
	if got, raw := b.callAs(run.Secret, "POST", "/gpu/jobs/held:heartbeat", body); got.Status != http.StatusServiceUnavailable {
		t.Errorf("HTTP heartbeat under endless 112s: %+v %s; want 503 (retry)", got, raw)
	}
	emutest.FailCommandOff(t, b.st)
	if _, err := b.d.Heartbeat(b.ctx, "held", f); err != nil {
		t.Errorf("heartbeat after the contention: %v; want it to land (the fence held all along)", err)
	}
}

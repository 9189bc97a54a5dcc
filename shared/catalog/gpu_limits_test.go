package catalog_test

import (
	"net/http"
	"testing"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestGPUTargetPriorityOverQueueLimit: a gpu target whose priority the GPU
// queue refuses (above gpu.MaxPriority, 1000) must be a 400 naming the
// field at create, with nothing stored, not a schedule whose every run
// fails at enqueue.
func TestGPUTargetPriorityOverQueueLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPost, "/schedules", `{"id":"g","cron":"* * * * *","target":{"type":"gpu","gpu":{"payload":"true","priority":1001}}}`)
	if res.Status != http.StatusBadRequest || res.apiError(t).Field != "target.gpu.priority" {
		t.Fatalf("create (-want,+got): -400 target.gpu.priority +%d %s", res.Status, res.Body)
	}
	if n := b.count(t, schedule.SchedulesCollection); n != 0 {
		t.Errorf("%d schedules stored after a refused create, want 0", n)
	}
	res = b.do(t, http.MethodPost, "/schedules", `{"id":"g","cron":"* * * * *","target":{"type":"gpu","gpu":{"payload":"true","priority":1000}}}`)
	if res.Status != http.StatusCreated {
		t.Fatalf("create at the limit: status %d, body %s", res.Status, res.Body)
	}
}

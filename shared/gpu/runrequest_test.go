package gpu_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/baton-cron/baton/shared/gpu"
)

// TestRunCarriesTheClaimsLease: POST /run tells the worker when the job's
// lease, set at the claim before the request went out, runs out, so the
// worker's self-fence counts from the claim and not from its receipt. The
// worker is a test double at the network edge that keeps the request and
// accepts it.
func TestRunCarriesTheClaimsLease(t *testing.T) {
	got := make(chan gpu.RunRequest, 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req gpu.RunRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		got <- req
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(front.Close)
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	b.enqueue(gpu.EnqueueRequest{ID: "leased", Payload: "true"})
	req := <-got
	j := b.job("leased")
	if j.LeaseUntil == nil || !req.LeaseUntil.Equal(*j.LeaseUntil) || req.Lease.D() != b.d.LeaseTTL() {
		t.Errorf("run request: leaseUntil=%v lease=%s; job leaseUntil=%v, lease %s: want the job's own", req.LeaseUntil, req.Lease, j.LeaseUntil, b.d.LeaseTTL())
	}
}

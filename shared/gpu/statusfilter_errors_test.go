package gpu_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStatusFilterErrorBodies pins, byte for byte, the 400 answers for a bad
// ?status= on GET /gpu/jobs: typing gpu.JobStatus must not change a word of
// them (the wanted bodies were recorded from the code before the type was
// named), including the cut of a long echoed value.
func TestStatusFilterErrorBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, tc := range []struct{ name, query, want string }{
		{"unknown", "done", `{"error":{"code":"invalid_argument","message":"must be one of [queued dispatched running succeeded failed dead cancelled], not \"done\"","field":"status"}}` + "\n"},
		{"upper-case", "QUEUED", `{"error":{"code":"invalid_argument","message":"must be one of [queued dispatched running succeeded failed dead cancelled], not \"QUEUED\"","field":"status"}}` + "\n"},
		{"long", strings.Repeat("q", 200), `{"error":{"code":"invalid_argument","message":"must be one of [queued dispatched running succeeded failed dead cancelled], not \"qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq…\"","field":"status"}}` + "\n"},
	} {
		ans, raw := b.call("GET", "/gpu/jobs?status="+tc.query, "")
		if diff := cmp.Diff(tc.want, string(raw)); ans.Status != http.StatusBadRequest || diff != "" {
			t.Errorf("%s: status %d, body (-want,+got):\n%s", tc.name, ans.Status, diff)
		}
	}
}

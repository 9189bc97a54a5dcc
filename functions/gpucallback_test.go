package functions

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/emulator/emutest"
)

// TestGPURouteSplit: the operators' GPU function refuses the workers'
// callbacks and GPUCallback refuses everything else, each with a JSON 404,
// so an invoker grant on one of them reaches only its own routes. Both are
// mounted on one mux here, as `baton local` serves them.
func TestGPURouteSplit(t *testing.T) {
	mux, err := Mux(&Deps{Store: emutest.Store(t), Token: "tok", GPUPool: "http://127.0.0.1:1=1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error.Code
	}
	if code, _ := do("POST", "/GPU/gpu/jobs", `{"id":"j1","payload":"echo hi"}`); code != http.StatusCreated {
		t.Fatalf("enqueue on GPU: HTTP %d, want 201", code)
	}
	fence := `{"slot":"s0","epoch":1}`
	for _, tc := range []struct {
		method, path, body string
		want               int
		wantCode           string
	}{
		// The operators' function: callbacks are not here.
		{"POST", "/GPU/gpu/jobs/j1:heartbeat", fence, http.StatusNotFound, "not_found"},
		{"POST", "/GPU/gpu/jobs/j1:complete", fence, http.StatusNotFound, "not_found"},
		{"GET", "/GPU/gpu/jobs/j1", "", http.StatusOK, ""},
		{"GET", "/GPU/gpu/pool", "", http.StatusOK, ""},
		// The callback function: only callbacks. A callback reaches the
		// dispatcher (409: the job is not held under this fence), and the
		// operator routes are not here.
		{"POST", "/GPUCallback/gpu/jobs/j1:heartbeat", fence, http.StatusConflict, ""},
		{"POST", "/GPUCallback/gpu/jobs/j1:complete", fence, http.StatusConflict, ""},
		{"POST", "/GPUCallback/gpu/jobs", `{"payload":"echo hi"}`, http.StatusNotFound, "not_found"},
		{"GET", "/GPUCallback/gpu/jobs", "", http.StatusNotFound, "not_found"},
		{"GET", "/GPUCallback/gpu/jobs/j1", "", http.StatusNotFound, "not_found"},
		{"POST", "/GPUCallback/gpu/jobs/j1:cancel", "", http.StatusNotFound, "not_found"},
		{"GET", "/GPUCallback/gpu/pool", "", http.StatusNotFound, "not_found"},
	} {
		code, ecode := do(tc.method, tc.path, tc.body)
		if code != tc.want || (tc.wantCode != "" && ecode != tc.wantCode) {
			t.Errorf("%s %s: HTTP %d (error code %q), want %d %q", tc.method, tc.path, code, ecode, tc.want, tc.wantCode)
		}
	}
}

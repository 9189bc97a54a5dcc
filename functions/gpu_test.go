package functions

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/emulator/emutest"
)

// TestGPUFunction mounts the GPU function as Mux does and enqueues through
// it: the token is required and a job is created.
func TestGPUFunction(t *testing.T) {
	mux, err := Mux(&Deps{Store: emutest.Store(t), Token: "tok", GPUPool: "http://127.0.0.1:1=1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"tok", http.StatusCreated}} {
		req, _ := http.NewRequest("POST", srv.URL+"/GPU/gpu/jobs", strings.NewReader(`{"payload":"echo hi"}`))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("token %q: status %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}
}

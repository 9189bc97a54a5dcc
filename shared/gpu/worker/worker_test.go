package worker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu/worker"
)

func post(t *testing.T, url, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/run", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOneJobAtATime: while a job runs, a second /run gets 429 and is
// counted; /run needs the token; /healthz shows the running job. No
// control plane here (ControlURL empty), so there are no callbacks.
func TestOneJobAtATime(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	ws := worker.New(worker.Config{Command: []string{"sh"}, Token: "tok"})
	srv := httptest.NewServer(ws)
	t.Cleanup(srv.Close)
	job := `{"jobId":"j1","attempt":1,"slot":"s#0","epoch":1,"payload":"while [ ! -e ` + gate + ` ]; do sleep 0.02; done"}`
	if got := post(t, srv.URL, "", job); got != http.StatusUnauthorized {
		t.Fatalf("without token: %d, want 401", got)
	}
	if got := post(t, srv.URL, "tok", `{"jobId":"j0"}`); got != http.StatusBadRequest {
		t.Fatalf("without fence: %d, want 400", got)
	}
	if got := post(t, srv.URL, "tok", job); got != http.StatusAccepted {
		t.Fatalf("first: %d, want 202", got)
	}
	if got := post(t, srv.URL, "tok", strings.Replace(job, "j1", "j2", 1)); got != http.StatusTooManyRequests {
		t.Fatalf("second while busy: %d, want 429", got)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Busy bool   `json:"busy"`
		Job  string `json:"job"`
		GPU  string `json:"gpu"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if !h.Busy || h.Job != "j1" || h.GPU == "" {
		t.Errorf("healthz: %+v, want busy with j1 and a gpu line", h)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ws.Busy() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := ws.Stats(); s.Runs != 1 || s.Refused != 1 || s.MaxConcurrent != 1 || ws.Busy() {
		t.Errorf("stats %+v busy=%v, want 1 run, 1 refusal, then free", s, ws.Busy())
	}
}

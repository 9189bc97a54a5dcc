package worker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/gpu/worker"
	"github.com/baton-cron/baton/shared/httpapi"
)

// TestRunNamesTheMissingField: a /run without part of its fence is a 400
// whose error names the missing field, and nothing runs.
func TestRunNamesTheMissingField(t *testing.T) {
	ws := worker.New(worker.Config{Command: []string{"sh"}})
	srv := httptest.NewServer(ws)
	t.Cleanup(srv.Close)
	for body, field := range map[string]string{
		`{"slot":"s#0","epoch":1}`:   "jobId",
		`{"jobId":"j","epoch":1}`:    "slot",
		`{"jobId":"j","slot":"s#0"}`: "epoch",
	} {
		resp, err := http.Post(srv.URL+"/run", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error httpapi.Error }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Error.Field != field {
			t.Errorf("%s (-want,+got): -400 %s +%d %q", body, field, resp.StatusCode, e.Error.Field)
		}
	}
	if s := ws.Stats(); s.Runs != 0 {
		t.Errorf("stats %+v, want nothing run", s)
	}
}

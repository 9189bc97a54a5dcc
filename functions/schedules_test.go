package functions_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/functions"
)

// TestSchedulesDegrades checks what Schedules does with partial
// configuration: no database is 503 naming the variable on every route; a
// database without a lease bucket serves everything but :trigger.
func TestSchedulesDegrades(t *testing.T) {
	t.Parallel()
	serve := func(d *functions.Deps) string {
		d.Logger, d.Token = slog.New(slog.DiscardHandler), "tok"
		mux, err := functions.Mux(d)
		if err != nil {
			t.Fatalf("functions.Mux: %v", err)
		}
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	call := func(method, url, body string) (int, string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	noStore := serve(&functions.Deps{})
	if code, body := call("GET", noStore+"/Schedules/schedules", ""); code != 503 || !strings.Contains(body, "BATON_MONGO_URI") {
		t.Errorf("without a store: %d %s; want 503 naming BATON_MONGO_URI", code, body)
	}

	base := serve(&functions.Deps{Store: emutest.Store(t)}) + "/Schedules"
	if code, body := call("POST", base+"/schedules", `{"id":"a","cron":"@hourly","target":{"type":"builtin","builtin":{"name":"noop"}}}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := call("POST", base+"/schedules/a:trigger", ""); code != 503 || !strings.Contains(body, "unavailable") {
		t.Errorf("trigger without a bucket: %d %s; want 503", code, body)
	}
	if code, body := call("GET", base+"/schedules/a", ""); code != 200 {
		t.Errorf("get: %d %s", code, body)
	}
	if code, _ := call("GET", base+"/schedules", ""); code != 200 {
		t.Errorf("list at the function root: %d", code)
	}
	// The runs across schedules are served under the same function.
	if code, body := call("GET", base+"/runs?status=failed", ""); code != 200 || !strings.Contains(body, `"runs":[]`) {
		t.Errorf("GET /Schedules/runs: %d %s; want 200 and no runs", code, body)
	}
	if code, body := call("GET", base+"/runs/nope", ""); code != 404 || !strings.Contains(body, `\"nope\"`) {
		t.Errorf("GET /Schedules/runs/nope: %d %s; want 404 naming it", code, body)
	}
}

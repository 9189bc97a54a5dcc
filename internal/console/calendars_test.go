package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/httpapi"
)

// TestCalendarsPage: the console lists the calendars of the real
// Schedules handler (over the Mongo emulator), their days spelled out.
func TestCalendarsPage(t *testing.T) {
	st := emutest.Store(t)
	api := httptest.NewServer(httpapi.RequireToken("tok", catalog.NewHandler(catalog.New(st, catalog.Options{}), catalog.HandlerOptions{})))
	t.Cleanup(api.Close)
	req, _ := http.NewRequest(http.MethodPut, api.URL+"/calendars/holidays-de", strings.NewReader(`{"timeZone":"Europe/Berlin","dates":["2026-12-25"],"rules":[{"month":11,"weekday":"thu","nth":-1}]}`))
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("put: %v %v", res, err)
	}
	res.Body.Close()
	h, err := New(Config{SchedulesURL: api.URL, GPUURL: api.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/calendars", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, body)
	}
	for _, want := range []string{"holidays-de", "Europe/Berlin", "2026-12-25; every last thu of month 11", `aria-current="page">Calendars`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}

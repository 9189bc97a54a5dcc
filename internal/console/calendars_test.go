package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	req, _ = http.NewRequest(http.MethodPost, api.URL+"/schedules", strings.NewReader(`{"id":"late","cron":"30 23 * * *","excludeCalendars":["holidays-de"],"target":{"type":"builtin","builtin":{"name":"noop"}}}`))
	req.Header.Set("Authorization", "Bearer tok")
	if res, err = http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("create schedule: %v %v", res, err)
	}
	res.Body.Close()
	now := func() time.Time { return time.Date(2026, 12, 23, 12, 0, 0, 0, time.UTC) }
	h, err := New(Config{SchedulesURL: api.URL, GPUURL: api.URL, Token: "tok", Clock: now})
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
	// The schedule page marks the fire the Berlin calendar skips: 23:30
	// UTC on the 24th is the 25th in Berlin.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/schedules/late", nil))
	body, _ = io.ReadAll(rec.Body)
	page := string(body)
	i := strings.Index(page, "2026-12-24 23:30:00")
	j := strings.Index(page, "2026-12-25 23:30:00")
	if rec.Code != http.StatusOK || i < 0 || j < i || !strings.Contains(page[i:j], "skipped: excluded by calendar holidays-de") || strings.Contains(page[j:], "skipped:") {
		t.Errorf("schedule page (%d) does not mark exactly the 24 December fire:\n%s", rec.Code, page)
	}
	if !strings.Contains(page, "Excluded calendars") {
		t.Errorf("schedule page lacks its calendars")
	}
}

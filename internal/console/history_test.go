package console_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/internal/console"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestSchedulePageShowsHistory: the schedule page lists the history of
// changes, newest first, with who made each and the fields it changed. The
// API is the real catalog handler on the Mongo emulator.
func TestSchedulePageShowsHistory(t *testing.T) {
	st := emutest.Store(t)
	svc := catalog.New(st, catalog.Options{Validate: schedule.ValidateOptions{Builtins: []string{"noop"}}})
	api := httptest.NewServer(http.StripPrefix("/Schedules", catalog.NewHandler(svc, catalog.HandlerOptions{})))
	t.Cleanup(api.Close)
	ctx := catalog.WithActor(context.Background(), "ops@example.com")
	if _, err := svc.CreateJSON(ctx, []byte(`{"id":"h","cron":"30 2 * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Update(ctx, "h", map[string]any{"cron": "45 3 * * *"}, 0); err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Config{SchedulesURL: api.URL + "/Schedules", GPUURL: api.URL + "/GPU"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/schedules/h", nil))
	body, _ := io.ReadAll(rec.Body)
	page := html.UnescapeString(string(body))
	if rec.Code != http.StatusOK {
		t.Fatalf("schedule page: %d\n%s", rec.Code, page)
	}
	i := strings.Index(page, `id="history"`)
	if i < 0 {
		t.Fatalf("no history table on the schedule page:\n%s", page)
	}
	hist := page[i:]
	for _, want := range []string{"<td>2</td><td>update</td><td>ops@example.com</td>", `<code>cron</code>: "30 2 * * *" → "45 3 * * *"`, "<td>1</td><td>create</td>"} {
		if !strings.Contains(hist, want) {
			t.Errorf("history table lacks %q:\n%s", want, hist)
		}
	}
	if strings.Index(hist, "<td>2</td>") > strings.Index(hist, "<td>1</td>") {
		t.Error("history is not newest first")
	}
}

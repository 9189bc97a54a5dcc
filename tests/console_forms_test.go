package tests

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestConsoleBackfillAndTimedPause drives the schedule page's forms over
// HTTP (the browser test covers the page itself): a backfill dry run
// reports its fire times and writes nothing, the real one creates the
// runs, and a pause with "until" shows when the schedule resumes.
func TestConsoleBackfillAndTimedPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sched := map[string]any{"id": "forms", "cron": "*/10 * * * *", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar} // follows the 303 to the page, which shows the flash
	post := func(action string, form url.Values) string {
		t.Helper()
		res, err := client.PostForm(s.URL+"/console/schedules/forms/"+action, form)
		if err != nil {
			t.Fatalf("POST %s: %v", action, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", action, res.StatusCode, b)
		}
		return string(b)
	}
	to := time.Now().UTC().Truncate(time.Hour)
	from := to.Add(-time.Hour).Format(time.RFC3339)
	page := post("backfill", url.Values{"from": {from}, "to": {to.Format(time.RFC3339)}, "dryRun": {"true"}})
	if !strings.Contains(page, "dry run, 6 fire times, 0 already have a run; nothing written.") {
		t.Errorf("dry run flash missing; page:\n%s", page)
	}
	var none struct{ Runs []schedule.Run }
	api(t, s.URL, s.Token, "GET", "/Schedules/schedules/forms/runs", nil, &none)
	if len(none.Runs) != 0 {
		t.Fatalf("the dry run wrote %d runs", len(none.Runs))
	}
	if page := post("backfill", url.Values{"from": {from}, "to": {to.Format(time.RFC3339)}}); !strings.Contains(page, "6 fire times, 6 runs created, 0 already there.") {
		t.Errorf("backfill flash missing; page:\n%s", page)
	}
	if page := post("backfill", url.Values{"from": {"yesterday"}}); !strings.Contains(page, "nothing was written") {
		t.Errorf("a bad from was not refused; page:\n%s", page)
	}
	page = post("pause", url.Values{"reason": {"db migration"}, "until": {"2h"}})
	if !strings.Contains(page, `id="paused-until"`) || !strings.Contains(page, "db migration") || !strings.Contains(page, `<span id="paused-by">local</span>`) {
		t.Errorf("timed pause not shown; page:\n%s", page)
	}
}

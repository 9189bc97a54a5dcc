package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestCalendars is #16's calendar item on the local stack: a calendar
// over today excludes every fire of one schedule (each recorded skipped,
// naming the calendar) and admits every fire of another (onlyCalendars);
// a schedule naming an unknown calendar is refused with a 400 naming it.
func TestCalendars(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: time.Second})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	// Yesterday to tomorrow (UTC): today, whenever the test runs.
	now := time.Now().UTC()
	cal := map[string]any{"ranges": []map[string]string{{"from": now.AddDate(0, 0, -1).Format("2006-01-02"), "to": now.AddDate(0, 0, 1).Format("2006-01-02")}}}
	if code := api(t, s.URL, s.Token, "PUT", "/Schedules/calendars/today", cal, nil); code != http.StatusCreated {
		t.Fatalf("put calendar: %d", code)
	}
	noop := map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}
	var refused struct{ Error struct{ Field string } }
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", map[string]any{"id": "bad", "cron": "* * * * * *", "excludeCalendars": []string{"nope"}, "target": noop}, &refused); code != http.StatusBadRequest || refused.Error.Field != "excludeCalendars[0]" {
		t.Fatalf("unknown calendar: %d %+v; want 400 naming excludeCalendars[0]", code, refused)
	}
	for _, sc := range []map[string]any{
		{"id": "off", "cron": "* * * * * *", "excludeCalendars": []string{"today"}, "target": noop},
		{"id": "on", "cron": "* * * * * *", "onlyCalendars": []string{"today"}, "target": noop},
	} {
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sc, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", sc["id"], code)
		}
	}
	runsOf := func(id string) []schedule.Run {
		var page struct{ Runs []schedule.Run }
		api(t, s.URL, s.Token, "GET", "/Schedules/schedules/"+id+"/runs?pageSize=100", nil, &page)
		return page.Runs
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(runsOf("off")) < 3 || len(runsOf("on")) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 3 runs each within 30 s: off %d, on %d", len(runsOf("off")), len(runsOf("on")))
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, r := range runsOf("off") {
		if strings.HasSuffix(r.ID, "-missed") {
			continue
		}
		if r.Status != schedule.RunSkipped || r.Reason != "excluded by calendar today" {
			t.Errorf("off: run %s is %s (%q); want skipped, excluded by calendar today", r.ID, r.Status, r.Reason)
		}
	}
	for _, r := range runsOf("on") {
		if r.Status == schedule.RunSkipped && strings.HasPrefix(r.Reason, "not in onlyCalendars") {
			t.Errorf("on: run %s skipped by its calendar: %q", r.ID, r.Reason)
		}
	}
}
